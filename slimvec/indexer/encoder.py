"""Sentence encoders: sentence-transformers models resolved offline, batched, float32, normalised.

Which model a spec names and how it is loaded (offline, without loading bars) lives in
:mod:`slimvec.models`; a folder written by ``slimvec prune`` is rebuilt by
:func:`slimvec.pruning.persist.load_pruned_model` without executing code from it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from slimvec.models import (
    DEFAULT_ENCODER,
    PRUNED_CONFIG,
    auto_device,
    is_pruned_folder,
    load_sentence_transformer,
    model_name,
    resolve_model,
)

__all__ = ["Encoder", "resolve_model", "DEFAULT_ENCODER", "PRUNED_CONFIG", "INGEST_ENCODE_BATCH",
           "default_encoder_threads", "encoder_threads", "busy_cores", "CUDA_ENCODE_BATCH",
           "ingest_encode_batch"]

#: sentences per forward pass when ingesting. sentence-transformers sorts each call by length and
#: pads a pass to its longest sentence, so small passes pad little: on 256-document chunks of the
#: bundled sentences 32 encoded 1.2x faster than 128 (2 cores, MiniLM). The single-process and Ray
#: ingests use the same value so their fit samples (and reducers) are bit-identical.
INGEST_ENCODE_BATCH = 32
#: sentences per forward pass when ingesting on a CUDA device: an accelerator wants hundreds per
#: pass (issue 36, H200: 2,991 docs/s in passes of 32, 10,989 in passes of 256); a window of
#: several passes is still sorted by length, so they pad little
CUDA_ENCODE_BATCH = 256

log = logging.getLogger(__name__)


class Encoder:
    """A sentence encoder producing L2-normalised float32 vectors.

    Parameters
    ----------
    spec : str or path, default "minilm"
        Model to load (see module docstring).
    device : str, default "auto"
        ``cuda`` when available, else ``cpu``; or any torch device string.
    batch_size : int, default 64
        Sentences per forward pass.
    doc_prefix, query_prefix : str, default ""
        Put before each document (:meth:`encode`) / query (:meth:`encode_queries`).
    """

    def __init__(self, spec: str | os.PathLike[str] | None = None, device: str = "auto",
                 batch_size: int = 64, doc_prefix: str = "", query_prefix: str = "") -> None:
        self.spec = str(spec or DEFAULT_ENCODER)
        self.doc_prefix, self.query_prefix = doc_prefix, query_prefix
        self.path = resolve_model(self.spec)
        self.device = auto_device(device)
        self.batch_size = int(batch_size)
        self.model = self._load()
        self.dim = int(self.model.get_embedding_dimension()
                       if hasattr(self.model, "get_embedding_dimension")
                       else self.model.get_sentence_embedding_dimension())

    def _load(self) -> Any:
        if is_pruned_folder(self.path):
            from slimvec.pruning.persist import load_pruned_model

            return load_pruned_model(self.path, device=self.device)
        return load_sentence_transformer(self.path, device=self.device)

    @property
    def name(self) -> str:
        """A short stable name for results and caches."""
        return model_name(self.spec)

    @property
    def fingerprint(self) -> str:
        """Hash of the model's weight files' sizes and names, to key encoding caches."""
        digest = hashlib.sha256(self.name.encode())
        if self.doc_prefix:  # a document's vector depends on it
            digest.update(b"doc_prefix:" + self.doc_prefix.encode())
        for f in sorted(self.path.rglob("*")):
            if f.is_file() and f.suffix in (".safetensors", ".bin", ".json"):
                digest.update(f.name.encode())
                digest.update(str(f.stat().st_size).encode())
        return digest.hexdigest()[:16]

    @property
    def max_seq_length(self) -> int:
        """Tokens beyond this are truncated by the tokenizer."""
        return int(getattr(self.model, "max_seq_length", 512) or 512)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts (with special tokens) before truncation."""
        tok = self.model.tokenizer
        enc = tok([self.doc_prefix + t for t in texts], add_special_tokens=True,
                  truncation=False)["input_ids"]
        return [len(ids) for ids in enc]

    def encode(self, texts: Iterable[str], show_progress: bool = False) -> np.ndarray:
        """Encode documents, each after :attr:`doc_prefix`, to float32 L2-normalised vectors of
        shape (n, dim)."""
        return self._encode([self.doc_prefix + t for t in texts], show_progress)

    def _encode(self, texts: list[str], show_progress: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode_queries(self, texts: Iterable[str]) -> np.ndarray:
        """Encode search queries as :meth:`encode` does, each after :attr:`query_prefix`."""
        return self._encode([self.query_prefix + t for t in texts], False)


def ingest_encode_batch(device: str, batch_size: int = 256) -> int:
    """Sentences per forward pass of an ingest on ``device``: :data:`CUDA_ENCODE_BATCH` on a CUDA
    device, else :data:`INGEST_ENCODE_BATCH` (at most the ingest's ``batch_size`` there)."""
    if str(auto_device(device)).startswith("cuda"):
        return CUDA_ENCODE_BATCH
    return min(int(batch_size), INGEST_ENCODE_BATCH)


def default_encoder_threads(load: float | None = None, cpus: int | None = None) -> int:
    """Torch threads for the ingest encoder: the cores other work leaves free (at least 1).

    ``cpus`` minus the cores other processes keep busy, rounded (``load``; default
    :func:`busy_cores`, sampled for a quarter of a second), between 1 and ``cpus``. Both ends are
    measured on the 2-core development VM, MiniLM, ``torch.set_num_threads`` alternated
    (docs/benchmarks/ingest.md): with nothing else running, 92 docs/s on one thread and 151 on two
    (issue 28 item 5, 3,000 real sentences); with other jobs running (load 8-9), 83-96 on one and
    22-31 on two (issue 27 item 8: threads spinning against other work). The encoder runs beside
    the thread that reduces and writes each batch, which takes a small share of a core.
    """
    cpus = int(cpus or os.cpu_count() or 1)
    if load is None:
        load = busy_cores()
    if load is None:  # no way to tell on this platform: the cautious choice
        return max(1, cpus - 1)
    return int(min(cpus, max(1, cpus - round(float(load)))))


def busy_cores(seconds: float = 0.25) -> float | None:
    """Cores kept busy by other processes right now: the machine's busy CPU time over
    ``seconds`` (``/proc/stat``) minus this process's, over the wall time. The 1-minute load
    average lags (a job that just ended still counts, this process's own last minute too); None
    where ``/proc/stat`` cannot be read (then :func:`os.getloadavg`, if that works)."""
    import time

    from slimvec.measure import cpu_seconds

    first = cpu_seconds()
    if first is None:
        try:
            return float(os.getloadavg()[0])
        except OSError:
            return None
    time.sleep(seconds)
    last = cpu_seconds()
    assert last is not None
    busy, own, wall = (b - a for a, b in zip(first, last))
    return max(0.0, busy - own) / max(wall, 1e-6)


class _torch_threads:
    """Set torch's intra-op threads for a block and restore them after."""

    def __init__(self, n: int) -> None:
        self.n = max(1, int(n))
        self.old: int | None = None

    def __enter__(self) -> _torch_threads:
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        if self.old is not None:
            torch.set_num_threads(self.old)


def encoder_threads(n: int) -> Any:
    """Context manager: torch's intra-op threads set to ``n`` for a block, restored after."""
    return _torch_threads(n)
