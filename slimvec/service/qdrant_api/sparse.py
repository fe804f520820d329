"""Sparse vectors of a Qdrant collection (issue 38 item 6), kept and searched by Qdrant Edge.

A collection's ``sparse_vectors`` (``{"text-bm25": {"modifier": "idf"}}``) live in one Qdrant Edge
shard beside its settings, ``ROOT/.qdrant/NAME.sparse/``: the real engine, so a sparse query is
scored as Qdrant scores it (the dot product over the shared indices, exact, with the IDF modifier
computed over the points that have the vector). The shard holds the vectors only, under the
points' store ids; ids, payloads and filters stay in the collection's home index, so a filtered
sparse search asks the home for the matching ids first. Edge writes each update to its WAL before
answering; a write of the collection is one journaled operation over the shard and the indexes
(:mod:`.journal`), so a point is whole or absent after a kill -9.
"""

from __future__ import annotations

import math
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.service.qdrant_api.collection import parse_vectors
from slimvec.service.qdrant_api.models import QdrantError, check_fields

__all__ = ["SparseShards", "parse_sparse_config", "check_sparse", "is_sparse", "edge_query",
           "split_multi", "check_multi", "check_side", "MAX_NNZ", "MAX_ROWS"]

#: the most non-zero entries of one sparse vector (a query's or a point's)
MAX_NNZ = 65_536
#: a sparse index is an unsigned 32-bit integer (Qdrant's ``DimId``)
MAX_INDEX = 2 ** 32 - 1
_SUFFIX = ".sparse"
#: the most vectors of one multivector
MAX_ROWS = 1024
#: the most examples (ids or vectors) of one recommend / discover / context query
MAX_EXAMPLES = 1024


def is_sparse(vec: Any) -> bool:
    """Whether ``vec`` is spelled as a sparse vector (``{"indices", "values"}``)."""
    return isinstance(vec, dict) and ("indices" in vec or "values" in vec)


def check_sparse(vec: Any, where: str) -> tuple[list[int], list[float]]:
    """``(indices, values)`` of a sparse vector, every part checked (a 400 naming ``where``)."""
    if not is_sparse(vec):
        raise QdrantError(400, f"Bad request: {where}: expected a sparse vector "
                               "{\"indices\": [...], \"values\": [...]}.")
    check_fields(vec, ("indices", "values"), where)
    idx, val = vec.get("indices"), vec.get("values")
    if not isinstance(idx, list) or not isinstance(val, list) or len(idx) != len(val):
        raise QdrantError(400, f"Bad request: {where}: indices and values must be lists of the "
                               "same length.")
    if len(idx) > MAX_NNZ:
        raise QdrantError(400, f"Bad request: {where}: {len(idx)} non-zero entries, more than "
                               f"{MAX_NNZ}; send a sparser vector.")
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= MAX_INDEX for i in idx):
        raise QdrantError(400, f"Bad request: {where}: every index must be an integer in "
                               f"0..{MAX_INDEX}.")
    if len(set(idx)) != len(idx):
        raise QdrantError(400, f"Bad request: {where}: indices must be unique.")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in val):
        raise QdrantError(400, f"Bad request: {where}: every value must be a finite number.")
    return idx, [float(v) for v in val]


def split_multi(vectors: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    """``(dense vectors config, {name: {"size", "distance"}})`` of a create request's
    ``vectors``: the multivectors (``multivector_config``, max-sim) go to the side shard."""
    named = {"": vectors} if isinstance(vectors, dict) and "size" in vectors else vectors
    if not isinstance(named, dict):
        return vectors, {}
    multi = {k: v for k, v in named.items() if isinstance(v, dict) and v.get("multivector_config")}
    out = {}
    for k, v in multi.items():
        mv = v["multivector_config"]
        if not isinstance(mv, dict) or mv.get("comparator") != "max_sim":
            raise QdrantError(400, f"Bad request: vector {k!r}: multivector_config.comparator "
                                   "must be max_sim.")
        size, distance, _opts = parse_vectors({x: y for x, y in v.items() if x != "multivector_config"})
        out[str(k)] = {"size": size, "distance": distance}
    if not multi:
        return vectors, {}
    rest = {k: v for k, v in named.items() if k not in multi}
    return (rest or None) if named is vectors else None, out




def check_multi(vec: Any, size: int, where: str) -> list[list[float]]:
    """A multivector (a list of vectors of ``size`` numbers), checked (a 400 naming ``where``)."""
    if not isinstance(vec, list) or not vec or not all(isinstance(r, list) for r in vec):
        raise QdrantError(400, f"Bad request: {where}: expected a multivector (a non-empty list "
                               "of vectors).")
    if len(vec) > MAX_ROWS or any(len(r) != size for r in vec):
        raise QdrantError(400, f"Wrong input: Vector dimension error: {where}: expected at most "
                               f"{MAX_ROWS} vectors of dim {size}.")
    try:
        arr = np.asarray(vec, dtype=np.float64)
    except (TypeError, ValueError):
        raise QdrantError(400, f"Bad request: {where}: a value is not a number.") from None
    if not np.isfinite(arr).all():
        raise QdrantError(400, f"Bad request: {where}: the vector holds NaN or inf.")
    return arr.tolist()




def check_side(vec: Any, spec: dict[str, Any], where: str) -> Any:
    """A sparse vector ``(indices, values)`` or a multivector, as the side vector's ``spec``."""
    return check_multi(vec, int(spec["size"]), where) if "size" in spec else check_sparse(vec, where)




def parse_sparse_config(raw: Any, dense: Any) -> dict[str, dict[str, Any]]:
    """``{name: params}`` of a create request's ``sparse_vectors`` (Qdrant's
    ``SparseVectorParams``: ``modifier`` ``idf`` or ``none`` is built by; ``index`` is recorded)."""
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise QdrantError(400, "Bad request: sparse_vectors must be an object {name: params}.")
    from pydantic import ValidationError
    from qdrant_client.http import models as m

    out = {}
    for name, params in raw.items():
        if not isinstance(name, str) or not name or name in dense:
            raise QdrantError(400, f"Bad request: sparse vector name {str(name)[:40]!r}: a "
                                   "non-empty name that no dense vector has.")
        try:
            p = m.SparseVectorParams.model_validate(params or {})
        except ValidationError as exc:
            raise QdrantError(400, f"Bad request: sparse_vectors.{name}: "
                                   f"{exc.errors()[0]['msg']}.") from None
        out[name] = p.model_dump(mode="json", exclude_none=True)
    return out


def edge_query(query: Any, using: str, vector_of: Callable[[Any], Any],
               check: Callable[[Any, str], Any]) -> tuple[Any, list[Any]]:
    """The Qdrant Edge query of a REST ``query`` on side vector ``using`` (sparse or multi) and
    the point ids it names (Qdrant leaves them out of the results). Served: a vector or
    ``{"nearest"}`` (with ``mmr``), a point id, ``recommend`` (``average_vector``,
    ``best_score``, ``sum_scores``), ``discover`` and ``context``; ``vector_of`` reads a point's
    vector by id, ``check`` checks a vector sent (each as ``(indices, values)`` or a list)."""
    import qdrant_edge as q

    named: list[Any] = []

    def vec(x: Any, where: str) -> Any:
        if isinstance(x, (int, str)) and not isinstance(x, bool):
            named.append(x)
            v = vector_of(x)
        else:
            v = check(x, where)
        return q.SparseVector(*v) if isinstance(v, tuple) else v

    def many(xs: Any, where: str) -> list[Any]:
        xs = [] if xs is None else xs if isinstance(xs, list) and not _one_vector(xs) else [xs]
        if len(xs) > MAX_EXAMPLES:
            raise QdrantError(400, f"Bad request: {where}: at most {MAX_EXAMPLES} examples.")
        return [vec(x, f"{where}[{i}]") for i, x in enumerate(xs)]

    def pairs(ctx: Any, where: str) -> list[Any]:
        ctx = [] if ctx is None else ctx if isinstance(ctx, list) else [ctx]
        if len(ctx) > MAX_EXAMPLES or not all(isinstance(c, dict) for c in ctx):
            raise QdrantError(400, f"Bad request: {where}: at most {MAX_EXAMPLES} pairs "
                                   "{\"positive\", \"negative\"}.")
        return [q.ContextPair(positive=vec(c.get("positive"), f"{where}[{i}].positive"),
                              negative=vec(c.get("negative"), f"{where}[{i}].negative"))
                for i, c in enumerate(ctx)]

    kind = next(iter(query)) if isinstance(query, dict) and len(query) == 1 else None
    arg = query.get(kind) if kind else None
    if isinstance(query, dict) and "nearest" in query and set(query) <= {"nearest", "mmr"}:
        mmr = query.get("mmr")
        if mmr is None:
            return q.Query.Nearest(vec(query["nearest"], "query.nearest"), using=using), named
        check_fields(mmr, ("diversity", "candidates_limit"), "query.mmr")
        div, cand = mmr.get("diversity", 0.5), mmr.get("candidates_limit") or 100
        if not isinstance(div, (int, float)) or not 0 <= div <= 1 or not isinstance(cand, int) \
                or not 0 < cand <= 10_000:
            raise QdrantError(400, "Bad request: mmr.diversity must be in 0..1 and "
                                   "mmr.candidates_limit in 1..10000.")
        return q.Mmr(vec(query["nearest"], "query.nearest"), 1.0 - div, cand, using=using), named
    if kind == "recommend" and isinstance(arg, dict):
        check_fields(arg, ("positive", "negative", "strategy"), "query.recommend")
        pos, neg = many(arg.get("positive"), "positive"), many(arg.get("negative"), "negative")
        strategy = arg.get("strategy") or "average_vector"
        if strategy == "average_vector":
            return q.Query.Nearest(_average(pos, neg), using=using), named
        rq = q.RecommendQuery(positives=pos, negatives=neg)
        if strategy == "best_score":
            return q.Query.RecommendBestScore(rq, using=using), named
        if strategy == "sum_scores":
            return q.Query.RecommendSumScores(rq, using=using), named
        raise QdrantError(400, f"Bad request: recommend strategy {strategy!r}; expected "
                               "average_vector, best_score or sum_scores.")
    if kind == "discover" and isinstance(arg, dict):
        check_fields(arg, ("target", "context"), "query.discover")
        target = vec(arg.get("target"), "discover.target")
        return q.Query.Discover(q.DiscoverQuery(target, pairs(arg.get("context"), "context")),
                                using=using), named
    if kind == "context":
        return q.Query.Context(q.ContextQuery(pairs(arg, "context")), using=using), named
    return q.Query.Nearest(vec(query, "query"), using=using), named


def _one_vector(xs: list[Any]) -> bool:
    """Whether a list of examples is one multivector (a list of lists of numbers)."""
    return bool(xs) and isinstance(xs[0], list) and (not xs[0] or not isinstance(xs[0][0], list))


def _average(pos: list[Any], neg: list[Any]) -> Any:
    """Qdrant's ``average_vector`` of sparse examples: the mean of the positives, moved away
    from the mean of the negatives; of multivectors: the positives' vectors and the negatives'
    negated (qdrant-client's own arithmetic)."""
    import qdrant_edge as q

    if pos and isinstance(pos[0], list):
        return [r for v in pos for r in v] + [[-x for x in r] for v in neg for r in v]
    from qdrant_client.http import models as m
    from qdrant_client.local.sparse import sort_sparse_vector
    from qdrant_client.local.sparse_distances import merge_positive_and_negative_avg, sparse_avg

    if not pos:
        raise QdrantError(400, "Bad request: recommend average_vector needs a positive example.")
    mean = [sparse_avg([sort_sparse_vector(m.SparseVector(indices=list(v.indices),
                                                          values=list(v.values))) for v in vs])
            for vs in (pos, neg)]
    out = merge_positive_and_negative_avg(*mean) if neg else mean[0]
    return q.SparseVector(indices=[int(i) for i in out.indices],
                          values=[float(x) for x in out.values])


def _named(vector: Any) -> dict[str, Any]:
    """A record's vectors by name (Edge answers the unnamed vector alone as itself)."""
    return vector if isinstance(vector, dict) else {} if vector is None else {"": vector}


def _plain(x: Any) -> Any:
    """An Edge vector as written: ``(indices, values)`` of a sparse one, else lists of floats."""
    if hasattr(x, "indices"):
        return list(x.indices), list(x.values)
    return [[float(v) for v in r] for r in x]


class SparseShards:
    """The sparse-vector shards of a server's Qdrant collections (opened on first use)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()  # guards every shard (the engine's calls are short)

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}{_SUFFIX}"

    def create(self, name: str, cfg: dict[str, dict[str, Any]]) -> None:
        """A new empty shard for collection ``name``: its sparse vectors (``{modifier}``) and
        multivectors (``{size, distance}``, max-sim)."""
        import qdrant_edge as q

        sparse = {v: q.EdgeSparseVectorParams(
            modifier=q.Modifier.Idf if p.get("modifier") == "idf" else None)
            for v, p in cfg.items() if "size" not in p}
        multi = {v: q.EdgeVectorParams(p["size"], getattr(q.Distance, p["distance"]),
                                       multivector_config=q.MultiVectorConfig(q.MultiVectorComparator.MaxSim))
                 for v, p in cfg.items() if "size" in p}
        with self._lock:
            self._open[name] = q.EdgeShard.create(str(self._path(name)), q.EdgeConfig(
                vectors=multi or None, sparse_vectors=sparse or None))

    def add_vector(self, name: str, vname: str, params: dict[str, Any]) -> None:
        """Add side vector ``vname`` (``params`` as :meth:`create`'s) to collection ``name``'s
        shard, which is made when it has none."""
        import qdrant_edge as q

        if not self._path(name).exists():
            self.create(name, {vname: params})
            return
        op = (q.UpdateOperation.create_dense_vector(
            vname, params["size"], getattr(q.Distance, params["distance"]),
            multivector_config=q.MultiVectorConfig(q.MultiVectorComparator.MaxSim)) if "size" in params
            else q.UpdateOperation.create_sparse_vector(
                vname, modifier=q.Modifier.Idf if params.get("modifier") == "idf" else None))
        with self._lock:
            self._shard(name).update(op)

    def drop_vector(self, name: str, vname: str) -> None:
        """Remove side vector ``vname`` from collection ``name``'s shard and its points."""
        import qdrant_edge as q

        with self._lock:
            self._shard(name).update(q.UpdateOperation.delete_vector_name(vname))

    def drop(self, name: str) -> None:
        """Close and remove collection ``name``'s shard (nothing when it has none)."""
        with self._lock:
            shard = self._open.pop(name, None)
            if shard is not None:
                shard.close()
            shutil.rmtree(self._path(name), ignore_errors=True)

    def copy(self, name: str, dest: Path) -> None:
        """Copy collection ``name``'s shard folder to ``dest`` (closed meanwhile, so its files
        are at rest; reopened on next use)."""
        with self._lock:
            shard = self._open.pop(name, None)
            if shard is not None:
                shard.close()
            shutil.copytree(self._path(name), dest)

    def place(self, name: str, src: Path) -> None:
        """Make the shard folder ``src`` (a restored copy) collection ``name``'s."""
        with self._lock:
            src.rename(self._path(name))

    def close(self) -> None:
        with self._lock:
            for shard in self._open.values():
                shard.close()
            self._open.clear()

    def _shard(self, name: str) -> Any:
        shard = self._open.get(name)
        if shard is None:
            import qdrant_edge as q

            shard = self._open[name] = q.EdgeShard.load(str(self._path(name)))
        return shard

    def write(self, name: str, rows: list[tuple[int, dict[str, Any]]], whole: bool) -> None:
        """Write ``(store id, {sparse name: (indices, values)})`` rows: ``whole`` (an upsert)
        replaces each point's sparse vectors (none given: the point leaves the shard); otherwise
        the given vectors join the point's others."""
        import qdrant_edge as q

        with self._lock:
            shard = self._shard(name)
            if not whole:
                old = {int(r.id): _named(r.vector) for r in shard.retrieve([s for s, v in rows if v],
                                                                   None, True)}
                rows = [(s, {**{k: _plain(x) for k, x in (old.get(s) or {}).items()}, **v})
                        for s, v in rows if v]
            gone: list[Any] = [s for s, v in rows if not v]
            if gone:
                shard.update(q.UpdateOperation.delete_points(gone))
            pts = [q.Point(id=s, vector={k: q.SparseVector(*x) if isinstance(x, tuple) else x
                                         for k, x in v.items()}, payload=None)
                   for s, v in rows if v]
            for at in range(0, len(pts), 512):
                shard.update(q.UpdateOperation.upsert_points(pts[at:at + 512]))

    def delete(self, name: str, sids: list[int], vnames: list[str] | None = None) -> None:
        """Remove the points ``sids`` (or only their vectors ``vnames``)."""
        import qdrant_edge as q

        if not sids:
            return
        with self._lock:
            shard = self._shard(name)
            ids: list[Any] = list(sids)
            if vnames is None:
                shard.update(q.UpdateOperation.delete_points(ids))
            else:
                shard.update(q.UpdateOperation.delete_vectors(ids, vnames))

    def read(self, name: str, sids: list[int], vnames: list[str]
             ) -> dict[str, dict[int, Any]]:
        """``{sparse name: {store id: {"indices", "values"}}}`` of the points that have them."""
        with self._lock:
            recs = self._shard(name).retrieve(sids, None, vnames) if sids else []
        out: dict[str, dict[int, Any]] = {v: {} for v in vnames}
        for r in recs:
            for v, x in _named(r.vector).items():
                if v in out:
                    got = _plain(x)
                    out[v][int(r.id)] = (got if isinstance(got, list)
                                         else {"indices": list(got[0]), "values": list(got[1])})
        return out

    def search(self, name: str, query: Any, k: int, allowed: list[int] | None,
               excluded: list[int], threshold: float | None) -> list[tuple[int, float]]:
        """``[(store id, score)]`` of the ``k`` best points by an :func:`edge_query` (only
        ``allowed`` ids when given, never ``excluded`` ones), best first, as Qdrant scores them."""
        import qdrant_edge as q

        if allowed is not None and not allowed:
            return []
        flt = q.Filter(must=None if allowed is None else [q.HasIdCondition(set(allowed))],
                       must_not=[q.HasIdCondition(set(excluded))] if excluded else None)
        req = q.QueryRequest(limit=k, query=query, filter=flt, score_threshold=threshold)
        with self._lock:
            hits = self._shard(name).query(req)
        return [(int(h.id), float(h.score)) for h in hits]
