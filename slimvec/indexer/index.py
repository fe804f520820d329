"""An index is a folder: ``manifest.json``, the fitted ``reducer/`` artifact and the store data.

``manifest.json`` records the encoder, reducer and store specs, the dimensions, library versions,
the document count and ingestion progress. :func:`open_index` (exported as ``slimvec.open``)
loads an index for searching with vectors or texts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.errors import ConfigError, DimensionMismatchError, IndexBusyError, PersistenceError
from slimvec.persistence import (
    allocated_bytes, library_versions, read_json, sha256_file, write_json_atomic,
)
from slimvec.reducers import Reducer, load_reducer

__all__ = ["Index", "open_index", "MANIFEST", "INDEX_FORMAT", "INDEX_FORMAT_VERSION",
           "verify_index_files", "reducer_checksum", "store_checksums", "check_store_dim"]

MANIFEST = "manifest.json"
INDEX_FORMAT = "slimvec-index"
INDEX_FORMAT_VERSION = 1
REDUCER_DIR = "reducer"
STORE_DIR = "store"
#: stores whose files are replaced whole by atomic rename at each flush: readers need no lock, and
#: a completed index records a SHA-256 of each file
SNAPSHOT_STORES = ("faiss", "hnsw")
#: stores whose engine takes its files for itself: readers take the shared index lock
LOCKED_STORES = ("qdrant-edge", "qdrant")
_VOLATILE_SUFFIXES = ("-wal", "-shm", "-journal", ".lock", ".tmp")


def reducer_checksum(folder: str | os.PathLike[str]) -> str:
    """SHA-256 of the index's ``reducer/config.json`` (which records its state file's SHA-256)."""
    return sha256_file(Path(folder) / REDUCER_DIR / "config.json")


def _store_name(manifest: dict[str, Any]) -> str:
    return str(manifest.get("store", "")).partition(":")[0].strip().lower()


def store_checksums(folder: str | os.PathLike[str], manifest: dict[str, Any]) -> dict[str, str]:
    """SHA-256 of each file of a snapshot-style store (FAISS, hnswlib) in the index folder."""
    base = store_folder(Path(folder))
    if _store_name(manifest) not in SNAPSHOT_STORES or not base.is_dir():
        return {}
    out = {}
    for f in sorted(base.rglob("*")):
        if f.is_file() and not f.name.startswith(".") and not f.name.endswith(_VOLATILE_SUFFIXES):
            out[f.relative_to(Path(folder)).as_posix()] = sha256_file(f)
    return out


def verify_index_files(folder: str | os.PathLike[str], manifest: dict[str, Any]) -> None:
    """Check the SHA-256 recorded in the manifest for the reducer and (completed) store files.

    Raises
    ------
    PersistenceError
        A file differs from what the manifest recorded; the message names it.
    """
    folder = Path(folder)
    recorded = dict(manifest.get("sha256") or {})
    recorded.update(manifest.get("store_sha256") or {})
    for rel, expected in recorded.items():
        path = folder / rel
        if not path.is_file():
            raise PersistenceError(f"{path} is missing (recorded in {folder / MANIFEST}).")
        actual = sha256_file(path)
        if actual != expected:
            raise PersistenceError(
                f"{path}: SHA-256 mismatch (manifest {expected[:12]}..., file {actual[:12]}...). "
                "The file was modified or corrupted; restore it or rebuild the index "
                "(slimvec ingest ... --rebuild)."
            )


def check_store_dim(folder: Path, store: VectorStore, reducer: Reducer) -> None:
    """Refuse a store whose vectors do not have the reducer's output dimension."""
    if store.dim is not None and int(store.dim) != int(reducer.n_components_):
        store.close()
        raise DimensionMismatchError(f"stored vector dimension of {folder} vs reducer output",
                                     reducer.n_components_, store.dim,
                                     "The store and the reducer come from different indexes.")


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check an index manifest; :class:`PersistenceError` names the file on problems."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise PersistenceError(
            f"{Path(folder)} is not a slimvec index (no {MANIFEST}). Create one with 'slimvec ingest'."
        )
    manifest = read_json(path)
    if manifest.get("format") != INDEX_FORMAT:
        raise PersistenceError(f"{path}: expected format {INDEX_FORMAT!r}, got {manifest.get('format')!r}.")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > INDEX_FORMAT_VERSION:
        raise PersistenceError(
            f"{path}: format_version {version!r} is newer than this slimvec supports "
            f"({INDEX_FORMAT_VERSION}); upgrade slimvec."
        )
    return manifest


def write_manifest(folder: str | os.PathLike[str], manifest: dict[str, Any]) -> None:
    """Atomically write the manifest (fsynced), stamping format, versions and update time."""
    manifest = dict(manifest)
    manifest.update(format=INDEX_FORMAT, format_version=INDEX_FORMAT_VERSION,
                    versions=library_versions(), updated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    write_json_atomic(Path(folder) / MANIFEST, manifest)


class Index:
    """A searchable slimvec index folder.

    Use :func:`open_index` (``slimvec.open(DIR)``) rather than the constructor.

    Attributes
    ----------
    folder : Path
    manifest : dict
    reducer : Reducer
    store : VectorStore
    """

    def __init__(self, folder: Path, manifest: dict[str, Any], reducer: Reducer,
                 store: VectorStore) -> None:
        self.folder = folder
        self.manifest = manifest
        self.reducer = reducer
        self.store = store
        self._encoder: Any = None
        self._lock: Any = None
        self._full: Any = None

    # ----------------------------------------------------------------- encoder
    @property
    def encoder(self) -> Any:
        """The index's encoder, loaded on first use (``None`` for vector-only indexes)."""
        if self._encoder is None and self.manifest.get("encoder"):
            from slimvec.indexer.encoder import Encoder

            self._encoder = Encoder(self.manifest["encoder"])
            if self._encoder.dim != self.dim_in:
                raise DimensionMismatchError(
                    f"encoder {self.manifest['encoder']} output vs reducer input of {self.folder}",
                    self.dim_in, self._encoder.dim)
        return self._encoder

    @property
    def dim_in(self) -> int:
        """Input (encoder) dimension."""
        return int(self.manifest["dim_in"])

    @property
    def dim_out(self) -> int:
        """Stored (reduced) dimension."""
        return int(self.manifest["dim_out"])

    # ------------------------------------------------------------------ search
    def embed(self, queries: str | Sequence[str] | np.ndarray) -> np.ndarray:
        """Full-dimension query vectors from texts (encoded) or vectors (checked)."""
        if isinstance(queries, str):
            queries = [queries]
        if isinstance(queries, np.ndarray) or (
            isinstance(queries, (list, tuple)) and queries and not isinstance(queries[0], str)
        ):
            vecs = np.asarray(queries, dtype=np.float32)
            if vecs.ndim == 1:
                vecs = vecs[None, :]
            if vecs.shape[1] != self.dim_in:
                raise DimensionMismatchError("query vectors", self.dim_in, vecs.shape[1],
                                             "Queries must come from the index's original encoder.")
            return vecs
        if self.encoder is None:
            raise PersistenceError(f"{self.folder} was built from vectors and has no encoder: "
                                   "pass query vectors instead of texts.")
        return self.encoder.encode(list(queries))

    @property
    def full_vectors(self) -> Any:
        """The on-disk full vectors (``--keep-full``), opened on first use; ``None`` without."""
        if self._full is None and (self.manifest.get("full") or {}).get("dir"):
            from slimvec.connectors.fullvectors import FullVectors

            self._full = FullVectors.open(self.folder / self.manifest["full"]["dir"])
        return self._full

    def search(self, queries: str | Sequence[str] | np.ndarray, k: int = 10,
               rescore: int | None = None, **params: Any) -> SearchResult:
        """Search with texts or full-dimension vectors; the reducer is applied here.

        Parameters
        ----------
        queries : str, sequence of str, or array of shape (dim_in,) or (n, dim_in)
        k : int
            Results per query.
        rescore : int, optional
            Two-stage search: fetch ``k * rescore`` candidates from the reduced index and re-rank
            them with the full vectors kept on disk (index built with ``--keep-full``).
        **params
            Store search parameters (e.g. ``ef``).

        Returns
        -------
        SearchResult
            ``ids`` (n, k) int64 padded with -1, ``scores`` (n, k), higher is closer (full-space
            similarities when rescoring).
        """
        vectors = self.embed(queries)
        reduced = getattr(self.reducer, "transform_query", self.reducer.transform)(vectors)  # leanvec: query side
        if not rescore:
            return self.store.search(reduced, k, **params)
        if int(rescore) < 1:
            raise ConfigError(f"rescore must be a positive integer (candidates per result), got {rescore!r}.")
        if (self.manifest.get("full") or {}).get("in_store"):  # Qdrant Edge named vectors
            return self.store.search_rescored(reduced, vectors, k, k * int(rescore), **params)
        if self.full_vectors is None:
            raise ConfigError(f"{self.folder} keeps no full vectors, so it cannot rescore. Rebuild it "
                              "with --keep-full (slimvec migrate / ingest), or search without rescore.")
        candidates = self.store.search(reduced, k * int(rescore), **params)
        return self.full_vectors.rerank(vectors, candidates, k)

    def payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Stored payloads (text and source fields) of ids."""
        return self.store.get_payloads([int(i) for i in ids])

    # -------------------------------------------------------------------- info
    def info(self) -> dict[str, Any]:
        """Count, dims, specs and bytes on disk."""
        return {
            "index": str(self.folder),
            "count": int(self.store.count()),
            "dim_in": self.dim_in,
            "dim_out": self.dim_out,
            "encoder": self.manifest.get("encoder"),
            "reducer": self.manifest.get("reducer"),
            "store": self.manifest.get("store"),
            "bytes": allocated_bytes(self.folder) + (0 if self.store.local else 0),
            "store_bytes": int(self.store.size_bytes()),
            "reducer_bytes": allocated_bytes(self.folder / REDUCER_DIR),
        }

    def close(self) -> None:
        """Release the store (and the reader lock of a Qdrant Edge / local Qdrant index)."""
        try:
            self.store.close()
            if self._full is not None:
                self._full.close()
                self._full = None
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def store_folder(index_dir: Path) -> Path:
    """Where store data lives when the store spec gives no location."""
    return index_dir / STORE_DIR


def open_index(folder: str | os.PathLike[str]) -> Index:
    """Open an index folder for searching (``slimvec.open``).

    Raises
    ------
    PersistenceError
        Not an index, or a corrupted / newer-format manifest, reducer or store file (SHA-256).
    DimensionMismatchError
        The reducer and the stored vectors disagree on dimensions.
    IndexBusyError
        Another process is writing an index whose store cannot be read meanwhile (Qdrant Edge,
        qdrant-client local mode), or is creating the index.
    """
    from slimvec.indexer.locking import IndexLock, is_being_written

    folder = Path(folder)
    lock: IndexLock | None = None
    try:
        manifest = read_manifest(folder)
        if _store_name(manifest) in LOCKED_STORES and "://" not in str(manifest.get("store")):
            lock = IndexLock(folder, exclusive=False).acquire()
        index = _open_unlocked(folder, manifest)
    except IndexBusyError:
        raise
    except Exception as exc:
        if lock is not None:
            lock.release()
        if is_being_written(folder):
            raise IndexBusyError(
                f"{folder}: the index is being written by another process and could not be read "
                f"meanwhile ({exc}); retry when the ingest finishes."
            ) from exc
        raise
    index._lock = lock
    return index


def _open_unlocked(folder: Path, manifest: dict[str, Any]) -> Index:
    from slimvec.connectors import make_store

    if (manifest.get("progress") or {}).get("state", "done") == "done":
        verify_index_files(folder, manifest)
    elif manifest.get("sha256"):
        verify_index_files(folder, {"sha256": manifest["sha256"]})
    reducer = load_reducer(folder / REDUCER_DIR)
    if reducer.n_features_in_ != int(manifest["dim_in"]):
        raise DimensionMismatchError(f"reducer input of {folder}", manifest["dim_in"],
                                     reducer.n_features_in_)
    if reducer.n_components_ != int(manifest["dim_out"]):
        raise DimensionMismatchError(f"reducer output vs stored vectors of {folder}",
                                     manifest["dim_out"], reducer.n_components_)
    store = make_store(manifest["store"], store_folder(folder)).open()
    check_store_dim(folder, store, reducer)
    return Index(folder, manifest, reducer, store)
