"""Fixtures of the service tests: real servers on loopback ports, real HTTP clients."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.service.server import Server  # noqa: E402


@pytest.fixture()
def vectors() -> np.ndarray:
    """Unit vectors of dimension 32 (a vector-only index needs no encoder: fast)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 32)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.fixture()
def server(tmp_path):
    """A served empty root with small limits (vector-only work)."""
    root = tmp_path / "root"
    root.mkdir()
    with Server(root, "--max-batch", "500", "--max-body-bytes", "2000000") as srv:
        yield srv
