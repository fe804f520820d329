"""Qdrant operations as calls on the service's served indexes (a thin translation).

A Qdrant collection is a vector-only slimvec index served by the same :class:`Registry`: created
with the server's ``--recipe`` (or ``metadata.slimvec_recipe``), written through the index's one
writer (``ServedIndex.add_vectors``), searchable while it collects its fit sample (the pending
state's exact search), searched with the index's own rescoring. What Qdrant knows and slimvec does
not (the distance, the declared payload schema, the collection metadata) is kept beside the
indexes in ``ROOT/.qdrant/NAME.json``.
"""

from __future__ import annotations

import math
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.ids import doc_ids
from slimvec.service.indexes import points
from slimvec.service.indexes.points import get as points_get
from slimvec.service.limits import MAX_IDS, check_size
from slimvec.service.qdrant_api.aliases import Aliases
from slimvec.service.qdrant_api.collection import NAMED_FORM, conditional, optimizers, qdrant_score, search_params, store_config
from slimvec.service.qdrant_api.collection_snapshot import NESTED, snapshot_parts, unpack
from slimvec.service.qdrant_api.examples import example_query, is_example_query, prefetch_query
from slimvec.service.qdrant_api.journal import Journal
from slimvec.service.qdrant_api.kinds import scroll_page, special_query
from slimvec.service.qdrant_api.models import (
    SOURCE_ID,
    QdrantError,
    check_fields,
    count_arg,
    default_vector,
    dim_of,
    point_id,
    qdrant_id,
    qfilter,
    query_vector,
    unsupported,
)
from slimvec.service.qdrant_api.named import (
    SEP,
    NamedVectors,
    check_point,
    exposed,
    fill_limit,
    index_name,
    parse_vectors_config,
    stored_payloads,
    vector_configs,
    without_holes,
)
from slimvec.service.qdrant_api.sparse import SparseShards, parse_sparse_config, split_multi
from slimvec.service.qdrant_api.writes import CollectionWrites

__all__ = ["Collections", "QDRANT_DIR"]

#: per-collection Qdrant settings, under the served root (dot folders are never indexes)
QDRANT_DIR = ".qdrant"
#: float32 vectors below Qdrant's default ``optimizers_config.indexing_threshold`` (10,000 KB):
#: Qdrant searches such a segment exactly (it builds no HNSW graph), so a fitted collection this
#: small is searched exactly over its kept full vectors (a filtered search already is, by the
#: planner's exact scan)
UNINDEXED_BYTES = 10_000 * 1024


class Collections(CollectionWrites, NamedVectors):
    """The Qdrant view of a service's registry (named vectors: :mod:`.named`; writes, one
    journaled commit over all of a point's stores: :mod:`.writes`).

    Parameters
    ----------
    state : object
        The app's shared state (``registry``, ``config``, ``slots``); the collections become
        its ``collections`` and their journal recovery one of its ``on_start`` steps.
    """

    def __init__(self, state: Any) -> None:
        self.st = state
        self.root: Path = Path(state.config.root)
        self.sparse = SparseShards(self.root / QDRANT_DIR)
        self.journal = Journal(self.root / QDRANT_DIR)
        self.aliases = Aliases(self.root / QDRANT_DIR)  # resolved by routes.QdrantRoute
        state.collections = self  # a native delete, snapshot or restore takes a collection whole
        state.on_start.append(self.recover)  # before the first request: a crash's records

    NESTED = NESTED

    def snapshot_parts(self, name: str) -> Any:
        """:func:`.collection_snapshot.snapshot_parts` of collection ``name``."""
        return snapshot_parts(self, name)

    def unpack(self, name: str, target: Path) -> None:
        """:func:`.collection_snapshot.unpack` into collection ``name``."""
        unpack(self, name, target)

    def recover(self) -> None:
        """Apply again the journal records a crash left, in every collection (at start-up,
        before any request is answered)."""
        for name in self.journal.names():
            if name in self.st.registry.names():
                with self.journal.locked(name):
                    self.journal.replay(name, partial(self.apply, name))

    # ------------------------------------------------------------------ settings
    def _settings_path(self, name: str) -> Path:
        from slimvec.service.indexes.names import check_name

        return self.root / QDRANT_DIR / f"{check_name(name)}.json"

    def has_settings(self, name: str) -> bool:
        """Whether index ``name`` is a collection made through the Qdrant API."""
        return self._settings_path(name).is_file()

    def settings(self, name: str) -> dict[str, Any]:
        """The Qdrant settings of collection ``name`` (a native index: Cosine, its dimension)."""
        import json

        path = self._settings_path(name)
        if path.exists():
            return json.loads(path.read_text("utf-8"))
        served = self.served(name)
        return {"size": dim_of(served), "distance": "Cosine", "metadata": None, "payload_schema": {}}

    def _save(self, name: str, settings: dict[str, Any]) -> None:
        from slimvec.persistence import write_json_atomic

        path = self._settings_path(name)
        path.parent.mkdir(exist_ok=True)
        write_json_atomic(path, settings)

    def served(self, name: str) -> Any:
        """The served index of collection ``name`` (404 in Qdrant's words when absent)."""
        from slimvec.service.indexes.registry import NotFound

        try:
            if SEP in name:  # the index of a named vector, not a collection
                raise NotFound(name)
            return self.st.registry.get(name)
        except NotFound:
            raise QdrantError(404, f"Not found: Collection `{name}` doesn't exist!") from None

    # ------------------------------------------------------------------ collections
    def create(self, name: str, body: dict[str, Any]) -> bool:
        """``PUT /collections/NAME``: a pending index per vector by the server's recipe (or
        ``metadata.slimvec_recipe``; ``datatype``: :func:`kept_recipe`; ``slimvec_fit_after``)."""
        from slimvec.errors import ConfigError
        from slimvec.reducers import make_reducer
        from slimvec.service.indexes.names import MAX_NAME, check_name
        from slimvec.service.indexes.spec import SERVICE_SPEC, ServiceSpec
        from slimvec.service.qdrant_api.collection import CREATE_FIELDS, METRICS, kept_recipe, recorded

        check_fields(body, CREATE_FIELDS, "create collection")
        dense, multi = split_multi(body.get("vectors"))
        vectors = {"": (1, "Dot", {})} if (no_dense := not dense) else parse_vectors_config(dense)
        sparse = parse_sparse_config(body.get("sparse_vectors"), {**vectors, **multi})
        options = recorded(body, vectors[""][2] if "" in vectors else
                           {v: o for v, (_s, _d, o) in vectors.items() if o})
        meta = body.get("metadata") or {}
        if name in self.st.registry.names():
            raise QdrantError(409, f"Wrong input: Collection `{name}` already exists!")
        self.aliases.refuse_collection_name(name)
        if SEP in name:
            raise QdrantError(400, f"Bad request: collection name {name!r}: '{SEP}' joins a "
                                   "collection's name and a vector name here; choose another.")
        fit_after = meta.get("slimvec_fit_after", 1000)
        if isinstance(fit_after, bool) or not isinstance(fit_after, int) or fit_after < 1:
            raise QdrantError(400, "Bad request: metadata.slimvec_fit_after must be a positive "
                                   f"integer (points before the reducer is fitted), got {fit_after!r}.")
        specs = {vname: ServiceSpec.from_request(
            recipe=kept_recipe(meta.get("slimvec_recipe"), self.st.config.recipe, o.get("datatype")),
            reducer=None, store=None, keep_full=None, encoder=None, fit_after=fit_after,
            default_recipe=self.st.config.recipe, metric=METRICS[distance])
            for vname, (_z, distance, o) in vectors.items()}
        for vname, (size, _d, _o) in vectors.items():
            spec = specs[vname]
            n_out = getattr(make_reducer(spec.reducer), "n_components", None)
            if isinstance(n_out, int) and n_out > size:
                raise QdrantError(400, f"Bad request: recipe {spec.recipe or spec.reducer} keeps "
                                       f"{n_out} dimensions, more than the {size} of vector "
                                       f"{vname!r}; name a smaller one in metadata.slimvec_recipe "
                                       "(e.g. pca:8).")
            try:
                check_name(index_name(name, vectors, vname))
            except ConfigError:
                raise QdrantError(400, f"Bad request: vector name {vname!r}: use letters, digits, "
                                       f"'.', '_' or '-' (at most {MAX_NAME - 1 - len(name)} here)."
                                  ) from None
        for vname, (size, _d, _o) in reversed(vectors.items()):  # the home last
            iname = index_name(name, vectors, vname)
            if iname != name and iname in self.st.registry.names():  # left by a failed creation
                self.st.registry.delete(iname)
            served, _new = self.st.registry.create(iname, specs[vname])
            with served.lock:  # the vector's size is the index's input dimension
                served.spec = served.spec.with_dim_in(size)
                served.spec.save(served.pending_dir / SERVICE_SPEC)
        (size, distance, _o), named = next(iter(vectors.values())), list(vectors) != [""]
        self.sparse.drop(name)  # one left by a collection of this name deleted in a crash
        self.journal.forget(name)
        if sparse or multi:
            self.sparse.create(name, {**sparse, **multi})
        self._save(name, {"size": size, "distance": distance, "metadata": body.get("metadata"),
                          "payload_schema": {}, "created_at": time.time(), "options": options,
                          "sparse_vectors": sparse, "multi_vectors": multi, "no_dense": no_dense,
                          **({"vectors": [{"name": v, "size": z, "distance": d}
                                          for v, (z, d, _o) in vectors.items()]} if named else {})})
        return True

    def delete(self, name: str) -> bool:
        """``DELETE /collections/NAME`` (Qdrant answers ``false`` for an unknown one)."""
        if SEP in name or name not in self.st.registry.names():
            return False
        self.journal.forget(name)
        self.sparse.drop(name)
        cfg = vector_configs(self.settings(name))
        names = self.st.registry.names()
        for vname in list(cfg)[1:] + [next(iter(cfg))]:  # the home last; a crash mid-way: again
            if (iname := index_name(name, cfg, vname)) in names:
                self.st.registry.delete(iname)
        self._settings_path(name).unlink(missing_ok=True)
        self.aliases.drop(name)
        return True

    def info(self, name: str) -> dict[str, Any]:
        """``GET /collections/NAME`` as qdrant-client's ``CollectionInfo``."""
        from qdrant_client.http import models as m

        served = self.served(name)
        s = self.settings(name)
        count = self.count_all(served)
        schema = {str(k): m.PayloadIndexInfo(data_type=v, points=count)
                  for k, v in s.get("payload_schema", {}).items()}
        store, rescore, keep_full = self._built_by(served)
        hnsw, quant, what = store_config(store, rescore, keep_full)
        opts, cfg = s.get("options") or {}, exposed(s)[0]
        vopts = {"": opts.get("vectors", {})} if list(cfg) == [""] else opts.get("vectors", {})
        vparams = {v: m.VectorParams(**{"size": c["size"], "distance": c["distance"],
                                        **vopts.get(v, {}), "hnsw_config": None,
                                        "quantization_config": None}) for v, c in cfg.items()}
        vparams.update({v: m.VectorParams(size=c["size"], distance=c["distance"],
                                          multivector_config=m.MultiVectorConfig(
                                              comparator=m.MultiVectorComparator.MAX_SIM))
                        for v, c in (s.get("multi_vectors") or {}).items()})
        params = {k: opts[k] for k in ("shard_number", "replication_factor", "on_disk_payload",
                                       "write_consistency_factor", "sharding_method") if k in opts}
        config = m.CollectionConfig(
            params=m.CollectionParams(vectors=vparams if opts.get(NAMED_FORM) else vparams.get("", vparams), **params, sparse_vectors={
                v: m.SparseVectorParams(**p) for v, p in (s.get("sparse_vectors") or {}).items()} or None),
            hnsw_config=m.HnswConfig(**hnsw),
            quantization_config=None if quant is None else m.ScalarQuantization(**quant),
            optimizer_config=optimizers(opts),
            wal_config=opts.get("wal_config") and m.WalConfig(**{"wal_capacity_mb": 32,
                                                                 "wal_segments_ahead": 0,
                                                                 **opts["wal_config"]}),
            metadata=s.get("metadata"))
        ignored = sorted(k for k in opts if k not in ("vectors", NAMED_FORM)) + sorted(opts.get("vectors", {}))
        warnings = [m.CollectionWarning(message=what)] + ([m.CollectionWarning(
            message=f"accepted and recorded, not built by (the recipe decides): {', '.join(ignored)}"
        )] if ignored else [])
        info = m.CollectionInfo(status=m.CollectionStatus.GREEN, optimizer_status=m.OptimizersStatusOneOf.OK,
                                segments_count=1, warnings=warnings,
                                points_count=count, indexed_vectors_count=count, config=config,
                                payload_schema=schema)
        return {**info.model_dump(mode="json", exclude_none=True),
                "slimvec": {"store": store, "rescore": rescore, "keep_full": keep_full,
                            "state": served.state, "requested": opts}}

    def _built_by(self, served: Any) -> tuple[str, Any, str | None]:
        """``(store spec, rescore depth, full-vector dtype)`` of the collection's index: the
        fitted index's manifest, or the spec a pending one will be built by."""
        index = served.index if served.state == "ready" else None
        if index is not None:
            m = index.manifest
            return (m.store, None if m.rescore is None else m.rescore.depth,
                    None if m.full is None else m.full.dtype)
        from slimvec.recipe import parse_recipe

        spec = served.spec
        rec = parse_recipe(spec.recipe) if spec.recipe else None
        return spec.store, None if rec is None else rec.rescore, spec.keep_full

    def count_all(self, served: Any) -> int:
        """Points in the collection (exact)."""
        return points.count(served)

    def count(self, name: str, body: dict[str, Any]) -> dict[str, int]:
        """``POST /collections/NAME/points/count`` (always exact)."""
        check_fields(body, ("filter", "exact"), "count")
        served = self.served(name)
        return {"count": points.count(served, qfilter(body.get("filter"), self.scan(name)))}

    # ------------------------------------------------------------------ points
    def upsert(self, name: str, body: dict[str, Any], wait: bool) -> dict[str, Any]:
        """``PUT /collections/NAME/points``: the list form ``{"points": [...]}`` or the batch form
        ``{"batch": {"ids", "vectors", "payloads"}}``; every point is checked first, so a bad one
        refuses the request (as Qdrant does) and nothing of it is written."""
        served = self.served(name)
        check_fields(body, ("points", "batch", "update_filter", "update_mode"), "upsert")
        if body.get("points") is not None:
            rows = body["points"]
            if not isinstance(rows, list):
                raise QdrantError(400, "Bad request: 'points' must be a list of points.")
            for i, p in enumerate(rows):
                if not isinstance(p, dict):
                    raise QdrantError(400, f"Bad request: points[{i}] is not an object.")
                check_fields(p, ("id", "vector", "payload"), f"points[{i}]")
            points = [(p.get("id"), p.get("vector"), p.get("payload")) for p in rows]
        elif isinstance(body.get("batch"), dict):
            b = body["batch"]
            check_fields(b, ("ids", "vectors", "payloads"), "batch")
            ids, vecs = b.get("ids") or [], default_vector(b.get("vectors"))
            pays = b.get("payloads") or [None] * len(ids)
            if isinstance(vecs, dict):  # named: {name: [vector per id]}
                if not all(isinstance(v, list) and len(v) == len(ids) for v in vecs.values()):
                    raise QdrantError(400, "Bad request: batch.vectors: each name must hold one "
                                           "vector per id.")
                vecs = [{k: v[i] for k, v in vecs.items()} for i in range(len(ids))]
            if not isinstance(vecs, list) or len(vecs) != len(ids) or len(pays) != len(ids):
                raise QdrantError(400, "Bad request: batch: send as many vectors and payloads "
                                       "as ids.")
            points = list(zip(ids, vecs, pays))
        else:
            raise QdrantError(400, "Bad request: send {\"points\": [...]} or {\"batch\": {...}}.")
        st = self.settings(name)
        cfg, side = exposed(st)
        rows = [check_point(cfg, *p, side) for p in points]
        if body.get("update_filter") is not None or body.get("update_mode") not in (None, "upsert"):
            kept = conditional([{"id": r[0], "row": r} for r in rows],
                               points_get(served, [r[0] for r in rows]),
                               body.get("update_mode"), qfilter(body.get("update_filter"), self.scan(name)))
            rows = [it["row"] for it in kept]
            if not rows:
                return _done()
        from slimvec.service.limits import check_batch

        check_batch(len(rows), self.st.config.max_batch, "points")
        return self.write_points(name, rows, wait)

    def retrieve(self, name: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """``POST /collections/NAME/points``: the points of ``ids`` (unknown ids are left out)."""
        check_fields(body, ("ids", "with_payload", "with_vector"), "retrieve")
        served = self.served(name)
        check_size(len(body.get("ids") or []), MAX_IDS, "The number of ids", "split the request.")
        wanted = list(dict.fromkeys(point_id(x) for x in body.get("ids") or []))
        sids = doc_ids(wanted).tolist() if wanted else []
        return self._records(served, sids, body.get("with_payload", True),
                             body.get("with_vector", False))

    # ------------------------------------------------------------------ query
    def query(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /collections/NAME/points/query`` with a vector (``query`` or ``{"nearest"}``),
        ``using`` (a vector name; ``""`` the unnamed vector, as LangChain sends it), ``limit``,
        ``offset``, ``with_payload``, ``with_vector``, ``score_threshold``; without a ``query``,
        the first points in scroll order (score 1, as Qdrant)."""
        check_fields(body, ("query", "filter", "limit", "offset", "with_payload", "with_vector", "score_threshold",
                            "params", "using", "lookup_from", "prefetch"), "query")
        served, limit, offset = self.served(name), count_arg(body, "limit", 10), count_arg(body, "offset", 0)
        if body.get("prefetch"):  # fused or re-scored candidates (examples.py)
            return prefetch_query(self, name, body, limit, offset)
        if (special := special_query(self, name, body, limit, offset)) is not None:  # kinds.py
            return special
        if body.get("query") is None and limit + offset > 0:  # Qdrant: the first points, score 1
            recs, _ = points.scroll(served, limit + offset, None,
                                    qfilter(body.get("filter"), self.scan(name)))
            sids = [r["store_id"] for r in recs][offset:]
            return {"points": self._records(served, sids, body.get("with_payload", False),
                                            body.get("with_vector", False), [1.0] * len(sids))}
        if (body.get("using") or "") in exposed(self.settings(name))[1]:
            pairs = self.sparse_query(name, body, limit, offset)
            return {"points": self._records(served, [i for i, _ in pairs], body.get("with_payload", False),
                                            body.get("with_vector", False), [x for _, x in pairs])}
        if is_example_query(body.get("query")):  # by point id, recommend, discover, context
            return example_query(self, name, body, limit, offset)
        check_fields(body, ("query", "filter", "limit", "offset", "with_payload", "with_vector",
                            "score_threshold", "params", "using"), "dense query")
        index, vspec = self.vindex(name, body.get("using") or "")
        flt = qfilter(body.get("filter"), self.scan(name))
        if index is served and self.settings(name).get("holes"):  # leave out the flagged rows
            flt = without_holes(flt)
        vec, k = query_vector(body.get("query")), limit + offset
        if k == 0:
            return {"points": []}
        distance = vspec["distance"]
        if index is served:
            sids, scores = self._search(index, vec, k, flt, body.get("params"), vspec["size"])
        else:  # a named vector's index: hits on points the home lacks are not counted
            got = fill_limit(served, lambda n: [
                (i, s) for i, s in zip(*self._search(index, vec, n, flt, body.get("params"),
                                                     vspec["size"])) if i >= 0], k)
            sids, scores = [i for i, _ in got], [s for _, s in got]
        pairs = [(i, qdrant_score(distance, s)) for i, s in zip(sids, scores) if i >= 0 and s is not None]
        if (threshold := body.get("score_threshold")) is not None:  # Euclid's: a distance, an upper bound
            pairs = [(i, s) for i, s in pairs
                     if (s <= threshold if distance == "Euclid" else s >= threshold)]
        pairs = pairs[offset:]
        return {"points": self._records(served, [i for i, _ in pairs], body.get("with_payload", False),
                                        body.get("with_vector", False), [s for _, s in pairs])}

    def _search(self, served: Any, vec: list[Any], k: int, flt: Any, params: Any, size: int
                ) -> tuple[list[int], list[float | None]]:
        if len(vec) != size:
            raise QdrantError(400, f"Wrong input: Vector dimension error: expected dim: {size}, "
                                   f"got {len(vec)}.")
        q = np.asarray([vec], dtype=np.float32)
        if not np.isfinite(q).all():
            raise QdrantError(400, "Bad request: the query vector holds NaN or inf.")
        rescore: int | None = None
        store_params: dict[str, Any] = {}
        ready = served.state == "ready" and served.index is not None
        if params and ready:
            m = served.index.manifest
            rescore, store_params = search_params(params, m.store, k, self.count_all(served))
            if m.full is None and rescore:
                rescore = None  # no full vectors kept: nothing to re-rank from
        elif params:
            search_params(params, None, k, 0)  # checked; a pending collection is searched exactly
        if (ready and not params and flt is None and served.index.manifest.full is not None
                and self.count_all(served) * size * 4 <= UNINDEXED_BYTES):
            ids, scores = points.search_exact(served, q, k)  # as Qdrant's unindexed segment
        elif store_params:  # a beam for the fitted index's store (a pending one has none)
            res = served.ready_index().search(q, k, rescore=rescore, filter=flt, **store_params)
            ids, scores = res.ids, res.scores
        else:
            ids, scores, _ = points.search(served, q, k, flt, rescore)
        return (ids[0].tolist(),
                [float(s) if math.isfinite(s) else None for s in np.asarray(scores[0]).tolist()])

    # ------------------------------------------------------------------ lifecycle
    def scroll(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /collections/NAME/points/scroll``: :func:`.kinds.scroll_page`."""
        return scroll_page(self, name, body)

    def _qid(self, served: Any, sid: int) -> Any:
        return qdrant_id((stored_payloads(served, [sid])[0] or {}).get(SOURCE_ID))

    def create_index(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``PUT /collections/NAME/index``: the field's schema is recorded and shown in the
        collection's ``payload_schema``; a fitted index whose store has payload indexes (Qdrant
        Edge) builds one, so its filtered search on the field runs natively (filters are exact
        without one: the planner selects the matching ids)."""
        check_fields(body, ("field_name", "field_schema"), "create field index")
        self.served(name)
        field, schema = body.get("field_name"), body.get("field_schema")
        if isinstance(schema, dict):
            schema = schema.get("type")
        if not isinstance(field, str) or schema not in (*_NATIVE, "text", "uuid", "geo"):
            raise unsupported(f"field index {field!r} of schema {str(schema)[:40]!r}",
                              f"index a field as one of {', '.join(_NATIVE)}, text, uuid, geo")
        for served in self.each_index(name) if schema in _NATIVE else ():  # others: recorded
            points.declare_payload_indexes(served, [f"{field}:{schema}"])
        s = self.settings(name)
        s.setdefault("payload_schema", {})[field] = schema
        self._save(name, s)
        return _done()

    def delete_index(self, name: str, field: str) -> dict[str, Any]:
        """``DELETE /collections/NAME/index/FIELD``."""
        self.served(name)
        s = self.settings(name)
        s.get("payload_schema", {}).pop(field, None)
        self._save(name, s)
        return _done()


#: payload index schemas built by the stores (the others are recorded: filters are exact without)
_NATIVE = ("keyword", "integer", "float", "bool", "datetime")


def _done() -> dict[str, Any]:
    return {"operation_id": 0, "status": "completed"}
