"""The readers of Qdrant collections (``slimvec migrate --from``): Qdrant Edge shard folders
and qdrant-client collections (server or local folder), points scrolled in id order.

Declared as the ``reader`` of :class:`~slimvec.connectors.qdrant_edge.QdrantEdgeStore` and
:class:`~slimvec.connectors.qdrant.QdrantStore`; the index's kept full vectors are read through
them too (:mod:`slimvec.index.kept`).
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors.reading import SourceBatch, VectorSource, require_file, stack_vectors, store_metric
from slimvec.documents import Reject
from slimvec.errors import ConfigError, MissingDependencyError
from slimvec.ids import doc_ids

__all__ = ["QdrantEdgeSource", "QdrantSource", "ScrollSource"]

log = logging.getLogger(__name__)


def _point_vector(vector: Any, name: str | None, where: str) -> list[float] | None:
    """The chosen vector of a point; ``None`` when the point lacks it (a reject, not a crash)."""
    if isinstance(vector, dict):
        if name is None and len(vector) <= 1:
            return list(next(iter(vector.values()))) if vector else None
        if name is None:
            raise ConfigError(f"{where} has named vectors ({', '.join(vector)}): choose one with "
                              ",vector=NAME in the --from spec.")
        return list(vector[name]) if vector.get(name) is not None else None
    if vector is None:
        return None
    return list(vector)


class ScrollSource(VectorSource):
    """Common scrolling of Qdrant points ordered by id; resuming skips rows without vectors."""

    vector_name: str | None = None

    @abc.abstractmethod
    def _scroll(self, offset: Any, limit: int, with_data: bool) -> tuple[list[Any], Any]:
        """One page: records and the next offset (None at the end)."""

    def _scan_dim(self, limit: int = 4096) -> int:
        """Length of the chosen vector of the first point that has it (the engine enforces one
        size per vector name; a first point without the named vector must not make it 0)."""
        offset, seen = None, 0
        while seen < limit:
            page, offset = self._scroll(offset, 256, True)
            for p in page:
                vec = _point_vector(p.vector, self.vector_name, self.spec)
                if vec is not None:
                    return len(vec)
            seen += len(page)
            if offset is None or not page:
                break
        return 0

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        offset, row = None, 0
        while row < start:  # skip committed rows cheaply (ids only)
            page, offset = self._scroll(offset, min(size * 4, start - row), False)
            row += len(page)
            if offset is None or not page:
                return
        while True:
            page, offset = self._scroll(offset, size, True)
            if not page:
                return
            row += len(page)
            first = row - len(page)
            vecs, payloads, raw_ids, kept_rows, rejects = [], [], [], [], []
            for j, p in enumerate(page):
                vec = _point_vector(p.vector, self.vector_name, self.spec)
                if vec is None:  # e.g. a point without the chosen named vector
                    rejects.append(Reject(self.spec, first + j, None, "vector",
                                          f"point {p.id} has no vector"
                                          f"{f' {self.vector_name!r}' if self.vector_name else ''}",
                                          ""))
                    continue
                vecs.append(np.asarray(vec, np.float32))
                pl = dict(p.payload or {})
                if not isinstance(p.id, int):
                    pl.setdefault("source_id", str(p.id))  # UUID ids are hashed: keep the original
                payloads.append(pl)
                raw_ids.append(p.id)
                kept_rows.append(first + j)
            ids = doc_ids([i if isinstance(i, int) else str(i) for i in raw_ids], self.id_rule)
            yield SourceBatch(ids, stack_vectors(vecs, self.dim), payloads, row, rejects,
                              kept_rows if rejects else None)
            if offset is None:
                return


class QdrantEdgeSource(ScrollSource):
    """A Qdrant Edge shard folder (or a slimvec qdrant-edge store folder holding ``shard/``):
    ``qdrant-edge:PATH[,vector=NAME]``."""

    source_options = ("vector",)

    @classmethod
    def from_spec(cls, location: str, spec: str, options: dict[str, str]) -> QdrantEdgeSource:
        """``qdrant-edge:PATH[,vector=NAME]``."""
        return cls(Path(location).expanduser(), spec, **options)

    def __init__(self, path: Path, spec: str, vector: str | None = None) -> None:
        import qdrant_edge as q

        self.spec, self._q, self.vector_name = spec, q, vector
        path = require_file(path, "Qdrant Edge shard")
        if (path / "shard").is_dir():
            self.metric = store_metric(path, "qdrant-edge")
            path = path / "shard"
        try:
            self._shard: Any = q.EdgeShard.load(str(path))
        except Exception as exc:  # the engine raises its own types
            raise ConfigError(f"{path} is not a loadable Qdrant Edge shard: {exc}.") from exc
        self.path = path
        self.dim = self._scan_dim()  # Qdrant Edge does not expose its vector config

    def _scroll(self, offset: Any, limit: int, with_data: bool) -> tuple[list[Any], Any]:
        q = self._q
        return self._shard.scroll(q.ScrollRequest(offset=offset, limit=int(limit),
                                                  with_payload=with_data, with_vector=with_data))

    def count(self) -> int:
        return int(self._shard.count(self._q.CountRequest(exact=True)))

    def close(self) -> None:
        if self._shard is not None:
            self._shard.close()
            self._shard = None


class QdrantSource(ScrollSource):
    """A Qdrant collection through qdrant-client: server URL (``QDRANT_API_KEY``) or local folder
    (``qdrant:URL/COLLECTION``, ``qdrant:PATH/COLLECTION`` or ``qdrant:PATH,collection=C``)."""

    source_options = ("collection", "vector")

    @classmethod
    def from_spec(cls, location: str, spec: str, options: dict[str, str]) -> QdrantSource:
        """``qdrant:URL/COLLECTION`` or ``qdrant:PATH,collection=C`` (``,vector=NAME`` for a
        collection of named vectors)."""
        collection = options.get("collection")
        if collection is None:
            location, _, collection = location.rstrip("/").rpartition("/")
            if not location or not collection:
                raise ConfigError(f"--from {spec!r}: name the collection, e.g. qdrant:http://host:6333/"
                                  "docs or qdrant:PATH,collection=docs.")
        return cls(location, collection, spec, options.get("vector"))

    def __init__(self, location: str, collection: str, spec: str, vector: str | None = None) -> None:
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise MissingDependencyError("qdrant-client is not installed: pip install qdrant-client") from exc
        self.spec, self.collection, self.vector_name = spec, collection, vector
        if location.startswith(("http://", "https://")):
            self._client = QdrantClient(url=location, api_key=os.environ.get("QDRANT_API_KEY"))
        else:
            require_file(Path(location), "qdrant-client local folder")
            self._client = QdrantClient(path=location)
        if not self._client.collection_exists(collection):
            names = [c.name for c in self._client.get_collections().collections]
            self._client.close()
            raise ConfigError(f"No collection {collection!r} at {location} (collections: "
                              f"{', '.join(names) or 'none'}).")
        self.dim = self._config_dim(location) or self._scan_dim()

    def _config_dim(self, location: str) -> int:
        """The chosen vector's size from the collection config (not from the first point)."""
        try:
            params = self._client.get_collection(self.collection).config.params.vectors
        except Exception as exc:  # noqa: BLE001 - the client raises transport-specific types
            log.debug("no vector config for %s at %s: %s", self.collection, location, exc)
            return 0
        if not isinstance(params, dict):
            self.metric = _qdrant_metric(params)
            return int(getattr(params, "size", 0) or 0)
        sizes = ", ".join(f"{n or '(unnamed)'} ({getattr(v, 'size', '?')})" for n, v in params.items())
        name = self.vector_name
        if name is None and len(params) == 1:
            name = self.vector_name = next(iter(params))
        if name is None:
            self._client.close()
            raise ConfigError(f"{self.spec}: collection {self.collection!r} has named vectors "
                              f"{sizes}: choose one with ,vector=NAME in the --from spec.")
        if name not in params:
            self._client.close()
            raise ConfigError(f"{self.spec}: collection {self.collection!r} has no vector "
                              f"{name!r}; its vectors: {sizes}. Name one of them with ,vector=NAME.")
        self.metric = _qdrant_metric(params[name])
        return int(params[name].size)

    def _scroll(self, offset: Any, limit: int, with_data: bool) -> tuple[list[Any], Any]:
        vectors: Any = with_data if not (with_data and self.vector_name) else [self.vector_name]
        return self._client.scroll(self.collection, limit=int(limit), offset=offset,
                                   with_payload=with_data, with_vectors=vectors)

    def count(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def close(self) -> None:
        self._client.close()


def _qdrant_metric(params: Any) -> str | None:
    """cosine / ip / l2 of a Qdrant vector config; another distance (Manhattan) by its own name,
    refused by the migration unless ``metric`` is named."""
    distance = str(getattr(getattr(params, "distance", None), "value", ""))
    return {"Cosine": "cosine", "Dot": "ip", "Euclid": "l2"}.get(distance, distance.lower() or None)
