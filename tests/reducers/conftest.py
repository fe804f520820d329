"""Reducer-test fixtures: one torch thread (shared 2-core machine)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One intra-op thread keeps small training runs fast and their time steady."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
