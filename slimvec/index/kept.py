"""The full vectors an index kept (``--keep-full``), read back in a fixed order for ``rebuild``.

Two homes, one reader interface (:class:`KeptVectors`):

- a memory-mapped side file (:class:`~slimvec.connectors.fullvectors.FullVectors`: FAISS,
  hnswlib, and any float16 copy): the live ids in ascending order (the last row of an id wins, as
  in searches; deleted ids and their tombstones are skipped), payloads read from the store in
  batches with ``get_payloads``;
- the store itself (Qdrant Edge, qdrant-client local mode keep float32 full vectors as the named
  vector ``full``): points scrolled in id order with their payloads.

Both orders are fixed, so a rebuild resumes from a row number.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.index.manifest import Manifest

__all__ = ["KeptVectors", "open_kept"]


class KeptVectors(abc.ABC):
    """The kept full vectors of an index, with their ids and payloads.

    Attributes
    ----------
    dim : int
        Full dimension.
    where : str
        What holds them (for messages).
    """

    dim: int
    where: str

    @abc.abstractmethod
    def count(self) -> int:
        """Vectors kept."""

    @abc.abstractmethod
    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        """A uniform sample of up to ``n`` full vectors, float32 (n, dim)."""

    @abc.abstractmethod
    def batches(self, start: int, size: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray, list[Any], int]]:
        """``(ids, full vectors, payloads, next_row)`` from row ``start`` on, in the fixed order."""

    def close(self) -> None:
        """Release what was opened."""

    def __enter__(self) -> KeptVectors:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _SideFile(KeptVectors):
    def __init__(self, folder: Path, manifest: Manifest) -> None:
        from slimvec.connectors import make_store
        from slimvec.connectors.fullvectors import FullVectors
        from slimvec.index.folder import store_folder

        if manifest.full is None:
            raise ConfigError(f"{folder} keeps no full vectors to read back.")
        self.full = FullVectors.open(folder / str(manifest.full.dir))
        self.dim, self.where = int(self.full.dim), str(folder / str(manifest.full.dir))
        # the live ids, sorted: a re-upserted id once (its last row wins in get), a deleted one
        # (its last row a tombstone, id -1 - id) not at all (issue 40 item 6)
        self.ids = self.full.ids()
        self.store = make_store(manifest.store, store_folder(folder)).open()

    def count(self) -> int:
        return int(len(self.ids))

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        rng = np.random.default_rng(seed)
        pick = np.sort(rng.choice(len(self.ids), size=min(int(n), len(self.ids)), replace=False))
        return self.full.get(self.ids[pick])[0]

    def batches(self, start: int, size: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray, list[Any], int]]:
        for lo in range(int(start), len(self.ids), int(size)):
            ids = self.ids[lo:lo + int(size)]
            vectors, _ = self.full.get(ids)
            yield ids, vectors, self.store.get_payloads(ids.tolist()), lo + len(ids)

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            self.full.close()


class _InStore(KeptVectors):
    """Qdrant points scrolled in id order (named vector ``full``): through the migrate sources,
    or through a store the caller has open (a Qdrant Edge shard cannot be opened twice)."""

    def __init__(self, folder: Path, manifest: Manifest, store: Any = None) -> None:
        from slimvec.connectors import make_store
        from slimvec.connectors.qdrant_readers import QdrantEdgeSource, QdrantSource
        from slimvec.index.folder import store_folder

        if store is None:
            spec_store = make_store(manifest.store, store_folder(folder))
            loc = str(spec_store.location)
            self.where = f"{manifest.store} at {loc}"
            if "collection" in spec_store.options:  # qdrant-client names its collection
                self.src: Any = QdrantSource(loc, str(spec_store.options["collection"]),
                                             self.where, "full")
            else:  # a Qdrant Edge shard folder
                self.src = QdrantEdgeSource(Path(loc), self.where, vector="full")
            self.dim, self._scroll, self._count = int(self.src.dim), self.src._scroll, \
                self.src.count
        else:
            self.src, self.where = None, f"{manifest.store} at {store.location}"
            self.dim, self._count = int(manifest.dim_in), store.count
            self._scroll = _open_store_scroll(store)

    def count(self) -> int:
        return int(self._count())

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        total = self.count()
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(total, size=min(int(n), total), replace=False))
        out, j = np.empty((len(rows), self.dim), np.float32), 0
        for _, full, _, next_row in self.batches(0, 2048):
            lo = next_row - len(full)
            while j < len(rows) and rows[j] < next_row:
                out[j] = full[rows[j] - lo]
                j += 1
            if j == len(rows):
                break
        return out[:j]

    def batches(self, start: int, size: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray, list[Any], int]]:
        offset, row = None, 0
        while row < start:  # skip committed rows cheaply (ids only)
            page, offset = self._scroll(offset, min(int(size) * 4, start - row), False)
            row += len(page)
            if offset is None or not page:
                return
        while True:
            page, offset = self._scroll(offset, int(size), True)
            if not page:
                return
            row += len(page)
            ids = np.array([int(p.id) for p in page], dtype=np.int64)
            vecs = [_full_of(p.vector) for p in page]
            full = np.array([v if v is not None else [np.nan] * self.dim for v in vecs],
                            dtype=np.float32).reshape(len(page), self.dim)
            yield ids, full, [dict(p.payload or {}) for p in page], row
            if offset is None:
                return

    def close(self) -> None:
        if self.src is not None:
            self.src.close()


def _full_of(vector: Any) -> Any:
    """The named vector ``full`` of a point (``None`` when it has none: a NaN row, rejected)."""
    return vector.get("full") if isinstance(vector, dict) else None


def _open_store_scroll(store: Any) -> Any:
    """``scroll(offset, limit, with_data) -> (points, next offset)`` over an open Qdrant Edge or
    qdrant-client store (the service's read-only index)."""
    if "collection" not in store.options:  # Qdrant Edge: one shard, no collection
        import qdrant_edge as q

        def edge(offset: Any, limit: int, with_data: bool) -> Any:
            return store._require().scroll(q.ScrollRequest(
                offset=offset, limit=int(limit), with_payload=with_data, with_vector=with_data))
        return edge

    def client(offset: Any, limit: int, with_data: bool) -> Any:
        return store._require().scroll(store.options["collection"], limit=int(limit),
                                       offset=offset, with_payload=with_data,
                                       with_vectors=["full"] if with_data else False)
    return client


def open_kept(folder: Path, manifest: Manifest, store: Any = None) -> KeptVectors:
    """The reader of the full vectors ``folder``'s index kept.

    ``store``: the index's store, already open (read through it instead of opening the store
    again, which Qdrant Edge refuses while a shard is open).

    Raises
    ------
    ConfigError
        The index keeps no full vectors (the message says how to get them).
    """
    info = manifest.full
    if info is None:
        raise ConfigError(
            f"{folder} keeps no full vectors, so its recipe cannot change without re-embedding "
            "every text. Re-ingest it once with full vectors kept (slimvec ingest SRC --index "
            f"{folder} --rebuild --keep-full, or the default recipe, which keeps them as "
            "float16), or for vectors from another system slimvec migrate --keep-full; later "
            "recipe changes then take seconds (slimvec rebuild).")
    if info.dir:
        return _SideFile(folder, manifest)
    if info.in_store:
        return _InStore(folder, manifest, store)
    raise ConfigError(f"{folder}: the manifest records full vectors ({info.dtype}) but neither a "
                      "side-file folder nor a store that holds them; the manifest is damaged. "
                      "Re-ingest with --keep-full.")
