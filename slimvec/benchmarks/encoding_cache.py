"""On-disk cache of sentence encodings, keyed by the encoder's fingerprint and each text's hash.

Layout: ``<cache>/<fingerprint>/shard-<n>.keys.npy`` (uint8 (n, 16) BLAKE2b digests of the texts)
beside ``shard-<n>.vecs.npy`` (float32 (n, dim)). Every encode call that meets new texts appends one
shard, so a second run with the same texts encodes nothing and a run with a few new texts encodes
only those. Plain ``.npy`` arrays of numbers, read with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import PersistenceError

__all__ = ["EncodingCache", "default_cache_dir", "text_digest"]

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$SLIMVEC_CACHE/encodings`` or ``~/.cache/slimvec/encodings``."""
    root = os.environ.get("SLIMVEC_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "slimvec") / "encodings"


def text_digest(text: str) -> bytes:
    """16-byte BLAKE2b digest of a text (the cache key of its encoding)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EncodingCache:
    """Encodings of texts by one encoder, persisted between runs.

    Parameters
    ----------
    folder : path-like
        Cache root; the encoder's fingerprint names a sub-folder.
    fingerprint : str
        :attr:`slimvec.encoder.Encoder.fingerprint` of the encoder.
    """

    def __init__(self, folder: str | os.PathLike[str], fingerprint: str) -> None:
        self.folder = Path(folder) / fingerprint
        self._index: dict[bytes, tuple[int, int]] | None = None
        self._shards: list[np.ndarray] = []

    def _load(self) -> dict[bytes, tuple[int, int]]:
        if self._index is not None:
            return self._index
        index: dict[bytes, tuple[int, int]] = {}
        self._shards = []
        for keys_path in sorted(self.folder.glob("shard-*.keys.npy")):
            vecs_path = keys_path.with_name(keys_path.name.replace(".keys.npy", ".vecs.npy"))
            try:
                keys = np.load(keys_path, allow_pickle=False)
                vecs = np.load(vecs_path, allow_pickle=False, mmap_mode="r")
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable encoding cache shard %s: %s", keys_path, exc)
                continue
            if keys.ndim != 2 or keys.shape[1] != 16 or len(keys) != len(vecs):
                log.warning("ignoring inconsistent encoding cache shard %s", keys_path)
                continue
            s = len(self._shards)
            self._shards.append(vecs)
            for i, k in enumerate(keys):
                index[k.tobytes()] = (s, i)
        self._index = index
        return index

    def __len__(self) -> int:
        return len(self._load())

    def get(self, texts: Sequence[str]) -> tuple[np.ndarray | None, list[int]]:
        """Cached vectors for ``texts`` and the positions that are missing.

        Returns
        -------
        vectors : ndarray or None
            (len(texts), dim) with zeros at missing positions; ``None`` when the cache is empty.
        missing : list of int
            Positions of ``texts`` not in the cache.
        """
        index = self._load()
        if not index:
            return None, list(range(len(texts)))
        dim = self._shards[0].shape[1]
        out = np.zeros((len(texts), dim), dtype=np.float32)
        missing = []
        for i, t in enumerate(texts):
            hit = index.get(text_digest(t))
            if hit is None:
                missing.append(i)
            else:
                out[i] = self._shards[hit[0]][hit[1]]
        return out, missing

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Append a shard with the encodings of ``texts``."""
        if not len(texts):
            return
        keys = np.frombuffer(b"".join(text_digest(t) for t in texts), dtype=np.uint8).reshape(-1, 16)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # a name no other writer can pick (two test workers or bench runs may share the cache),
            # each file written under a temporary name and renamed into place, vectors first: a
            # shard only counts once its keys file exists, and never holds another writer's bytes
            base = self.folder / f"shard-{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
            for suffix, array in ((".vecs.npy", np.ascontiguousarray(vectors, dtype=np.float32)),
                                  (".keys.npy", keys)):
                tmp = Path(f"{base}{suffix}.tmp")
                with open(tmp, "wb") as fh:
                    np.save(fh, array, allow_pickle=False)
                os.replace(tmp, f"{base}{suffix}")
        except OSError as exc:
            raise PersistenceError(f"Cannot write the encoding cache in {self.folder}: {exc}. "
                                   "Pass --cache to a writable folder.") from exc
        self._index = None

    def encode(self, encoder: Any, texts: Sequence[str],
               on_progress: Callable[[int], None] | None = None, chunk: int = 512) -> np.ndarray:
        """Vectors of ``texts``: cached ones read, the others encoded with ``encoder`` and stored.

        Parameters
        ----------
        encoder : Encoder
            Anything with ``encode(list[str]) -> ndarray``.
        texts : sequence of str
        on_progress : callable, optional
            Called with the number of texts encoded after every chunk.
        chunk : int
            Texts encoded (and cached) per step, so an interrupted run keeps its work.
        """
        texts = list(texts)
        out, missing = self.get(texts)
        if missing:
            log.info("encoding %d of %d texts (%d cached)", len(missing), len(texts),
                     len(texts) - len(missing))
        for start in range(0, len(missing), chunk):
            pos = missing[start:start + chunk]
            batch = [texts[i] for i in pos]
            vecs = np.asarray(encoder.encode(batch), dtype=np.float32)
            self.put(batch, vecs)
            if out is None:
                out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
            out[pos] = vecs
            if on_progress is not None:
                on_progress(len(pos))
        if out is None:
            out = np.zeros((0, 0), dtype=np.float32)
        return out
