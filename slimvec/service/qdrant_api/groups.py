"""Query groups (issue 53): ``POST points/query/groups`` and ``points/search/groups``.

The same rule as qdrant-client's local mode (``local_collection.py`` ``query_groups`` /
``search_groups``): points in the order of the query, each put in the group of every value its
payload has at ``group_by`` (a list value puts it in each; a point with a value that is neither a
string nor an integer joins none), ``group_size`` hits per group, the first ``limit`` groups in
the order they were first met. Local mode ranks the whole collection; here the query asks for an
increasing ``k`` until the first ``limit`` groups are full or the query has no more points (at
most :data:`MAX_K`, after which the groups are those of the ``MAX_K`` nearest points); each
prefetch asks for up to ``MAX_K`` candidates.
"""

from __future__ import annotations

from typing import Any

from slimvec.service.limits import MAX_RESULTS
from slimvec.service.qdrant_api.models import QdrantError, check_fields, count_arg, point_id, select_payload

__all__ = ["query_groups", "search_groups", "MAX_K"]

#: the most points one group request ranks (a query's ``k`` cap)
MAX_K = MAX_RESULTS
#: the request fields of a group request beyond a query's
_GROUP_FIELDS = ("group_by", "group_size", "limit", "with_lookup")


def search_groups(cols: Any, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST points/search/groups``: ``vector`` (a dense vector, or ``{"name", "vector"}``)
    as a query's; ``group_size`` 1 by default, as Qdrant's."""
    check_fields(body, ("vector", "filter", "params", "with_payload", "with_vector",
                        "score_threshold", *_GROUP_FIELDS), "search groups")
    vec = body.get("vector")
    using = None
    if isinstance(vec, dict) and "vector" in vec:
        check_fields(vec, ("name", "vector"), "search groups vector")
        using, vec = vec.get("name"), vec["vector"]
    query = {k: v for k, v in body.items() if k != "vector"}
    return query_groups(cols, name, {**query, "query": vec, "using": using}, default_size=1)


def query_groups(cols: Any, name: str, body: dict[str, Any], default_size: int = 3) -> dict[str, Any]:
    """``POST points/query/groups``: any query ``points/query`` serves, grouped."""
    group_by = body.get("group_by")
    if not isinstance(group_by, str) or not group_by:
        raise QdrantError(400, f"Bad request: group_by must be a payload key, got {group_by!r}.")
    limit, size = count_arg(body, "limit", 10), count_arg(body, "group_size", default_size)
    if body.get("offset") is not None:
        raise QdrantError(400, "Bad request: a group request has no offset (Qdrant's neither).")
    query = {k: v for k, v in body.items() if k not in _GROUP_FIELDS}
    want = body.get("with_payload", True)
    total = cols.count_all(cols.served(name))
    if query.get("prefetch") is not None:
        query["prefetch"] = _widened(query["prefetch"], max(1, min(total, MAX_K)))
    k = min(max(64, 4 * limit * max(size, 1)), total, MAX_K)
    while True:
        found = cols.query(name, {**query, "limit": k, "with_payload": True})["points"] if k else []
        groups = _grouped(found, group_by, size)
        first = list(groups.values())[:limit]
        if (len(found) < k or k >= min(total, MAX_K)
                or (len(groups) >= limit and all(len(g["hits"]) >= size for g in first))):
            break
        k = min(4 * k, total, MAX_K)
    for g in first:
        for hit in g["hits"]:
            hit["payload"] = select_payload(hit["payload"] or {}, want)
    _lookup(cols, first, body.get("with_lookup"))
    return {"groups": first}


def _widened(prefetch: Any, k: int) -> Any:
    """The prefetches (nested too) with ``limit`` ``k``: local mode sets every prefetch of a
    group query to its collection's size: with Qdrant's default of 10 a prefetch would leave
    groups short that more candidates would fill."""
    if isinstance(prefetch, list):
        return [_widened(p, k) for p in prefetch]
    if not isinstance(prefetch, dict):
        return prefetch
    return {**prefetch, "limit": k, **({"prefetch": _widened(prefetch["prefetch"], k)}
                                       if prefetch.get("prefetch") is not None else {})}


def _grouped(found: list[dict[str, Any]], group_by: str, size: int) -> dict[Any, dict[str, Any]]:
    """``{group id: {"id", "hits"}}`` in the order groups are first met (local mode's rule)."""
    from qdrant_client.local.payload_value_extractor import value_by_key

    groups: dict[Any, dict[str, Any]] = {}
    for point in found:
        values = value_by_key(point.get("payload") or {}, group_by)
        if values is None or any(type(v) not in (int, str) for v in values):
            continue
        for value in dict.fromkeys(values):
            group = groups.setdefault(value, {"id": value, "hits": []})
            if len(group["hits"]) < size:
                group["hits"].append(dict(point))
    return groups


def _lookup(cols: Any, groups: list[dict[str, Any]], with_lookup: Any) -> None:
    """``with_lookup``: each group's ``lookup``, the point of collection ``collection`` whose id
    is the group's id (absent when it has none, or when the group's value is no point id, such
    as a word: local mode finds no point and Qdrant skips it)."""
    if with_lookup is None:
        return
    if isinstance(with_lookup, str):
        with_lookup = {"collection": with_lookup}
    if not isinstance(with_lookup, dict) or not isinstance(with_lookup.get("collection"), str):
        raise QdrantError(400, "Bad request: with_lookup must be a collection name or "
                               "{\"collection\", \"with_payload\", \"with_vectors\"}.")
    check_fields(with_lookup, ("collection", "with_payload", "with_vectors"), "with_lookup")
    wp = True if with_lookup.get("with_payload") is None else with_lookup["with_payload"]
    for g in groups:
        try:
            point_id(g["id"])
        except QdrantError:
            continue
        got = cols.retrieve(with_lookup["collection"], {"ids": [g["id"]], "with_payload": wp,
                                                        "with_vector": with_lookup.get("with_vectors") or False})
        if got:
            g["lookup"] = got[0]
