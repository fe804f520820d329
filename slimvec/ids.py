"""Stable 64-bit document ids: the same document always maps to the same store id."""

from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np

__all__ = ["doc_id", "doc_ids", "text_key"]

_MASK = (1 << 63) - 1


def _hash63(data: bytes) -> int:
    value = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") & _MASK
    return value or 1  # 0 is reserved-free but keep ids strictly positive for every backend


def text_key(text: str) -> str:
    """Source id for a document without one: a short hex hash of its text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def doc_id(source_id: str | int) -> int:
    """Store id (in [1, 2**63)) of a document given its source id (string or int).

    Integers that already fit are kept as they are (so ``.npy`` row numbers and existing Qdrant
    integer ids survive a migration); strings are hashed with BLAKE2b.
    """
    if isinstance(source_id, (int, np.integer)) and 0 <= int(source_id) <= _MASK:
        return int(source_id)
    return _hash63(str(source_id).encode("utf-8", "surrogatepass"))


def doc_ids(source_ids: Iterable[str | int]) -> np.ndarray:
    """Vectorised :func:`doc_id` as int64."""
    return np.fromiter((doc_id(s) for s in source_ids), dtype=np.int64)
