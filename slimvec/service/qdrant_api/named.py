"""Named dense vectors of a Qdrant collection (issue 38 item 1; docs/qdrant-server.md section 4).

A collection ``NAME`` with vectors ``{text, image, code}`` is one settings file
(``ROOT/.qdrant/NAME.json``: each name's size, distance and options) over one served index per
name, each built by the server's recipe for its own metric: the first name's is ``NAME`` itself,
the others' ``NAME~image``, ``NAME~code`` (hidden from ``GET /collections``). ``NAME`` is the
home of ids and payloads: it holds every point, one without the first vector as a zero vector
flagged :data:`NO_VECTOR` (a service key: never shown, never found by a search). Every other index
holds the points that have its vector, with the same payload, so a filtered search ``using`` a
name runs in that index's own store. An upsert writes each name's index and the home last (and
deletes the point from the indexes of the names it lacks: Qdrant's upsert replaces the point);
payload changes and deletes go to every index, the home last (:mod:`.writes`, one journaled
operation over them all); count, scroll and retrieve read the home. An unnamed collection is the one vector named ``""`` (its index is ``NAME``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from slimvec.ids import doc_id
from slimvec.service.indexes import points
from slimvec.service.limits import check_deadline
from slimvec.service.qdrant_api.collection import parse_vectors
from slimvec.service.qdrant_api.models import (
    SOURCE_ID,
    QdrantError,
    check_fields,
    default_vector,
    must_parts,
    point_id,
    qdrant_id,
    qfilter,
    select_payload,
    unsupported,
)
from slimvec.service.qdrant_api.sparse import SparseShards, check_side, edge_query
from slimvec.sources.checks import MAX_NORM
from slimvec.sources.rowcheck import RowProblem, check_payload

__all__ = ["NO_VECTOR", "SEP", "NamedVectors", "fill_limit", "stored_payloads", "vector_configs", "exposed", "without_holes", "parse_vectors_config",
           "index_name", "vector_selection"]

#: the payload flag of a home row whose point has no first vector (in ``points.SERVICE_KEYS``)
NO_VECTOR = "slimvec_no_vector"
#: joins a collection's name and a vector name into the name of that vector's index
SEP = "~"



def vector_configs(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{vector name: {"size", "distance"}}`` of a collection's settings, in order (the first is
    the home's; kept as a list, the settings file's keys being sorted); an unnamed collection has
    the one name ``""``."""
    if settings.get("vectors"):
        return {v["name"]: v for v in settings["vectors"]}
    return {"": {"size": settings["size"], "distance": settings["distance"]}}


def exposed(settings: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``(dense, side)`` vector configs a client sees: the dense ones in slimvec's indexes, and
    the sparse and multivector ones (those with a ``size``) in the side shard (:mod:`.sparse`).
    A collection without dense vectors (``no_dense``) keeps its ids and payloads in a hidden
    one-dimensional home that it lacks."""
    return ({} if settings.get("no_dense") else vector_configs(settings),
            {**(settings.get("sparse_vectors") or {}), **(settings.get("multi_vectors") or {})})


def without_holes(flt: Any) -> Any:
    """``flt`` (or no filter) leaving out the home's rows flagged :data:`NO_VECTOR`."""
    from dataclasses import replace

    from slimvec.filters import parse_filter

    hole = parse_filter({"must_not": [{"key": NO_VECTOR, "match": {"value": True}}]})
    assert hole is not None
    return hole if flt is None else replace(hole, must=(flt,))


def index_name(name: str, cfg: dict[str, Any], vname: str) -> str:
    """The served index holding vector ``vname`` of collection ``name``."""
    return name if vname == next(iter(cfg)) else f"{name}{SEP}{vname}"


def parse_vectors_config(vectors: Any) -> dict[str, tuple[int, str, dict[str, Any]]]:
    """``{vector name: (size, distance, options)}`` of a create request's ``vectors`` (one
    unnamed vector, or named ones)."""
    if not isinstance(vectors, dict) or "size" in vectors or list(vectors) == [""]:
        return {"": parse_vectors(vectors)}
    if not vectors:
        raise unsupported("a collection without dense vectors", "name at least one vector: "
                          "{\"vectors\": {\"text\": {\"size\": N, \"distance\": \"Cosine\"}}}")
    return {str(vname): parse_vectors(params) for vname, params in vectors.items()}


def vector_selection(with_vector: Any, cfg: dict[str, Any]) -> list[str]:
    """The vector names of ``with_vector``: ``true`` every one, ``false`` none, a list those."""
    if with_vector is None or isinstance(with_vector, bool):
        return list(cfg) if with_vector else []
    if isinstance(with_vector, list) and all(isinstance(v, str) for v in with_vector):
        for vname in with_vector:
            _known(cfg, vname)
        return list(dict.fromkeys(with_vector))
    raise QdrantError(400, f"Bad request: with_vector={str(with_vector)[:80]!r}; expected true, "
                           "false or a list of vector names.")


def _known(cfg: dict[str, Any], vname: Any) -> dict[str, Any]:
    if not isinstance(vname, str) or vname not in cfg:
        names = ", ".join(repr(n) for n in cfg)
        raise QdrantError(400, f"Wrong input: Not existing vector name error: {vname!r} (this "
                               f"collection's vectors: {names}); use one of them.")
    return dict(cfg[vname])


def _point_vectors(cfg: dict[str, Any], raw_id: Any, vec: Any) -> dict[str, Any]:
    """A point's vectors by name (``{"": vec}`` in an unnamed collection); names not given or
    ``null`` are absent."""
    vec = default_vector(vec)
    if vec is None:
        return {}
    if not isinstance(vec, dict):
        _known(cfg, "")  # a named collection refuses an unnamed vector
        return {"": vec}
    for vname in vec:
        _known(cfg, vname)
    return {k: v for k, v in vec.items() if v is not None}


def _check_vector(raw_id: Any, vname: str, vec: Any, size: int) -> list[Any]:
    where = f"point {raw_id}" + (f", vector {vname!r}" if vname else "")
    if isinstance(vec, dict):
        raise unsupported(f"{where}: sparse vectors ({sorted(vec)[:3]})")
    if not isinstance(vec, list) or (vec and isinstance(vec[0], list)):
        raise unsupported(f"{where}: a vector that is not one list of numbers (multivectors)")
    if len(vec) != size:
        raise QdrantError(400, f"Wrong input: Vector dimension error: expected dim: {size}, "
                               f"got {len(vec)} ({where}).")
    try:
        arr = np.asarray(vec, dtype=np.float32)
    except (TypeError, ValueError):
        raise QdrantError(400, f"Bad request: {where}: the vector holds a value that is not a "
                               "number.") from None
    if not np.isfinite(arr).all():
        raise QdrantError(400, f"Bad request: {where}: the vector holds NaN or inf.")
    if float(np.linalg.norm(arr.astype(np.float64))) > MAX_NORM:  # as every store refuses it
        raise QdrantError(400, f"Bad request: {where}: the vector's norm is over {MAX_NORM:.3g}, "
                               "so its scores overflow float32; scale it down.")
    return vec


def check_point(cfg: dict[str, Any], raw_id: Any, vec: Any, payload: Any,
                sparse: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(id, {vector name: vector}, payload)`` of one point of a write, every part checked (a
    400 naming the point otherwise); the ``sparse`` names' vectors as ``(indices, values)``."""
    pid = point_id(raw_id)
    sparse = sparse or {}
    vecs = {vname: check_side(v, sparse[vname], f"point {raw_id}, vector {vname!r}") if vname in sparse
            else _check_vector(raw_id, vname, v, int(cfg[vname]["size"]))
            for vname, v in _point_vectors({**cfg, **sparse}, raw_id, vec).items()}
    if payload is not None and not isinstance(payload, dict):
        raise QdrantError(400, f"Bad request: point {raw_id}: payload must be an object.")
    for key in (SOURCE_ID, NO_VECTOR):
        if payload and key in payload:
            raise QdrantError(400, f"Bad request: point {raw_id}: payload key {key!r} is where "
                                   "slimvec keeps the point's id or state; rename that field.")
    try:
        check_payload(payload, [])
    except RowProblem as bad:
        raise QdrantError(400, f"Bad request: point {raw_id}: payload field {bad.field!r}: "
                               f"{bad.reason}.") from None
    return pid, vecs, payload or {}


def read_vectors(served: Any, distance: str, sids: list[int]) -> dict[int, list[float]]:
    """The kept full vectors of the store ids that have one in ``served`` (normalised to unit
    length in a Cosine index, as Qdrant returns them; at the kept dtype's precision)."""
    view = served.pending_view()
    pays = view.payloads(sids) if view is not None else served.ready_index().payloads(sids)
    have = [s for s, p in zip(sids, pays) if p is not None and not p.get(NO_VECTOR)]
    if not have:
        return {}
    if view is not None:
        X = view.vectors(have)
    else:
        index = served.ready_index()
        full = index.manifest.full
        if full is None:
            raise unsupported("with_vector on a collection whose recipe keeps no full vectors",
                              "create it with a recipe that has keep_full (the default does)")
        got, _found = index.store.get_full(have) if full.in_store else index.full_vectors.get(have)
        X = np.asarray(got, dtype=np.float32)
    if distance == "Cosine":
        X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    return dict(zip(have, X.tolist()))


def stored_payloads(served: Any, sids: list[int]) -> list[dict[str, Any] | None]:
    """The stored payloads of store ids (``None`` where ``served`` holds no such point), from the
    pending rows or the fitted index."""
    view = served.pending_view()
    return view.payloads(sids) if view is not None else served.ready_index().payloads(sids)


def fill_limit(home: Any, search: Callable[[int], list[tuple[int, Any]]], k: int,
               most: int = 65_536) -> list[tuple[int, Any]]:
    """The ``k`` best ``(store id, score)`` hits of ``search(k)`` whose point the collection's
    home index holds: a store searched apart from the home (a named vector's index, the side
    shard) asks for more hits while some fall on points the home lacks (a write still under way
    there), so a query never comes back short for them."""
    want = k
    while True:
        hits = search(want)
        pays = stored_payloads(home, [int(s) for s, _ in hits])
        kept = [h for h, p in zip(hits, pays) if p is not None]
        if len(kept) >= k or len(hits) < want or want >= most:
            return kept[:k]
        want = min(most, want * 2)


def records_of(served: Any, ids: list[Any] | None, flt: Any) -> list[dict[str, Any]]:
    """The records (``points.get``'s) of ``ids``, or of every point matching ``flt``."""
    if ids is not None:
        return [r for r in points.get(served, ids) if r is not None]
    recs: list[dict[str, Any]] = []
    start = None
    while True:
        check_deadline()  # a request's deadline stops a long read between pages
        page, start = points.scroll(served, 1000, start, flt)
        recs += page
        if start is None:
            return recs


class NamedVectors:
    """The vector-name half of :class:`~slimvec.service.qdrant_api.translate.Collections`."""

    st: Any
    sparse: SparseShards
    settings: Callable[[str], dict[str, Any]]
    served: Callable[[str], Any]
    _save: Callable[[str, dict[str, Any]], None]

    def vindex(self, name: str, vname: Any) -> tuple[Any, dict[str, Any]]:
        """The served index of vector ``vname`` of collection ``name`` and that vector's config."""
        home = self.served(name)
        cfg = vector_configs(self.settings(name))
        spec = _known(cfg, vname)
        iname = index_name(name, cfg, vname)
        return (home if iname == name else self.st.registry.get(iname)), spec

    def each_index(self, name: str) -> list[Any]:
        """Every served index of collection ``name``, the home last."""
        home = self.served(name)
        cfg = vector_configs(self.settings(name))
        return [self.st.registry.get(index_name(name, cfg, v)) for v in list(cfg)[1:]] + [home]

    def _records(self, served: Any, sids: list[int], with_payload: Any, with_vector: Any,
                 scores: list[float] | None = None) -> list[dict[str, Any]]:
        """Records (or scored points) of store ids from the home index ``served``, in order; ids
        without a stored point dropped; ``with_vector`` names read from their indexes."""
        pays = stored_payloads(served, sids)
        keep = [sids[j] for j, p in enumerate(pays) if p is not None]
        s = self.settings(served.name)
        cfg, sp = exposed(s)
        chosen = vector_selection(with_vector, {**cfg, **sp})
        vecs: dict[str, dict[int, Any]] = {
            v: read_vectors(self.vindex(served.name, v)[0], cfg[v]["distance"], keep)
            for v in chosen if v in cfg}
        if any(v in sp for v in chosen):
            vecs.update(self.sparse.read(served.name, keep, [v for v in chosen if v in sp]))
        out = []
        for j, pay in enumerate(pays):
            if pay is None:
                continue
            p = {k: v for k, v in pay.items() if k != NO_VECTOR}
            rec: dict[str, Any] = {"id": qdrant_id(p.pop(SOURCE_ID, None))}
            if scores is not None:
                rec.update(version=0, score=scores[j])
            rec["payload"] = select_payload(p, with_payload)
            if vecs:
                got = {v: byid[sids[j]] for v, byid in vecs.items() if sids[j] in byid}
                rec["vector"] = got.get("") if [*cfg, *sp] == [""] else got
            out.append(rec)
        return out

    def store_ids(self, name: str, ids: list[Any] | None, flt: Any) -> list[int]:
        """The store ids of ``ids``, or of the points of collection ``name`` matching ``flt``."""
        if ids is not None:
            return [doc_id(i) for i in ids]
        return [r["store_id"] for r in records_of(self.served(name), None, flt)]

    def sparse_query(self, name: str, body: dict[str, Any], limit: int, offset: int
                     ) -> list[tuple[int, float]]:
        """``[(store id, score)]`` of a query ``using`` a sparse vector, best first, from
        ``offset`` (a filter is applied to the home's payloads: the ids it selects)."""
        from slimvec.service.limits import MAX_RESULTS, check_size

        using = body.get("using") or ""
        src, vsrc = self._lookup(name, using, body.get("lookup_from"))
        spec = exposed(self.settings(name))[1][using]

        def vector_of(pid: Any) -> Any:
            got = self.sparse.read(src, [doc_id(point_id(pid))], [vsrc])[vsrc]
            if not got:
                raise QdrantError(404, f"Not found: No point with id {pid} found (or it has "
                                       f"no vector {using!r})")
            v = next(iter(got.values()))
            if isinstance(v, list):  # a multivector, maybe of another dimension (lookup_from)
                return check_side(v, spec, f"point {pid}" + (" of lookup_from" if src != name else ""))
            return v["indices"], v["values"]

        query, named = edge_query(body.get("query"), using, vector_of,
                                  lambda x, where: check_side(x, spec, where))
        check_size(limit + offset, MAX_RESULTS, "The results asked of one query (offset + limit)",
                   "ask for fewer, or page with a filter or scroll.")
        flt = qfilter(body.get("filter"), self.scan(name))
        allowed = None if flt is None else self.store_ids(name, None, flt)
        mine = [doc_id(point_id(x)) for x in named] if src == name else []  # examples excluded
        hits = fill_limit(self.served(name), lambda k: self.sparse.search(
            name, query, k, allowed, mine, body.get("score_threshold")), limit + offset)
        return hits[offset:]

    def _lookup(self, name: str, using: str, lookup: Any) -> tuple[str, str]:
        """The collection and sparse vector name examples given by id are read from: Qdrant's
        ``lookup_from`` (``{"collection", "vector"}``), else the queried ones."""
        if lookup is None:
            return name, using
        if not isinstance(lookup, dict):
            raise QdrantError(400, "Bad request: lookup_from must be {\"collection\", \"vector\"}.")
        check_fields(lookup, ("collection", "vector"), "lookup_from")
        src = lookup.get("collection")
        vsrc = lookup.get("vector") or using
        if not isinstance(src, str) or vsrc not in exposed(self.settings(src))[1]:
            raise QdrantError(400, f"Bad request: lookup_from: collection {str(src)[:60]!r} has no "
                                   f"sparse vector {str(vsrc)[:60]!r}.")
        return src, vsrc

    #: the most points a filter beyond slimvec's language is evaluated over (in Python)
    MAX_SCAN = 100_000

    def scan(self, name: str) -> Callable[[Any, Exception], Any]:
        """The :func:`qfilter` fallback of collection ``name``: a filter slimvec's language
        lacks is evaluated on every point by qdrant-client's local-mode evaluator (Qdrant's
        reference semantics), giving the filter of the matching ids."""
        return lambda spec, exc: self._scan(name, spec, exc)

    def _scan(self, name: str, spec: Any, exc: Exception) -> Any:
        """The filter of the ids of collection ``name`` matching ``spec``: each part of a
        ``must`` alone (the ones slimvec's language has stay native), a part it lacks evaluated
        once per request (issue 48 F5: an outer filter once for all its prefetches)."""
        import json

        from slimvec.filters import Filter
        from slimvec.service.limits import current_deadline

        parts = must_parts(spec)
        if len(parts) > 1:
            got = [qfilter({"must": [p]}, self.scan(name)) for p in parts]
            return Filter(must=tuple(f for f in got if f is not None))
        deadline, key = current_deadline(), (name, json.dumps(parts, sort_keys=True, default=str))
        if deadline is not None and key in deadline.scans:
            return deadline.scans[key]
        flt = self._evaluate(name, {"must": parts}, exc)
        if deadline is not None:
            deadline.scans[key] = flt
        return flt

    def _evaluate(self, name: str, spec: Any, exc: Exception) -> Any:
        from pydantic import ValidationError
        from qdrant_client.http import models as m
        from qdrant_client.local.payload_filters import check_filter

        from slimvec.filters import Filter, HasId

        try:
            model = m.Filter.model_validate(spec)
        except ValidationError as bad:
            raise QdrantError(400, f"Bad request: Format error in filter: "
                                   f"{bad.errors()[0]['msg']}.") from None
        home = self.served(name)
        if points.count(home) > self.MAX_SCAN:
            raise QdrantError(400, f"Bad request: {exc} (a collection of at most "
                                   f"{self.MAX_SCAN} points evaluates it point by point).")
        recs = records_of(home, None, None)
        has = self._has_vectors(name, [r["store_id"] for r in recs]) if "has_vector" in str(spec) else {}
        ids = []
        for i, r in enumerate(recs):
            if i % 1024 == 0:
                check_deadline()
            if check_filter(model, r["payload"], qdrant_id(r["id"]), has.get(r["store_id"], {})):
                ids.append(r["id"])
        return Filter(must=(HasId(frozenset(ids)),))

    def _has_vectors(self, name: str, sids: list[int]) -> dict[int, dict[str, bool]]:
        """``{store id: {vector name: has it}}`` of collection ``name``'s points."""
        s = self.settings(name)
        cfg, sp = exposed(s)
        out: dict[int, dict[str, bool]] = {sid: {} for sid in sids}
        for vname in cfg:
            served = self.vindex(name, vname)[0]
            pays = stored_payloads(served, sids)
            for sid, p in zip(sids, pays):
                out[sid][vname] = p is not None and not p.get(NO_VECTOR)
        got = self.sparse.read(name, sids, list(sp)) if sp else {}
        for vname in sp:
            for sid in sids:
                out[sid][vname] = sid in got[vname]
        return out
