"""The operations every index face answers alike: :class:`IndexBase`.

An index opened in this process (:class:`slimvec.index.folder.Index`, through ``slimvec.open``)
and one served over HTTP (:class:`slimvec.client.RemoteIndex`, through ``slimvec.Client``) both
implement it, and ``tests/service/test_index_congruence.py`` runs the same operations against
both and compares the answers, as qdrant-client's congruence tests compare its local and remote
clients. ``add`` / ``add_vectors`` go through the index's one writer on both (the service's
writer thread; :class:`slimvec.ops.local.LocalIndex` opens the folder's writer per call); bulk
loads go through ``slimvec ingest``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from slimvec.connectors.base import SearchResult

__all__ = ["IndexBase"]


@runtime_checkable
class IndexBase(Protocol):
    """What a local and a remote index both answer, with the same arguments and results.

    Ids are the ids given at ingest (``17`` and ``"17"`` are one document) unless a method says
    store ids; a ``filter`` is Qdrant filter JSON (:mod:`slimvec.filters`); ``ids`` and ``filter``
    are exclusive where both are taken.
    """

    def search(self, queries: str | Sequence[str] | np.ndarray, k: int = 10,
               rescore: int | None = None, filter: Any = None) -> SearchResult:
        """Nearest documents of each query (texts or full-dimension vectors): a
        :class:`~slimvec.connectors.base.SearchResult` of store ids (n, k) padded with -1 and
        scores, higher is closer; ``rescore`` as :meth:`slimvec.index.folder.Index.search`."""
        ...

    def get(self, ids: Sequence[Any]) -> list[dict[str, Any] | None]:
        """Records ``{"id", "store_id", "payload"}`` of documents by id (``None``: absent)."""
        ...

    def payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Stored payloads of store ids (the ids searches return), in order."""
        ...

    def scroll(self, limit: int = 100, offset: int | None = None,
               filter: Any = None) -> tuple[list[dict[str, Any]], int | None]:
        """One page of records in store-id order; ``(records, next_offset)``, ``None`` at the end."""
        ...

    def count(self, filter: Any = None) -> int:
        """Live documents (matching ``filter`` when given)."""
        ...

    def info(self) -> dict[str, Any]:
        """Count, dimensions, recipe, rescoring depth and bytes of the index."""
        ...

    def add(self, documents: Sequence[dict[str, Any] | str], wait: bool = True) -> dict[str, Any]:
        """Encode and add documents ``{"id"?, "text", "payload"?}`` (or texts) with the index's
        encoder; ``{"accepted", "rejected", "warnings", "committed"}``, bad rows in ``rejected``."""
        ...

    def add_vectors(self, ids: Sequence[Any], vectors: np.ndarray,
                    payloads: Sequence[dict[str, Any]] | None = None,
                    wait: bool = True) -> dict[str, Any]:
        """Add full vectors (``dim_in``) with ids and optional payloads; answered as :meth:`add`."""
        ...

    def delete(self, ids: Sequence[Any] | None = None, filter: Any = None) -> int:
        """Delete documents by id or filter; returns how many were removed."""
        ...

    def set_payload(self, fields: Mapping[str, Any], ids: Sequence[Any] | None = None,
                    filter: Any = None, overwrite: bool = False) -> int:
        """Merge ``fields`` into payloads (``overwrite``: replace them whole); documents updated."""
        ...

    def delete_payload_keys(self, keys: Sequence[str], ids: Sequence[Any] | None = None,
                            filter: Any = None) -> int:
        """Remove top-level payload ``keys`` of documents by id or filter; documents updated."""
        ...
