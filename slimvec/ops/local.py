"""The index ``slimvec.open`` returns: searchable, and writable through the one writer.

:class:`LocalIndex` is :class:`~slimvec.index.folder.Index` plus the writes a served index takes
(:class:`~slimvec.index.base.IndexBase`'s ``add`` and ``add_vectors``), with the same row checks
(:mod:`slimvec.sources.given`) and the same answer (``accepted``, ``rejected``, ``warnings``,
``committed``). A write closes the index's own handles, opens the folder's writer
(:meth:`IndexBuilder.open_writer <slimvec.indexer.builder.IndexBuilder.open_writer>`: the writer
lock, the commit protocol, calibration when due), commits, and reopens: each call is one durable
commit, as ``wait=true`` is over HTTP. Bulk loads go through ``slimvec ingest`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from slimvec.ids import doc_ids
from slimvec.index.folder import Index, open_index
from slimvec.indexer.writer import VectorBatch
from slimvec.sources.given import check_docs, check_vectors

__all__ = ["LocalIndex", "open_local"]


class LocalIndex(Index):
    """An index opened in this process that also adds documents and vectors (see the module)."""

    trust_store: str | bool | None = None

    def add(self, documents: Sequence[dict[str, Any] | str], wait: bool = True) -> dict[str, Any]:
        """Encode and add documents ``{"id"?, "text", "payload"?}`` (or texts) with the index's
        encoder and document prefix; bad rows come back in ``rejected``. ``wait`` is accepted for
        the protocol: a local write always commits before it returns."""
        docs = [{"text": d} if isinstance(d, str) else dict(d) for d in documents]
        good, rejects, changed = check_docs(docs, "add")
        vecs = self.encoder.encode([d.text for d in good]) if good \
            else np.zeros((0, self.dim_in), np.float32)
        payloads = [{**d.payload, "text": d.text, "source_id": d.id} for d in good]
        return self._write([d.id for d in good], vecs, payloads, rejects, changed,
                           [d.row for d in good])

    def add_vectors(self, ids: Sequence[int | str], vectors: np.ndarray,
                    payloads: Sequence[dict[str, Any]] | None = None,
                    wait: bool = True) -> dict[str, Any]:
        """Add full vectors (``dim_in``) with ids and optional payloads; bad rows come back in
        ``rejected``. ``wait`` as in :meth:`add`."""
        items = [{"id": (int(i) if isinstance(i, (int, np.integer)) else i), "vector": v,
                  **({"payload": payloads[j]} if payloads else {})}
                 for j, (i, v) in enumerate(zip(ids, np.asarray(vectors, dtype=np.float32).tolist()))]
        good, vecs, rejects, clean, changed = check_vectors(items, self.dim_in, "add_vectors")
        return self._write([items[i]["id"] for i in good], vecs, clean, rejects, changed, good)

    def _write(self, ids: list[Any], vecs: np.ndarray, payloads: list[dict[str, Any]],
               rejects: list[Any], changed: list[Any], rows: list[int]) -> dict[str, Any]:
        from slimvec.indexer.builder import IndexBuilder

        batch = VectorBatch(doc_ids(ids, int(self.manifest.id_rule)), vecs, payloads,
                            rejects + changed, 0, rows, [None] * len(rows), "add", check_norms=False)
        self.close()
        try:
            with IndexBuilder.open_writer(self.folder, trust_store=self.trust_store) as w:
                w.write(batch)
                w.commit()
        finally:
            self._reopen()
        return {"accepted": len(ids), "rejected": [r.to_json() for r in rejects],
                "warnings": [w.to_json() for w in changed], "committed": True}

    def _reopen(self) -> None:
        fresh = open_index(self.folder, trust_store=self.trust_store)
        self.manifest, self.store, self._lock = fresh.manifest, fresh.store, fresh._lock
        self._reducer, self._full = None, None
        fresh._lock = None


def open_local(folder: str | os.PathLike[str], *,
               trust_store: str | bool | None = None) -> LocalIndex:
    """Open an index folder for searching and adding (``slimvec.open``); see
    :func:`slimvec.index.folder.open_index` for ``trust_store`` and what it raises."""
    index = open_index(folder, trust_store=trust_store, cls=LocalIndex)
    assert isinstance(index, LocalIndex)
    index.trust_store = trust_store
    return index
