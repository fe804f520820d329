"""Queries by example on a dense named vector (issue 38 item 5): a point id, ``recommend``,
``discover`` and ``context``, scored as Qdrant scores them.

A point id and the ``average_vector`` recommendation become one vector, searched as any query
(the example points left out, as Qdrant does). ``best_score`` / ``sum_scores`` recommendations,
discovery and context have no nearest-neighbour form: they are scored exactly over the kept full
vectors of the collection's points with qdrant-client's own arithmetic (its local mode's), on
collections of at most :attr:`NamedVectors.MAX_SCAN` points (at the kept precision: a
``keep_full=float16`` recipe scores to about 3 significant digits).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from slimvec.ids import doc_id
from slimvec.service.indexes import points
from slimvec.service.limits import MAX_EXAMPLE_WORK, MAX_PREFETCH_DEPTH, MAX_SCAN_WORK, MAX_SEARCHES, check_deadline
from slimvec.service.qdrant_api.models import QdrantError, check_fields, must_parts, needs_scan, point_id, qfilter, unsupported
from slimvec.service.qdrant_api.named import exposed, read_vectors, records_of
from slimvec.service.qdrant_api.sparse import MAX_EXAMPLES

__all__ = ["is_example_query", "example_query", "prefetch_query", "request_cost"]

_KINDS = ("recommend", "discover", "context", "relevance_feedback")


def is_example_query(query: Any) -> bool:
    """Whether a dense ``query`` is by example (a point id, or one of :data:`_KINDS`)."""
    if isinstance(query, dict) and set(query) == {"nearest"}:
        query = query["nearest"]
    return (isinstance(query, (int, str)) and not isinstance(query, bool)) or (
        isinstance(query, dict) and len(query) == 1 and next(iter(query)) in _KINDS)


def example_query(cols: Any, name: str, body: dict[str, Any], limit: int, offset: int
                  ) -> dict[str, Any]:
    """``POST points/query`` by example on the dense vector ``using`` of collection ``name``."""
    from qdrant_client.local import distances as d

    using = body.get("using") or ""
    index, spec = cols.vindex(name, using)
    src, sspec = index, spec
    lookup = body.get("lookup_from")
    if lookup is not None:
        if not isinstance(lookup, dict):
            raise QdrantError(400, "Bad request: lookup_from must be {\"collection\", \"vector\"}.")
        check_fields(lookup, ("collection", "vector"), "lookup_from")
        src, sspec = cols.vindex(str(lookup.get("collection")), lookup.get("vector") or using)
    named: list[Any] = []

    def vec(x: Any, where: str) -> np.ndarray:
        if isinstance(x, (int, str)) and not isinstance(x, bool):
            named.append(point_id(x))
            sid = doc_id(named[-1])
            got = read_vectors(src, sspec["distance"], [sid])
            if sid not in got:
                raise QdrantError(404, f"Not found: No point with id {x} found (or it has no "
                                       f"vector {using!r})")
            v = np.asarray(got[sid], dtype=np.float64)
            if len(v) != int(spec["size"]):  # lookup_from a vector of another dimension
                raise QdrantError(400, f"Wrong input: Vector dimension error: expected dim: "
                                       f"{spec['size']}, got {len(v)} (point {x} of "
                                       f"{'lookup_from' if lookup else 'the collection'}).")
        elif isinstance(x, list) and len(x) == int(spec["size"]) and all(
                isinstance(e, (int, float)) and not isinstance(e, bool) for e in x):
            v = np.asarray(x, dtype=np.float64)
        else:
            raise QdrantError(400, f"Bad request: {where}: expected a point id or a vector of "
                                   f"dim {spec['size']}.")
        if not np.isfinite(v).all():
            raise QdrantError(400, f"Bad request: {where}: the vector holds NaN or inf.")
        if spec["distance"] == "Cosine":
            v = v / max(float(np.linalg.norm(v)), 1e-12)
        return v

    def many(xs: Any, where: str) -> list[np.ndarray]:
        xs = [] if xs is None else xs if isinstance(xs, list) else [xs]
        if len(xs) > MAX_EXAMPLES:
            raise QdrantError(400, f"Bad request: {where}: at most {MAX_EXAMPLES} examples.")
        return [vec(x, f"{where}[{i}]") for i, x in enumerate(xs)]

    def pairs(ctx: Any) -> list[Any]:
        ctx = [] if ctx is None else ctx if isinstance(ctx, list) else [ctx]
        if len(ctx) > MAX_EXAMPLES or not all(isinstance(c, dict) for c in ctx):
            raise QdrantError(400, f"Bad request: context: at most {MAX_EXAMPLES} pairs "
                                   "{\"positive\", \"negative\"}.")
        return [d.ContextPair(vec(c.get("positive"), "positive").tolist(),
                              vec(c.get("negative"), "negative").tolist()) for c in ctx]

    target, score = _plan(body.get("query"), vec, many, pairs)
    mine = named if lookup is None else []  # the examples are left out of the results
    if score is None:
        flt = body.get("filter")
        if mine:
            flt = {"must": [flt] if flt else [], "must_not": [{"has_id": mine}]}
        return dict(cols.query(name, {**body, "query": target.tolist(), "filter": flt,
                                      "lookup_from": None}))
    return _scored(cols, name, body, index, spec, score, set(map(doc_id, mine)), limit + offset,
                   offset)


def _plan(query: Any, vec: Any, many: Any, pairs: Any) -> tuple[Any, Any]:
    """``(target vector, None)`` of a query searched by one vector, else ``(None, (scoring
    function of qdrant-client's local mode, its query))``."""
    from qdrant_client.http import models as m
    from qdrant_client.local import distances as d

    target: Any = None
    if isinstance(query, dict) and set(query) == {"nearest"}:
        query = query["nearest"]
    kind = next(iter(query)) if isinstance(query, dict) else None
    arg = query[kind] if kind else None
    score: Any = None
    if kind is None:  # a point id: its own vector
        target = vec(query, "query")
    elif kind == "recommend" and isinstance(arg, dict):
        check_fields(arg, ("positive", "negative", "strategy"), "query.recommend")
        pos, neg = many(arg.get("positive"), "positive"), many(arg.get("negative"), "negative")
        strategy = arg.get("strategy") or "average_vector"
        if not pos and strategy == "average_vector":
            raise QdrantError(400, "Bad request: recommend average_vector needs a positive example.")
        if strategy == "average_vector":
            mean = np.mean(pos, axis=0)
            target = mean + mean - np.mean(neg, axis=0) if neg else mean
        elif strategy in ("best_score", "sum_scores"):
            reco = d.RecoQuery([v.tolist() for v in pos], [v.tolist() for v in neg],
                               strategy=m.RecommendStrategy(strategy))
            score = (d.calculate_recommend_best_scores if strategy == "best_score"
                     else d.calculate_recommend_sum_scores), reco
        else:
            raise QdrantError(400, f"Bad request: recommend strategy {strategy!r}; expected "
                                   "average_vector, best_score or sum_scores.")
    elif kind == "discover" and isinstance(arg, dict):
        check_fields(arg, ("target", "context"), "query.discover")
        score = d.calculate_discovery_scores, d.DiscoveryQuery(vec(arg.get("target"), "target"),
                                                               pairs(arg.get("context")))
    elif kind == "context":
        score = d.calculate_context_scores, d.ContextQuery(pairs(arg))
    elif kind == "relevance_feedback" and isinstance(arg, dict):
        score = d.calculate_naive_feedback_query, _feedback(arg, vec)
    else:
        raise unsupported(f"query {str(query)[:60]!r}")
    return target, score


def _feedback(arg: dict[str, Any], vec: Any) -> Any:
    """Local mode's ``NaiveFeedbackQuery`` of ``{"target", "feedback": [{"example", "score"}],
    "strategy": {"naive": {"a", "b", "c"}}}`` (each example a point id or a vector)."""
    from qdrant_client.local import distances as d

    check_fields(arg, ("target", "feedback", "strategy"), "query.relevance_feedback")
    strategy = arg.get("strategy")
    naive = strategy.get("naive") if isinstance(strategy, dict) else None
    feedback = arg.get("feedback")
    if not isinstance(naive, dict) or not isinstance(feedback, list) or len(feedback) > MAX_EXAMPLES or not all(
            isinstance(f, dict) and isinstance(f.get("score"), (int, float)) for f in feedback):
        raise QdrantError(400, "Bad request: relevance_feedback needs feedback [{\"example\", \"score\"}] "
                               f"(at most {MAX_EXAMPLES}) and strategy {{\"naive\": {{\"a\", \"b\", \"c\"}}}}.")
    check_fields(naive, ("a", "b", "c"), "strategy.naive")
    if not all(isinstance(naive.get(x), (int, float)) and not isinstance(naive.get(x), bool) for x in "abc"):
        raise QdrantError(400, f"Bad request: strategy.naive a, b, c must be numbers, got {naive}.")
    coef = [float(naive[x]) for x in "abc"]
    items = [d.FeedbackItem(vec(f.get("example"), f"feedback[{i}].example").tolist(), float(f["score"]))
             for i, f in enumerate(feedback)]
    return d.NaiveFeedbackQuery(vec(arg.get("target"), "target").tolist(), items,
                                d.NaiveFeedbackCoefficients(*coef))


def _scored(cols: Any, name: str, body: dict[str, Any], index: Any, spec: dict[str, Any],
            score: Any, excluded: set[int], k: int, offset: int) -> dict[str, Any]:
    """The ``k`` best points by an exact score over every kept vector, from ``offset``."""
    from qdrant_client.http import models as m

    home = cols.served(name)
    if points.count(home) > cols.MAX_SCAN:
        raise unsupported(f"recommend / discover / context on a collection of more than "
                          f"{cols.MAX_SCAN} points", "recommend with strategy average_vector")
    flt = qfilter(body.get("filter"), cols.scan(name))
    sids = [r["store_id"] for r in records_of(index, None, flt) if r["store_id"] not in excluded]
    got = read_vectors(index, spec["distance"], sids)
    sids = [s for s in sids if s in got]
    if not sids or k == 0:
        return {"points": []}
    fn, query = score
    X, parts = np.asarray([got[s] for s in sids]), []
    for i in range(0, len(X), _SCORE_ROWS):  # in blocks: the request's deadline is checked between
        check_deadline()
        parts.append(np.asarray(fn(query, X[i:i + _SCORE_ROWS], m.Distance(spec["distance"]))))
    scores = np.concatenate(parts)
    order = np.argsort(-scores, kind="stable")
    threshold = body.get("score_threshold")
    hits = [(sids[i], float(scores[i])) for i in order[:k]
            if threshold is None or scores[i] >= threshold][offset:]
    return {"points": cols._records(home, [s for s, _ in hits], body.get("with_payload", False),
                                    body.get("with_vector", False), [x for _, x in hits])}


#: points scored per block by an exact example query (between two deadline checks)
_SCORE_ROWS = 4096


def _both(a: Any, b: Any) -> Any:
    """The filter JSON of ``a`` and ``b`` (either may be absent)."""
    parts = [f for f in (a, b) if f]
    return None if not parts else parts[0] if len(parts) == 1 else {"must": parts}


def _listed(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [x]
    if not isinstance(x, list) or len(x) > MAX_EXAMPLES:
        raise QdrantError(400, f"Bad request: prefetch must be a query or a list of at most "
                               f"{MAX_EXAMPLES}.")
    return x


def prefetch_query(cols: Any, name: str, body: dict[str, Any], limit: int, offset: int
                   ) -> dict[str, Any]:
    """``POST points/query`` with ``prefetch`` (nested too): each prefetch is a query of its own
    (the outer filters propagated down, as Qdrant does), then the candidates are fused (RRF with
    ``k`` / ``weights``, DBSF: qdrant-client's own fusion) or re-scored by the outer query."""
    sources = [_prefetch(cols, name, p, body.get("filter")) for p in _listed(body["prefetch"])]
    return dict(_merge(cols, name, sources, body, limit, offset, final=True))


def _prefetch(cols: Any, name: str, p: Any, outer: Any) -> list[Any]:
    from qdrant_client.http import models as m

    from slimvec.service.qdrant_api.models import count_arg

    check_deadline()
    if not isinstance(p, dict):
        raise QdrantError(400, "Bad request: a prefetch must be an object.")
    check_fields(p, ("prefetch", "query", "using", "filter", "params", "score_threshold",
                     "limit", "lookup_from"), "prefetch")
    flt = _both(outer, p.get("filter"))
    limit = count_arg(p, "limit", 10)
    if p.get("prefetch"):
        inner = [_prefetch(cols, name, q, flt) for q in _listed(p["prefetch"])]
        return list(_merge(cols, name, inner, {**p, "filter": flt}, limit, 0, final=False))
    got = cols.query(name, {**p, "filter": flt, "limit": limit, "with_payload": False})
    return [m.ScoredPoint(id=x["id"], version=0, score=x["score"]) for x in got["points"]]


def _merge(cols: Any, name: str, sources: list[list[Any]], body: dict[str, Any], limit: int,
           offset: int, final: bool) -> Any:
    from qdrant_client.http import models as m
    from qdrant_client.hybrid.fusion import distribution_based_score_fusion, reciprocal_rank_fusion

    q = body.get("query")
    fusion = q.get("fusion") if isinstance(q, dict) else None
    rrf = q.get("rrf") if isinstance(q, dict) else None
    if fusion in ("rrf", "dbsf") or isinstance(rrf, dict):
        if fusion == "dbsf":
            fused = distribution_based_score_fusion(sources, limit + offset)
        else:
            k, w = (rrf or {}).get("k"), (rrf or {}).get("weights")
            if (k is not None and (not isinstance(k, int) or k < 1)) or (
                    w is not None and (not isinstance(w, list) or len(w) != len(sources))):
                raise QdrantError(400, "Bad request: rrf.k must be a positive integer and "
                                       "rrf.weights one number per prefetch.")
            fused = reciprocal_rank_fusion(sources, limit + offset, ranking_constant_k=k, weights=w)
        threshold = body.get("score_threshold")
        fused = [p for p in fused if threshold is None or p.score >= threshold][offset:]
        if not final:
            return fused
        from slimvec.ids import doc_ids

        sids = doc_ids([point_id(p.id) for p in fused]).tolist()
        return {"points": cols._records(cols.served(name), sids, body.get("with_payload", False),
                                        body.get("with_vector", False), [p.score for p in fused])}
    if isinstance(q, dict) and "formula" in q:
        hits = _formula(cols, name, q, sources)
        threshold = body.get("score_threshold")
        hits = [(i, x) for i, x in hits if threshold is None or x >= threshold][offset:limit + offset]
        if not final:
            return [m.ScoredPoint(id=i, version=0, score=x) for i, x in hits]
        from slimvec.ids import doc_ids

        sids = doc_ids([point_id(i) for i, _ in hits]).tolist() if hits else []
        return {"points": cols._records(cols.served(name), sids, body.get("with_payload", False),
                                        body.get("with_vector", False), [x for _, x in hits])}
    if q is None or isinstance(q, dict) and "fusion" in q:
        raise unsupported(f"prefetch with query {str(q)[:60]!r}", "fuse with rrf or dbsf, or "
                          "re-score by a vector")
    ids = list(dict.fromkeys(p.id for src in sources for p in src))
    sub = {k: v for k, v in body.items() if k not in ("prefetch", "limit", "offset")}
    got = cols.query(name, {**sub, "filter": _both(body.get("filter"), {"must": [{"has_id": ids}]}),
                            "limit": limit, "offset": offset,
                            **({} if final else {"with_payload": False, "with_vector": False})})
    return got if final else [m.ScoredPoint(id=x["id"], version=0, score=x["score"])
                              for x in got["points"]]


def _formula(cols: Any, name: str, q: dict[str, Any], sources: list[list[Any]]
             ) -> list[tuple[Any, float]]:
    """``[(point id, score)]`` of every prefetched point (in prefetch order) by a formula
    ``{"formula", "defaults"}``, best first: qdrant-client's own evaluator (local mode's
    ``_rescore_with_formula``: ``$score[i]`` is the point's score in prefetch ``i``, payload
    keys and conditions read the point's payload; a score that is not a finite float32, or a
    value the formula cannot use, is a 400 with the evaluator's words)."""
    import warnings

    from pydantic import ValidationError
    from qdrant_client.http import models as m
    from qdrant_client.hybrid.formula import evaluate_expression, parse_defaults, raise_non_finite_error, validate_expression

    try:
        query = m.FormulaQuery.model_validate(q)
    except ValidationError as exc:
        raise QdrantError(400, f"Bad request: Format error in formula: {exc.errors()[0]['msg']}.") from None
    scores = [{p.id: p.score for p in src} for src in sources]
    ids = list(dict.fromkeys(p.id for src in sources for p in src))
    got = {r["store_id"]: r for r in records_of(cols.served(name), [point_id(i) for i in ids], None)} if ids else {}
    recs = {pid: got.get(doc_id(point_id(pid))) for pid in ids}
    has = cols._has_vectors(name, list(got))
    out = []
    try:
        validate_expression(query.formula)
        defaults = parse_defaults(query.defaults or {})
        for pid in ids:
            rec = recs.get(pid)
            x = evaluate_expression(query.formula, pid, scores, rec["payload"] if rec else {},
                                    has.get(rec["store_id"], {}) if rec else {}, defaults)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f32 = np.float32(x)
            if not np.isfinite(f32):
                raise_non_finite_error(f"{x} as f32 = {f32}")
            out.append((pid, float(f32)))
    except (ValueError, ArithmeticError) as exc:
        raise QdrantError(400, f"Bad request: {exc}") from None
    return sorted(out, key=lambda t: -t[1])


def request_cost(cols: Any, name: str, bodies: list[Any]) -> bool:
    """Refuse (400), before any work, a query request over its budget (issue 48 F5): more than
    :data:`~slimvec.service.limits.MAX_SEARCHES` searches (every query of a batch, every
    prefetch at every depth), prefetches nested deeper than ``MAX_PREFETCH_DEPTH``, more than
    ``MAX_EXAMPLE_WORK`` example vectors x points scored exactly, or more than
    ``MAX_SCAN_WORK`` points through the fallback filter (each distinct part that slimvec's
    filter language lacks is evaluated once per request, over every point). True when the
    request is heavy (it takes one of the collection's ``HeavySlots``)."""
    side = exposed(cols.settings(name))[1]
    searches, examples, scans = 0, 0, set[str]()

    def walk(q: Any, depth: int) -> None:
        nonlocal searches, examples
        if not isinstance(q, dict):
            return  # refused with its reason by the query itself
        if depth > MAX_PREFETCH_DEPTH:
            raise QdrantError(400, f"Bad request: prefetches nest more than {MAX_PREFETCH_DEPTH} "
                                   "deep (MAX_PREFETCH_DEPTH); flatten them.")
        searches += 1
        if searches > MAX_SEARCHES:
            raise QdrantError(400, f"Bad request: the request runs more than {MAX_SEARCHES:,} "
                                   "searches (every query of a batch and every prefetch at every "
                                   "depth; the budget MAX_SEARCHES); split it into several "
                                   "requests.")
        scans.update(json.dumps(p, sort_keys=True, default=str) for p in must_parts(q.get("filter"))
                     if needs_scan({"must": [p]}))
        if (q.get("using") or "") not in side:  # side vectors are scored by Qdrant Edge itself
            examples += _scored_examples(q.get("query"))
        pf = q.get("prefetch")
        for p in pf if isinstance(pf, list) else [pf]:
            walk(p, depth + 1)

    for body in bodies:
        walk(body, 0)
    if not scans and not examples:
        return searches > 16
    n = points.count(cols.served(name))
    if examples * n > MAX_EXAMPLE_WORK:
        raise QdrantError(400, f"Bad request: {examples:,} example vectors scored exactly against "
                               f"{n:,} points is {examples * n:,} scores, above the budget of "
                               f"{MAX_EXAMPLE_WORK:,} a request (MAX_EXAMPLE_WORK); send fewer "
                               "examples or context pairs, or recommend with strategy "
                               "average_vector (one search).")
    if len(scans) * n > MAX_SCAN_WORK:
        raise QdrantError(400, f"Bad request: {len(scans)} filter condition(s) beyond slimvec's "
                               "filter language (geo, nested, values_count, full-text, "
                               f"min_should, has_vector), each evaluated point by point over {n:,} "
                               f"points, is {len(scans) * n:,} evaluations, above the budget of "
                               f"{MAX_SCAN_WORK:,} a request (MAX_SCAN_WORK); send fewer distinct "
                               "ones (an outer filter is evaluated once for all its prefetches) "
                               "or filter with match / range conditions.")
    return True


def _scored_examples(query: Any) -> int:
    """Example vectors a dense ``query`` scores exactly against every point (0 when it is
    searched by one vector)."""
    if isinstance(query, dict) and set(query) == {"nearest"}:
        query = query["nearest"]
    if not isinstance(query, dict) or len(query) != 1:
        return 0
    kind, arg = next(iter(query.items()))

    def n(x: Any) -> int:
        return len(x) if isinstance(x, list) else int(x is not None)

    if kind == "recommend" and isinstance(arg, dict) and arg.get("strategy") in (
            "best_score", "sum_scores"):
        return n(arg.get("positive")) + n(arg.get("negative"))
    if kind == "discover" and isinstance(arg, dict):
        return 1 + 2 * n(arg.get("context"))
    if kind == "relevance_feedback" and isinstance(arg, dict):
        return 1 + 2 * n(arg.get("feedback")) ** 2  # the target, two per ordered pair
    return 2 * n(arg) if kind == "context" else 0
