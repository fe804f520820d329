"""Tokenise texts for a sentence-transformers model and embed them with gradients."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch


def model_device(model: Any) -> torch.device:
    """Device of the model's parameters."""
    return next(model.parameters()).device


@contextmanager
def max_length(model: Any, length: int | None) -> Iterator[None]:
    """Temporarily truncate inputs to ``length`` tokens (no-op when ``None``)."""
    if length is None:
        yield
        return
    old = model.max_seq_length
    model.max_seq_length = int(length)
    try:
        yield
    finally:
        model.max_seq_length = old


def features(model: Any, texts: Sequence[str]) -> dict[str, Any]:
    """Tokenised inputs on the model's device (``preprocess`` in sentence-transformers >= 6)."""
    prep = getattr(model, "preprocess", None) or model.tokenize
    feats = prep(list(texts))
    device = model_device(model)
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in feats.items()}


def embed(model: Any, feats: dict[str, Any]) -> torch.Tensor:
    """L2-normalised sentence embeddings ``(n, dim)`` of tokenised inputs, keeping the graph."""
    out = model(dict(feats))["sentence_embedding"]
    return torch.nn.functional.normalize(out, dim=-1)
