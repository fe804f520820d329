"""Point operations of a served index, by the user's ids: get, scroll, count, filtered search,
delete and payload updates (issue 25 item 7's service side, and what the Qdrant-compatible API
translates to).

Reads of a fitted index are the library's :class:`~slimvec.index.folder.Index` operations
(``get``, ``scroll``, ``count``, ``search(filter=)``) on the served ``LiveIndex``. Changes go
through the index's one writer (:meth:`IndexWriter.mutate`): the store's ``delete`` /
``set_payload`` / ``delete_payload_keys`` and the kept full vectors' ``delete``, committed like a
batch. An index still collecting its fit sample keeps its rows in ``pending.jsonl``: filters are
evaluated on them with :meth:`slimvec.filters.Filter.matches` and a change rewrites the file
(atomically), so the rows flushed into the index at the fit are the changed ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.ids import doc_id, doc_ids
from slimvec.service.indexes.payload_indexes import payload_index_mutation
from slimvec.service.limits import MAX_CANDIDATES, MAX_IDS, MAX_REQUEST_CANDIDATES, MAX_RESULTS, check_size

__all__ = ["count", "delete", "get", "scroll", "search", "search_exact", "set_payload", "delete_payload_keys"]

#: payload keys the service stores beside the user's payload (not the user's data): the user's
#: id, and the flag of a Qdrant collection's home row without its first named vector
SERVICE_KEYS = ("source_id", "slimvec_no_vector")


def _filter(spec: Any) -> Any:
    from slimvec.filters import parse_filter

    return parse_filter(spec)


def _one_of(ids: Sequence[Any] | None, flt: Any) -> None:
    if (ids is None) == (flt is None):
        raise ConfigError("Send exactly one of 'ids' (your document ids) or 'filter' (a Qdrant "
                          "filter object).")
    _check_ids(ids)


def _check_ids(ids: Sequence[Any] | None) -> None:
    check_size(len(ids or ()), MAX_IDS, "The number of ids", "split the request.")


# ---------------------------------------------------------------------- pending rows
def _pending(served: Any) -> list[dict[str, Any]] | None:
    """The latest version of each pending row, in store-id order, with its ``store_id`` (the
    rows in memory, read only); None when the index is fitted."""
    view = served.pending_view()
    return None if view is None else view.records()


def _pending_match(rows: list[dict[str, Any]], ids: Sequence[Any] | None, flt: Any
                   ) -> list[dict[str, Any]]:
    if ids is not None:
        wanted = set(doc_ids(list(ids)).tolist()) if len(ids) else set()
        return [r for r in rows if r["store_id"] in wanted]
    return [r for r in rows if flt is None or flt.matches(r["id"], r.get("payload") or {})]


def _rewrite_pending(served: Any, rows: list[dict[str, Any]]) -> None:
    served.pending_replace(rows)


def _record(row: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in (row.get("payload") or {}).items() if k not in SERVICE_KEYS}
    return {"id": row["id"], "store_id": int(row["store_id"]), "payload": payload}


# ---------------------------------------------------------------------- reads
def get(served: Any, ids: Sequence[Any]) -> list[dict[str, Any] | None]:
    """Records ``{"id", "store_id", "payload"}`` of the user's ids (None where unknown)."""
    _check_ids(ids)
    with served.lock:
        rows = _pending(served)
    if rows is None:
        return [_clean(r) for r in served.ready_index().get(list(ids))]
    by_sid = {r["store_id"]: r for r in rows}
    return [None if (r := by_sid.get(doc_id(i))) is None else _record(r) for i in ids]


def scroll(served: Any, limit: int, offset: Any = None, filter: Any = None
           ) -> tuple[list[dict[str, Any]], Any]:
    """One page of records in store-id order and the offset of the next page (None at the end)."""
    check_size(limit, MAX_RESULTS, "The page size (limit)", "page through with next offsets.")
    flt = _filter(filter)
    with served.lock:
        rows = _pending(served)
    if rows is None:
        recs, nxt = served.ready_index().scroll(limit=limit, offset=offset, filter=flt)
        return [c for c in (_clean(r) for r in recs) if c is not None], nxt
    rows = [r for r in _pending_match(rows, None, flt) if offset is None or r["store_id"] >= offset]
    nxt = rows[limit]["store_id"] if len(rows) > limit else None
    return [_record(r) for r in rows[:limit]], nxt


def count(served: Any, filter: Any = None) -> int:
    """Documents (matching ``filter``), exact."""
    flt = _filter(filter)
    with served.lock:
        rows = _pending(served)
    if rows is None:
        index = served.ready_index()
        return int(index.store.count() if flt is None else index.count(filter=flt))
    return len(rows) if flt is None else len(_pending_match(rows, None, flt))


def search(served: Any, queries: np.ndarray, k: int, filter: Any = None,
           rescore: int | None = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """``(ids, scores, payloads_of)`` of full query vectors, filtered (store ids); ``rescore``
    as :meth:`Index.search` (None: the index's recorded depth). ``k`` (Qdrant's ``offset +
    limit``), ``k * rescore`` and the candidates of all queries are capped
    (:data:`MAX_RESULTS`, :data:`MAX_CANDIDATES`, :data:`MAX_REQUEST_CANDIDATES`): no search
    runs long, whether or not its client is still there."""
    check_size(k, MAX_RESULTS, "The results asked of one query (k, or offset + limit)",
               "ask for fewer, or page with a filter or scroll.")
    if rescore:
        check_size(k * int(rescore), MAX_CANDIDATES, "The candidates to re-rank (k * rescore)",
                   "lower k or rescore.")
    _check_request(len(queries), k, rescore or 1)
    flt = _filter(filter)
    if flt is None:
        pending = served.search_pending(queries, k)
    else:
        pending = served.search_pending(queries, k, allowed=_allowed(served, flt))
    if pending is not None:
        return pending
    index = served.ready_index()
    recorded = index.manifest.rescore
    _check_request(len(queries), k, rescore or (recorded.depth if recorded is not None else 1))
    res = (index.search(queries, k, rescore=rescore, filter=flt) if flt is not None
           else index.search(queries, k, rescore=rescore))
    return res.ids, res.scores, index.payloads


def search_exact(served: Any, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, scores)`` of the exact ``k`` nearest of every stored point by the kept full
    vectors (:func:`slimvec.index.lifecycle.exact_scan`); ``k`` capped as in :func:`search`."""
    from slimvec.index.lifecycle import exact_scan

    check_size(k, MAX_RESULTS, "The results asked of one query (k, or offset + limit)",
               "ask for fewer, or page with a filter or scroll.")
    index = served.ready_index()
    res = exact_scan(index, queries, index.store.ids(), k)
    return res.ids, res.scores


def _check_request(n_queries: int, k: int, depth: int) -> None:
    check_size(n_queries * k * max(1, int(depth)), MAX_REQUEST_CANDIDATES,
               "The candidates of this request (queries * k * rescore depth)",
               "send fewer queries per request, or lower k.")


def _allowed(served: Any, flt: Any) -> set[int] | None:
    with served.lock:
        rows = _pending(served)
    return None if rows is None else {r["store_id"] for r in _pending_match(rows, None, flt)}


def _clean(rec: dict[str, Any] | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    payload = {k: v for k, v in (rec.get("payload") or {}).items() if k not in SERVICE_KEYS}
    source = (rec.get("payload") or {}).get("source_id", rec.get("id"))
    return {"id": source, "store_id": int(rec["store_id"]), "payload": payload}


# ---------------------------------------------------------------------- changes
def _store_ids(b: Any, ids: Sequence[Any] | None, flt: Any) -> np.ndarray:
    """Store ids of the user's ids, or of the points matching ``flt`` (has_id in user ids)."""
    if ids is not None:
        return doc_ids(list(ids)) if len(ids) else np.zeros(0, np.int64)
    return np.asarray(b.store.filter_ids(flt.map_ids(doc_id)), dtype=np.int64)


def _change(served: Any, fn: Any) -> Any:
    from slimvec.service.indexes.registry import Busy

    if served.writer is None:
        raise Busy(f"Index {served.name!r} has no writer open; retry later.")
    return served.writer.mutate(fn).result()


def delete(served: Any, ids: Sequence[Any] | None = None, filter: Any = None) -> int:
    """Delete documents by the user's ids or by filter; returns how many were removed (durable
    when this returns)."""
    flt = _filter(filter)
    _one_of(ids, flt)
    with served.lock:
        rows = _pending(served)
        if rows is not None:
            gone = {r["store_id"] for r in _pending_match(rows, ids, flt)}
            _rewrite_pending(served, [r for r in rows if r["store_id"] not in gone])
            return len(gone)
        served.ready_index()

    def run(b: Any) -> int:
        sids = _store_ids(b, ids, flt)
        n = int(b.store.delete(sids))
        full = getattr(getattr(b, "_target", None), "full", None)
        if full is not None and len(sids):
            full.delete(sids)
        return n

    return _change(served, run)


def set_payload(served: Any, fields: dict[str, Any], ids: Sequence[Any] | None = None,
                filter: Any = None, overwrite: bool = False) -> int:
    """Set payload ``fields`` (``overwrite``: replace the whole payload) of documents by the
    user's ids or by filter; returns how many were updated."""
    from slimvec.sources.rowcheck import RowProblem, check_payload

    flt = _filter(filter)
    _one_of(ids, flt)
    if not isinstance(fields, dict) or any(k in SERVICE_KEYS for k in fields):
        raise ConfigError(f"'payload' must be an object without the service's keys {SERVICE_KEYS}.")
    try:
        fields = check_payload(fields, []) or {}
    except RowProblem as bad:
        raise ConfigError(f"payload field {bad.field!r}: {bad.reason}.") from None
    edited = _edit_pending(served, ids, flt, lambda old: {
        **fields, **{k: old[k] for k in SERVICE_KEYS if k in old}} if overwrite else {**old, **fields})
    if edited is not None:
        return edited

    def run(b: Any) -> int:
        sids = _store_ids(b, ids, flt)
        if not overwrite:
            return int(b.store.set_payload(sids, fields))
        # the service's own keys (the user's id) survive an overwrite
        olds = b.store.get_payloads(sids.tolist())
        n = 0
        for sid, old in zip(sids.tolist(), olds):
            if old is not None:
                keep = {k: old[k] for k in SERVICE_KEYS if k in old}
                n += int(b.store.set_payload([sid], {**fields, **keep}, overwrite=True))
        return n

    return _change(served, run)


def _edit_pending(served: Any, ids: Sequence[Any] | None, flt: Any,
                  edit: Callable[[dict[str, Any]], dict[str, Any]]) -> int | None:
    """On an index still collecting its fit sample, replace the payload of each matching
    collected row by ``edit(payload)`` and rewrite the journal; returns the rows edited, or None
    when the index is fitted (the change then goes through its writer)."""
    with served.lock:
        rows = _pending(served)
        if rows is None:
            served.ready_index()  # raises when the index cannot take changes now
            return None
        hit = {r["store_id"] for r in _pending_match(rows, ids, flt)}
        _rewrite_pending(served, [{**r, "payload": edit(r.get("payload") or {})}
                                  if r["store_id"] in hit else r for r in rows])
        return len(hit)


def delete_payload_keys(served: Any, keys: Sequence[str], ids: Sequence[Any] | None = None,
                        filter: Any = None) -> int:
    """Remove payload ``keys`` of documents by the user's ids or by filter."""
    flt = _filter(filter)
    _one_of(ids, flt)
    keys = [k for k in keys if k not in SERVICE_KEYS]
    edited = _edit_pending(served, ids, flt, lambda old: {k: v for k, v in old.items() if k not in keys})
    if edited is not None:
        return edited
    return _change(served, lambda b: int(b.store.delete_payload_keys(_store_ids(b, ids, flt), keys)))


def create_payload_index(served: Any, field: str, kind: str) -> bool:
    """Build a payload index on ``field`` (keyword, integer, float, bool, datetime) through the writer
    when the index is fitted and its store has payload indexes; returns whether one was built
    (a pending index, or a store without them, filters by scanning the matching ids)."""
    with served.lock:
        if served.state != "ready":
            return False
        served.ready_index()

    return bool(_change(served, payload_index_mutation(field, kind)))


def declare_payload_indexes(served: Any, specs: Sequence[str]) -> None:
    """Payload indexes declared at creation (``["lang:keyword", ...]``): built now on a fitted
    index, else kept in its ``service.json``'s build spec and built with the store when the
    reducer is fitted."""
    from slimvec.index.lifecycle import parse_payload_indexes
    from slimvec.service.indexes.spec import SERVICE_SPEC

    declared = parse_payload_indexes(list(specs), where="payload_index")
    with served.lock:
        if served.state == "pending":
            served.spec = served.spec.with_payload_index(declared)
            served.spec.save(served.pending_dir / SERVICE_SPEC)
            return
    for field, kind in declared.items():
        create_payload_index(served, field, kind)
