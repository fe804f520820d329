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
from slimvec.errors import DimensionMismatchError, PersistenceError
from slimvec.persistence import allocated_bytes, library_versions, read_json, write_json_atomic
from slimvec.reducers import Reducer, load_reducer

__all__ = ["Index", "open_index", "MANIFEST", "INDEX_FORMAT", "INDEX_FORMAT_VERSION"]

MANIFEST = "manifest.json"
INDEX_FORMAT = "slimvec-index"
INDEX_FORMAT_VERSION = 1
REDUCER_DIR = "reducer"
STORE_DIR = "store"


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

    def search(self, queries: str | Sequence[str] | np.ndarray, k: int = 10,
               **params: Any) -> SearchResult:
        """Search with texts or full-dimension vectors; the reducer is applied here.

        Parameters
        ----------
        queries : str, sequence of str, or array of shape (dim_in,) or (n, dim_in)
        k : int
            Results per query.
        **params
            Store search parameters (e.g. ``ef``).

        Returns
        -------
        SearchResult
            ``ids`` (n, k) int64 padded with -1, ``scores`` (n, k), higher is closer.
        """
        reduced = self.reducer.transform(self.embed(queries))
        return self.store.search(reduced, k, **params)

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
        """Release the store."""
        self.store.close()

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
        Not an index, or a corrupted / newer-format manifest or reducer.
    DimensionMismatchError
        The reducer and the stored vectors disagree on dimensions.
    """
    from slimvec.connectors import make_store

    folder = Path(folder)
    manifest = read_manifest(folder)
    reducer = load_reducer(folder / REDUCER_DIR)
    if reducer.n_features_in_ != int(manifest["dim_in"]):
        raise DimensionMismatchError(f"reducer input of {folder}", manifest["dim_in"],
                                     reducer.n_features_in_)
    if reducer.n_components_ != int(manifest["dim_out"]):
        raise DimensionMismatchError(f"reducer output vs stored vectors of {folder}",
                                     manifest["dim_out"], reducer.n_components_)
    store = make_store(manifest["store"], store_folder(folder)).open()
    if store.dim is not None and store.dim != reducer.n_components_:
        raise DimensionMismatchError(f"stored vector dimension of {folder} vs reducer output",
                                     reducer.n_components_, store.dim)
    return Index(folder, manifest, reducer, store)
