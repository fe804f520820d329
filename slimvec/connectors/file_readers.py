"""The readers of FAISS and hnswlib files and store folders (``slimvec migrate --from``).

Declared as the ``reader`` of :class:`~slimvec.connectors.faiss_store.FaissStore` and
:class:`~slimvec.connectors.hnsw_store.HnswStore`: ``faiss:FILE`` reads a FAISS index file (ids
from an ``IndexIDMap``) or a slimvec FAISS store folder (its ``ids.npy``, the last copy of each id,
payloads from its SQLite table); ``hnsw:FILE,dim=384,space=cosine`` an hnswlib file (which records
neither) or a slimvec hnsw store folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors.reading import SourceBatch, VectorSource, file_fingerprint, payload_table, payloads_of, require_file, store_metric
from slimvec.errors import ConfigError, StoreError

__all__ = ["FaissSource", "HnswSource"]


class FaissSource(VectorSource):
    """A FAISS index file (ids from an ``IndexIDMap``) or a slimvec FAISS store folder
    (``faiss:FILE`` / ``FILE.faiss``)."""

    @classmethod
    def from_spec(cls, location: str, spec: str, options: dict[str, str]) -> FaissSource:
        """``faiss:FILE``: no options."""
        return cls(Path(location).expanduser(), spec)

    def __init__(self, path: Path, spec: str) -> None:
        import faiss

        self.spec = spec
        path = require_file(path, "FAISS index")
        self.path = path / "index.faiss" if path.is_dir() else path
        try:
            index = faiss.read_index(str(self.path))
        except RuntimeError as exc:
            raise ConfigError(f"{self.path} is not a readable FAISS index: {exc}.") from exc
        ids: np.ndarray | None = None
        self._payloads = payload_table(path)
        if path.is_dir():
            ids = np.load(path / "ids.npy", allow_pickle=False).astype(np.int64)
            self.metric = store_metric(path, "faiss")
        elif isinstance(index, (faiss.IndexIDMap, faiss.IndexIDMap2)) or hasattr(index, "id_map"):
            self._owner = index  # owns the inner index (wrappers below do not): keep it alive
            self._outer = faiss.downcast_index(index)
            ids = faiss.vector_to_array(self._outer.id_map).astype(np.int64)
            index = faiss.downcast_index(self._outer.index)
        if ids is None:
            ids = np.arange(index.ntotal, dtype=np.int64)
        if len(ids) != index.ntotal:
            raise StoreError(f"{self.path}: {index.ntotal} vectors but {len(ids)} ids.")
        if self.metric is None:
            self.metric = {faiss.METRIC_L2: "l2", faiss.METRIC_INNER_PRODUCT: "ip"}.get(
                int(index.metric_type))
            if self.metric is None:
                raise ConfigError(f"{self.path}: FAISS metric type {index.metric_type} is neither L2 "
                                  "nor inner product; slimvec indexes by cosine, ip or l2 only.")
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:  # IVF lists need a direct map to return vectors by position
            ivf.make_direct_map()
        # a slimvec store keeps replaced copies: the last position of each id wins
        _, last = np.unique(ids[::-1], return_index=True)
        self._positions = np.sort(len(ids) - 1 - last)
        self._ids, self._index = ids, index
        self.dim = int(index.d)

    def count(self) -> int:
        return int(len(self._positions))

    def _vectors(self, positions: np.ndarray) -> np.ndarray:
        out = np.empty((len(positions), self.dim), dtype=np.float32)
        for j, p in enumerate(positions.tolist()):
            try:
                out[j] = self._index.reconstruct(int(p))
            except RuntimeError as exc:
                raise StoreError(f"{self.path}: this FAISS index cannot return its vectors "
                                 f"(reconstruct failed: {str(exc).strip().splitlines()[-1]}). Export "
                                 "the vectors to .npy from the original data instead.") from exc
        return out

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        for lo in range(start, self.count(), size):
            pos = self._positions[lo:lo + size]
            ids = self._ids[pos]
            yield SourceBatch(ids, self._vectors(pos), payloads_of(self._payloads, ids), lo + len(pos))

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self._vectors(self._positions[np.asarray(rows, dtype=np.int64)])

    def fingerprint(self) -> dict[str, Any]:
        return file_fingerprint(self.path)


class HnswSource(VectorSource):
    """An hnswlib index file (``dim`` and ``space`` must be given) or a slimvec hnsw store folder
    (``hnsw:FILE,dim=384,space=cosine``)."""

    source_options = ("dim", "space")

    @classmethod
    def from_spec(cls, location: str, spec: str, options: dict[str, str]) -> HnswSource:
        """``hnsw:FILE[,dim=D][,space=cosine|ip|l2]`` (both read from a store folder)."""
        return cls(Path(location).expanduser(), spec,
                   int(options["dim"]) if "dim" in options else None, options.get("space", "cosine"))

    def __init__(self, path: Path, spec: str, dim: int | None = None, space: str = "cosine") -> None:
        import hnswlib

        self.spec = spec
        path = require_file(path, "hnswlib index")
        self._payloads = payload_table(path)
        if path.is_dir():
            from slimvec.connectors.storefiles import read_meta

            meta = read_meta(path, "hnsw")
            dim, space, path = int(meta["dim"]), meta["metric"], path / "index.hnsw"
        if not dim:
            raise ConfigError(f"An hnswlib file does not record its dimension: pass it, e.g. "
                              f"hnsw:{path},dim=384,space=cosine.")
        if space not in ("cosine", "ip", "l2"):
            raise ConfigError(f"hnsw space {space!r} unknown. Known: cosine, ip, l2.")
        self.path, self.dim, self.metric = path, int(dim), space
        self._index = hnswlib.Index(space=space, dim=self.dim)
        try:
            self._index.load_index(str(path))
        except RuntimeError as exc:
            raise ConfigError(f"{path} is not a readable hnswlib index of dimension {dim}: {exc}.") from exc
        self._labels = np.sort(np.asarray(self._index.get_ids_list(), dtype=np.int64))

    def count(self) -> int:
        return int(len(self._labels))

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        for lo in range(start, self.count(), size):
            labels = self._labels[lo:lo + size]
            yield SourceBatch(labels.copy(), self._get(labels), payloads_of(self._payloads, labels),
                              lo + len(labels))

    def _get(self, labels: np.ndarray) -> np.ndarray:
        return np.asarray(self._index.get_items(labels.tolist()), dtype=np.float32).reshape(-1, self.dim)

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self._get(self._labels[np.asarray(rows, dtype=np.int64)])

    def fingerprint(self) -> dict[str, Any]:
        return file_fingerprint(self.path)
