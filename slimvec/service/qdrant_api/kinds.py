"""Query kinds beyond a nearest vector (issue 53): ``order_by`` over payload values,
``sample: random`` and dense MMR (``{"nearest": vector, "mmr": {...}}``), each as qdrant-client's
local mode serves it (``local_collection.py`` ``_scroll_by_value``, ``_sample_randomly``,
``_search_with_mmr``), whose helpers are used here so the rules are the same; facets
(``facet``, a route of its own); and the scroll in Qdrant's id order (integers, then UUIDs by
value), ``order_by`` too (:func:`scroll_page`).

``order_by`` and ``sample`` read the matching points' payloads (at most :data:`MAX_SCAN` points:
Qdrant too orders only by an indexed field); MMR re-ranks the ``candidates_limit`` nearest points
by their kept full vectors (``named.read_vectors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from slimvec.ids import FIRST_HASHED, doc_id
from slimvec.service.indexes import points
from slimvec.service.limits import check_size
from slimvec.service.qdrant_api.models import QdrantError, check_fields, count_arg, point_id, qdrant_id, qfilter
from slimvec.service.qdrant_api.named import exposed, read_vectors, records_of
from slimvec.service.qdrant_api.sparse import check_sparse

__all__ = ["special_query", "facet", "scroll_page", "MAX_SCAN"]

#: the most points an ``order_by`` or ``sample`` query reads (all of a collection's payloads)
MAX_SCAN = 100_000
#: the most hashed ids (UUIDs) a scroll page sorts into Qdrant's order (each page reads them all)
MAX_SORTED = 10_000


def special_query(cols: Any, name: str, body: dict[str, Any], limit: int, offset: int
                  ) -> dict[str, Any] | None:
    """The answer to a query of a kind served here, or None for the other kinds."""
    q = body.get("query")
    if not isinstance(q, dict):
        return None
    if set(q) == {"order_by"} or set(q) == {"sample"}:
        return _payload_query(cols, name, body, q, limit, offset)
    if "mmr" in q and "nearest" in q and "size" not in exposed(cols.settings(name))[1].get(body.get("using") or "", {}):
        return _mmr_query(cols, name, body, q, limit, offset)  # multivectors: Qdrant Edge's (sparse.py)
    return None


def _payload_query(cols: Any, name: str, body: dict[str, Any], q: dict[str, Any], limit: int,
                   offset: int) -> dict[str, Any]:
    """``{"order_by": key | {"key", "direction", "start_from"}}`` or ``{"sample": "random"}``:
    score 1 (as Qdrant's), ``order_value`` on each ordered point."""
    check_fields(body, ("query", "filter", "limit", "offset", "with_payload", "with_vector", "using"),
                 f"query {next(iter(q))!r}")  # ``using``: no vector is read (Qdrant ignores it too)
    served = cols.served(name)
    check_size(cols.count_all(served), MAX_SCAN, f"The points a {next(iter(q))!r} query reads",
               "filter first, or page through points/scroll.")
    recs = records_of(served, None, qfilter(body.get("filter"), cols.scan(name)))
    if "sample" in q:
        if q["sample"] != "random":
            raise QdrantError(400, f"Bad request: sample {q['sample']!r}; the one kind is \"random\".")
        order = np.random.default_rng().permutation(len(recs))[:limit]
        sids = [recs[i]["store_id"] for i in order]
        return {"points": cols._records(served, sids, body.get("with_payload", False),
                                        body.get("with_vector", False), [1.0] * len(sids))}
    ranked = _ordered(recs, q["order_by"], limit + offset)[offset:]
    hits = cols._records(served, [s for s, _ in ranked], body.get("with_payload", False),
                         body.get("with_vector", False), [1.0] * len(ranked))
    for hit, (_s, value) in zip(hits, ranked):
        hit["order_value"] = value
    return {"points": hits}


def scroll_page(cols: Any, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST points/scroll``: a page in Qdrant's id order and the next page's id, or with
    ``order_by`` the first ``limit`` points by payload value (no next page, as Qdrant's).

    Given integer ids below :data:`~slimvec.ids.FIRST_HASHED` are their own store ids, so the
    store's order is Qdrant's; the other ids (UUIDs, integers from 2**62) are hashed, so that
    part is read whole (at most :data:`MAX_SORTED` points; beyond, in store order) and sorted as
    local mode sorts ids: integers by value, then UUIDs by their hyphenated text (their value)."""
    check_fields(body, ("offset", "limit", "filter", "with_payload", "with_vector", "order_by"), "scroll")
    served, limit = cols.served(name), count_arg(body, "limit", 10) or 10
    flt, wp, wv = qfilter(body.get("filter"), cols.scan(name)), body.get("with_payload", True), body.get("with_vector", False)
    if body.get("order_by") is not None:
        if body.get("offset") is not None:
            raise QdrantError(400, "Bad request: offset is not served with order_by; page with "
                                   "order_by.start_from and a has_id filter, as Qdrant's.")
        check_size(cols.count_all(served), MAX_SCAN, "The points an order_by scroll reads", "filter first.")
        ranked = _ordered(records_of(served, None, flt), body["order_by"], limit)
        hits = cols._records(served, [s for s, _ in ranked], wp, wv)
        for hit, (_s, value) in zip(hits, ranked):
            hit["order_value"] = value
        return {"points": hits, "next_page_offset": None}
    start = None if body.get("offset") is None else _id_key(point_id(body["offset"]))
    page: list[dict[str, Any]] = []
    if start is None or start < (0, FIRST_HASHED):
        recs, nxt = points.scroll(served, limit, None if start is None else start[1], flt)
        page = [r for r in recs if r["store_id"] < FIRST_HASHED]
        if len(page) == limit and (nxt is None or nxt < FIRST_HASHED):
            return {"points": cols._records(served, [r["store_id"] for r in page], wp, wv),
                    "next_page_offset": None if nxt is None else cols._qid(served, nxt)}
    rest, whole = _hashed(served, flt)
    if not whole:  # too many to sort: the store's order (the set is the same)
        recs, nxt = points.scroll(served, limit - len(page), FIRST_HASHED if start is None or
                                  start < (0, FIRST_HASHED) else doc_id(point_id(body["offset"])), flt)
        rest, after = recs, (None if nxt is None else cols._qid(served, nxt))
    else:
        rest = [r for r in rest if start is None or _id_key(r["id"]) >= start][:limit - len(page) + 1]
        after = qdrant_id(rest[limit - len(page)]["id"]) if len(rest) > limit - len(page) else None
    sids = [r["store_id"] for r in page + rest[:limit - len(page)]]
    return {"points": cols._records(served, sids, wp, wv), "next_page_offset": after}


def _id_key(pid: Any) -> tuple[int, Any]:
    """A point id's place in Qdrant's order: integers first by value, then UUIDs."""
    pid = qdrant_id(pid)
    return (0, pid) if isinstance(pid, int) else (1, pid)


def _hashed(served: Any, flt: Any) -> tuple[list[dict[str, Any]], bool]:
    """The matching records of hashed store ids sorted by :func:`_id_key`, and whether that is
    all of them (False beyond :data:`MAX_SORTED`)."""
    recs: list[dict[str, Any]] = []
    start: Any = FIRST_HASHED
    while start is not None and len(recs) <= MAX_SORTED:
        page, start = points.scroll(served, 1000, start, flt)
        recs += page
    recs.sort(key=lambda r: _id_key(r["id"]))
    return recs, len(recs) <= MAX_SORTED


def _ordered(recs: list[dict[str, Any]], order_by: Any, k: int) -> list[tuple[int, Any]]:
    """``(store id, value)`` of the first ``k`` points by payload value (a point once per value
    of a list), as local mode's ``_scroll_by_value``."""
    from qdrant_client.http import models as m
    from qdrant_client.local.order_by import to_order_value
    from qdrant_client.local.payload_value_extractor import value_by_key

    try:
        ob = m.OrderBy(key=order_by) if isinstance(order_by, str) else m.OrderBy.model_validate(order_by)
    except ValueError as exc:
        raise QdrantError(400, f"Bad request: order_by {str(order_by)[:80]!r}: expected a payload "
                               f"key or {{\"key\", \"direction\", \"start_from\"}} ({str(exc)[:120]}).") from None
    desc = ob.direction == m.Direction.DESC
    values = [(v, r["store_id"]) for r in recs for x in value_by_key(r["payload"], ob.key) or ()
              if (v := to_order_value(x)) is not None]
    values.sort(key=lambda t: t[0], reverse=desc)
    start = to_order_value(ob.start_from)
    out: list[tuple[int, Any]] = []
    seen: set[tuple[Any, int]] = set()
    for v, sid in values:
        if len(out) >= k:
            break
        if (start is not None and (v > start if desc else v < start)) or (v, sid) in seen:
            continue
        seen.add((v, sid))
        out.append((sid, v))
    return out


def _mmr_query(cols: Any, name: str, body: dict[str, Any], q: dict[str, Any], limit: int,
               offset: int) -> dict[str, Any]:
    """Maximal marginal relevance over the ``candidates_limit`` nearest points (default
    ``limit``): local mode's rule, over the kept full vectors of the dense vector ``using``, or
    the sparse vectors of a sparse one (their plain dot products, as local mode's)."""
    from qdrant_client.local.utils import last_argmax, swap_remove

    check_fields(q, ("nearest", "mmr"), "query")
    sparse = (body.get("using") or "") in exposed(cols.settings(name))[1]
    if sparse:
        check_sparse(q["nearest"], "query.nearest")
    elif not (isinstance(q["nearest"], list) and q["nearest"] and isinstance(q["nearest"][0], (int, float))):
        raise QdrantError(400, "Bad request: mmr is served on a dense vector query ({\"nearest\": [numbers], "
                               f"\"mmr\": {{...}}}}), got nearest={str(q['nearest'])[:60]!r}.")
    mmr = q.get("mmr") or {}
    check_fields(mmr, ("diversity", "candidates_limit"), "mmr")
    diversity, cands = mmr.get("diversity", 0.5), mmr.get("candidates_limit")
    diversity = 0.5 if diversity is None else diversity
    if isinstance(diversity, bool) or not isinstance(diversity, (int, float)) or not 0 <= diversity <= 1:
        raise QdrantError(400, f"Bad request: mmr.diversity must be a number in [0, 1], got {diversity!r}.")
    if cands is not None and (isinstance(cands, bool) or not isinstance(cands, int) or cands < 0):
        raise QdrantError(400, f"Bad request: mmr.candidates_limit must be a non-negative integer, got {cands!r}.")
    found = cols.query(name, {**body, "query": q["nearest"], "limit": limit if cands is None else cands,
                              "offset": 0})["points"]
    if not found:
        return {"points": []}
    rel, sims = _similarities(cols, name, body.get("using") or "", q["nearest"],
                              [doc_id(point_id(p["id"])) for p in found], sparse)
    lam = 1.0 - float(diversity)
    pending = list(range(len(found)))
    selected = [swap_remove(pending, last_argmax([rel[i] for i in pending]))]
    while len(selected) < limit + offset and pending:
        scores = [lam * rel[i] - (1.0 - lam) * max(sims[i, j] for j in selected) for i in pending]
        if all(np.isneginf(s) for s in scores):
            break
        selected.append(swap_remove(pending, last_argmax(scores)))
    return {"points": [found[i] for i in selected][offset:]}


def _similarities(cols: Any, name: str, using: str, query: Any, sids: list[int], sparse: bool
                  ) -> tuple[list[float], np.ndarray]:
    """The query's similarity to each point of ``sids`` and theirs to each other, as local
    mode's MMR computes them (dense: the vector's distance; sparse: the dot product)."""
    from qdrant_client.http import models as m
    from qdrant_client.local.distances import calculate_distance_core
    from qdrant_client.local.sparse import sort_sparse_vector
    from qdrant_client.local.sparse_distances import calculate_distance_sparse

    if sparse:
        got = cols.sparse.read(name, sids, [using])[using]
        V = [sort_sparse_vector(m.SparseVector(**got[s])) for s in sids]
        qv = sort_sparse_vector(m.SparseVector(indices=query["indices"], values=query["values"]))
        return (calculate_distance_sparse(qv, V, empty_is_zero=True).tolist(),
                np.stack([calculate_distance_sparse(v, V, empty_is_zero=True) for v in V]))
    index, spec = cols.vindex(name, using)
    byid = read_vectors(index, spec["distance"], sids)
    X = np.asarray([byid[s] for s in sids], dtype=np.float32)
    distance = m.Distance(spec["distance"])
    return (calculate_distance_core(np.asarray(query, dtype=np.float32), X, distance).tolist(),
            np.stack([calculate_distance_core(x, X, distance) for x in X]))


def facet(cols: Any, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /collections/NAME/facet``: how many matching points have each value at ``key``
    (a point counted once per distinct value; strings, integers and booleans, UUID strings
    hyphenated), by count descending then value, as local mode's ``facet`` (always exact)."""
    from qdrant_client.local.payload_value_extractor import parse_uuid, value_by_key

    from slimvec.service.qdrant_api.models import count_arg

    check_fields(body, ("key", "limit", "filter", "exact"), "facet")
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise QdrantError(400, f"Bad request: facet key must be a payload key, got {key!r}.")
    served = cols.served(name)
    check_size(cols.count_all(served), MAX_SCAN, "The points a facet reads", "filter first.")
    kinds = (bool, int, str)  # a value's position is its type's tag: True and 1 stay apart
    counts: dict[tuple[int, Any], int] = {}
    for rec in records_of(served, None, qfilter(body.get("filter"), cols.scan(name))):
        seen = set()
        for v in value_by_key(rec["payload"], key) or ():
            if type(v) not in kinds:
                continue
            v = str(u) if isinstance(v, str) and (u := parse_uuid(v)) else v
            seen.add((kinds.index(type(v)), v))
        for tv in seen:
            counts[tv] = counts.get(tv, 0) + 1
    top = sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:count_arg(body, "limit", 10)]
    return {"hits": [{"value": v, "count": n} for (_t, v), n in top]}
