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
#: pass (issue 36, H200, MiniLM, 200k real texts: 2,991 docs/s in passes of 32, 7,540 of 256,
#: 8,551 of 1,024); a window of several passes is still sorted by length, so they pad little
CUDA_ENCODE_BATCH = 1024

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
        #: the text path without sentence-transformers' per-text Python (see :class:`_DirectText`)
        self._direct = _DirectText.probe(self.model)
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
        if self._direct is not None and not show_progress:
            return self._direct.encode(self.model, texts, self.batch_size, self.dim)
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


class _DirectText:
    """Texts to vectors as ``SentenceTransformer.encode`` computes them, without its per-text
    Python: the fast tokenizer's Rust backend tokenizes a pass (in parallel, without the GIL) and
    the model's modules run on the tensors. sentence-transformers infers each input's modality and
    transformers re-validates each text (about 40 % of an encoder thread's time on an H200, issue
    36), which on a GPU machine is what the pipeline's other threads then wait for.

    Used only when :meth:`probe` finds the backend's features identical to the model's own on
    probe texts (long, empty, accented, CJK); otherwise the model's ``encode`` is used.
    """

    PROBES = ("", "a", "Hello, World!", "Ünïcödé façade — naïve café", "日本語のテキストです",
              "word " * 400, "  leading and trailing spaces  ", "tab\tand\nnewline")

    def __init__(self, backend: Any, keys: dict[str, Any], type_ids: bool) -> None:
        #: the Rust tokenizer (truncation and padding set); the features that are not tensors
        #: (sentence-transformers 6 adds ``modality``); whether the model takes token type ids
        self.backend, self.keys, self.type_ids = backend, keys, type_ids

    @classmethod
    def probe(cls, model: Any) -> _DirectText | None:
        """The direct path for ``model``, or None when its features would differ."""
        try:
            import torch
            from tokenizers import Tokenizer

            tok = model[0].tokenizer
            if type(model[0]).__name__ != "Transformer" or not getattr(tok, "is_fast", False):
                return None
            backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
            backend.enable_truncation(max_length=int(model.max_seq_length))
            backend.enable_padding(pad_id=int(tok.pad_token_id), pad_token=str(tok.pad_token),
                                   pad_type_id=int(getattr(tok, "pad_token_type_id", 0) or 0))
            ref = model.preprocess(list(cls.PROBES))
            direct = cls(backend, {k: v for k, v in ref.items() if not isinstance(v, torch.Tensor)},
                         "token_type_ids" in ref)
            got = direct.features(list(cls.PROBES))
            if set(got) != set(ref) or not all(
                    torch.equal(v, got[k]) for k, v in ref.items() if isinstance(v, torch.Tensor)):
                log.info("the encoder's direct text path differs from its own; not used")
                return None
            return direct
        except Exception as exc:  # noqa: BLE001 - any surprise: the model's own path, always right
            log.info("no direct text path for this encoder (%s: %s)", type(exc).__name__, exc)
            return None

    def features(self, texts: list[str]) -> dict[str, Any]:
        """The model's input features of one pass of ``texts``."""
        import torch

        def tensor(rows: list[list[int]]) -> Any:
            return torch.from_numpy(np.array(rows, dtype=np.int64))

        encs = self.backend.encode_batch(texts)
        out: dict[str, Any] = {"input_ids": tensor([e.ids for e in encs]),
                               "attention_mask": tensor([e.attention_mask for e in encs])}
        if self.type_ids:
            out["token_type_ids"] = tensor([e.type_ids for e in encs])
        return {**out, **self.keys}

    def encode(self, model: Any, texts: list[str], batch_size: int, dim: int) -> np.ndarray:
        """L2-normalised float32 vectors of ``texts``, in passes of ``batch_size`` sorted by
        length as sentence-transformers sorts them."""
        import torch

        order = np.argsort([-len(t) for t in texts])
        out = np.empty((len(texts), dim), dtype=np.float32)
        device = model.device
        with torch.inference_mode():
            for lo in range(0, len(texts), batch_size):
                idx = order[lo:lo + batch_size]
                feats = {k: v.to(device) if isinstance(v, torch.Tensor) else v
                         for k, v in self.features([texts[i] for i in idx]).items()}
                emb = model(feats)["sentence_embedding"]
                emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                out[idx] = emb.float().cpu().numpy()
        return out


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
