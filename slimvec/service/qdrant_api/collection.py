"""A Qdrant collection's options as slimvec reads, records and reports them (issue 38).

``PUT /collections/NAME`` takes every option Qdrant's ``CreateCollection`` does: the distance and
size pick the index's metric (Cosine -> cosine, Dot -> ip, Euclid -> l2; Manhattan has no index
here and is refused), and the rest (``on_disk``, ``hnsw_config``, ``optimizers_config``,
``quantization_config``, ``wal_config``, shards, replicas...) are accepted and recorded as sent:
the index is built by the server's recipe, not by them. ``GET /collections/NAME`` describes the
store that recipe really built (graph degree, build beam, codes, re-ranking), and a warning names
the requested options that changed nothing. Query ``params`` map onto the recipe's search beam and
re-ranking depth (:func:`search_params`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from slimvec.service.qdrant_api.models import QdrantError, check_fields, unsupported

__all__ = ["CREATE_FIELDS", "METRICS", "NAMED_FORM", "optimizers", "parse_vectors", "kept_recipe", "recorded", "store_config",
           "search_params", "qdrant_score", "update_collection", "conditional", "create_vector_name",
           "delete_vector_name"]

#: the create fields accepted (``vectors`` and ``metadata`` are read, the rest recorded)
CREATE_FIELDS = ("vectors", "metadata", "shard_number", "sharding_method", "replication_factor",
                 "write_consistency_factor", "on_disk_payload", "hnsw_config", "wal_config",
                 "optimizers_config", "quantization_config", "strict_mode_config",
                 "sparse_vectors", "timeout")
_VECTOR_FIELDS = ("size", "distance", "on_disk", "hnsw_config", "quantization_config", "datatype")
#: Qdrant's distance -> slimvec's metric (scores: cosine and dot as they are, Euclid a distance)
METRICS = {"Cosine": "cosine", "Dot": "ip", "Euclid": "l2"}


def parse_vectors(vectors: Any) -> tuple[int, str, dict[str, Any]]:
    """``(size, distance, options)`` of the create request's one unnamed vector."""
    if isinstance(vectors, dict) and list(vectors) == [""]:
        vectors = vectors[""]
    if not isinstance(vectors, dict) or "size" not in vectors:
        raise unsupported("named vectors (or a collection without a vector size)",
                          "create one unnamed vector: {\"vectors\": {\"size\": N, \"distance\": "
                          "\"Cosine\"}}")
    check_fields(vectors, _VECTOR_FIELDS, "vectors")
    size, distance = vectors.get("size"), vectors.get("distance")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise QdrantError(400, f"Bad request: vectors.size must be a positive integer, got {size!r}.")
    if distance == "Manhattan":
        raise unsupported("distance 'Manhattan' (no L1 index is built here)",
                          "create the collection with Cosine, Dot or Euclid")
    if distance not in METRICS:
        raise QdrantError(400, f"Bad request: vectors.distance must be one of Cosine, Dot, Euclid, "
                               f"Manhattan; got {distance!r}.")
    if vectors.get("datatype") not in (None, "float32", "float16"):
        raise unsupported(f"vectors.datatype {vectors['datatype']!r} (the kept full vectors are "
                          "float32 or float16; the recipe picks the index's codes)",
                          "send float32 (the default) or float16")
    opts = {k: v for k, v in vectors.items() if k not in ("size", "distance") and v is not None}
    return size, distance, opts


def kept_recipe(recipe: str | None, default: str | None, datatype: str | None) -> str | None:
    """The recipe of one vector of a new collection, its kept full vectors as Qdrant's
    ``datatype`` says.

    Qdrant stores float32 vectors unless ``datatype`` is float16, and scores from them; so a
    collection that names no ``metadata.slimvec_recipe`` gets the server's recipe re-ranking from
    float32 kept vectors (float16 when asked): scores as Qdrant's, where ``keep_full=float16``
    is off by about 5e-4. The index's compressed codes (what sits in RAM) are the recipe's
    either way; the kept vectors are on disk. A named recipe keeps its own ``keep_full``; a
    ``datatype`` that disagrees with it is refused.
    """
    from slimvec.errors import ConfigError
    from slimvec.recipe import merge_recipe, parse_recipe

    base = recipe or default
    if base is None or (recipe is not None and datatype is None):
        return recipe
    rec = parse_recipe(base)
    if rec.rescore is None:  # nothing re-ranked: no full vectors to keep
        return recipe
    if recipe is None:
        rec = replace(rec, keep_full=datatype or "float32")
    try:
        return str(merge_recipe(rec, keep_full=datatype, option="metadata.slimvec_recipe"))
    except ConfigError as exc:
        raise QdrantError(400, f"Bad request: vectors.datatype {datatype!r} disagrees with "
                               f"metadata.slimvec_recipe: {exc}") from None


def recorded(body: dict[str, Any], vector_opts: dict[str, Any]) -> dict[str, Any]:
    """The options of a create request that slimvec records but does not build by."""
    if body.get("sharding_method") not in (None, "auto"):
        raise unsupported("create collection field(s) 'sharding_method' other than auto (shard "
                          "keys)", "leave sharding_method out")
    from pydantic import ValidationError
    from qdrant_client.http import models as m

    try:  # the options are shown back through these models: check them as Qdrant would
        m.CreateCollection.model_validate(body)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
        raise QdrantError(400, f"Bad request: Format error in JSON body: {where}.") from None
    out = {k: v for k, v in body.items()
           if k not in ("vectors", "metadata", "sparse_vectors", "timeout") and v is not None}
    if vector_opts:
        out["vectors"] = vector_opts
    vectors = body.get("vectors")
    if isinstance(vectors, dict) and list(vectors) == [""]:  # the unnamed vector, named form
        out[NAMED_FORM] = True
    return out


#: the option recording that the one unnamed vector was sent as ``{"": VectorParams}`` (LangChain
#: does): shown back in that form, as Qdrant does
NAMED_FORM = "vectors_named"


def optimizers(opts: dict[str, Any]) -> Any:
    """``optimizer_config`` of a collection's info: the ``optimizers_config`` sent at creation
    (and patched since) over the two fields Qdrant always answers; recorded, not built by."""
    from qdrant_client.http import models as m

    sent = {k: v for k, v in (opts.get("optimizers_config") or {}).items() if v is not None}
    if not isinstance(sent.get("max_optimization_threads", 0), int):  # "auto": no number
        sent.pop("max_optimization_threads")
    return m.OptimizersConfig(**{"default_segment_number": 1, "flush_interval_sec": 5, **sent})


def store_config(store: str, rescore: Any, keep_full: str | None) -> tuple[dict[str, Any],
                                                                         dict[str, Any] | None, str]:
    """``(hnsw_config, quantization_config, description)`` of the store a recipe built: the graph
    degree and build beam it has, Qdrant's quantization where one means the same codes, and in
    words what Qdrant's fields cannot say (4-bit codes, product quantization, re-ranking)."""
    import re

    from slimvec.connectors import parse_store_spec, store_class

    spec = parse_store_spec(store)
    o = {**store_class(store).option_defaults, **spec.options}
    # a FAISS factory string, for a store that declares one
    factory = str(spec.arg or o["factory"]) if "factory" in o else ""
    graph = re.search(r"HNSW(\d+)", factory)
    # without a FAISS factory: the store's own graph options, else Qdrant's defaults (16, 100)
    m = int(graph.group(1)) if graph else 0 if factory else int(o.get("m", o.get("M", 16)))
    efc = int(o.get("ef_construct") or o.get("ef_construction") or o.get("efc")
              or (40 if factory else 100))
    sq, pq = re.search(r"SQ(\d+)", factory), re.search(r"PQ(\d+)", factory)
    codes = (f"{sq.group(1)}-bit scalar codes (FAISS SQ{sq.group(1)})" if sq
             else f"product-quantized codes (FAISS {factory})" if pq
             else f"{o['quant']} codes" if o.get("quant", "none") != "none"
             else f"FAISS {factory}" if factory and not graph else "float32 vectors")
    quant = ({"scalar": {"type": "int8", "always_ram": True}} if "8-bit" in codes or "sq8" in codes
             else None)
    depth = {None: "no re-ranking", "auto": "re-ranked from the kept full vectors at a "
             "calibrated depth"}.get(rescore, f"re-ranked from the kept full vectors at x{rescore}")
    what = (f"slimvec store {store}: HNSW m={m}, ef_construct={efc}, {codes}, {depth}"
            f"{f' ({keep_full})' if keep_full and rescore is not None else ''}.")
    return {"m": m, "ef_construct": efc, "full_scan_threshold": 10000}, quant, what


def search_params(params: Any, store: str | None, k: int, count: int
                  ) -> tuple[int | None, dict[str, Any]]:
    """``(rescore, store params)`` of a query's ``params``.

    ``hnsw_ef`` is the store's search beam (``ef``); ``exact`` re-ranks every point by its full
    vector (depth ``ceil(count / k)``, beam ``count``); ``quantization.rescore=false`` skips
    re-ranking, ``oversampling`` is the re-ranking depth; ``indexed_only`` and ``ignore`` change
    nothing here (every point is indexed; the codes are always used for the first stage).
    """
    if not params:
        return None, {}
    if not isinstance(params, dict):
        raise QdrantError(400, f"Bad request: params must be an object, got {str(params)[:60]!r}.")
    check_fields(params, ("hnsw_ef", "exact", "quantization", "indexed_only"), "query params")
    from slimvec.connectors import store_class

    has_ef = store is not None and "ef" in store_class(store).option_defaults
    out: dict[str, Any] = {}
    rescore: int | None = None
    ef = params.get("hnsw_ef")
    if ef is not None:
        if isinstance(ef, bool) or not isinstance(ef, int) or ef < 1:
            raise QdrantError(400, f"Bad request: params.hnsw_ef must be a positive integer, got {ef!r}.")
        out["ef"] = min(max(ef, k), 100_000)
    q = params.get("quantization") or {}
    if not isinstance(q, dict):
        raise QdrantError(400, "Bad request: params.quantization must be an object.")
    check_fields(q, ("ignore", "rescore", "oversampling"), "query params.quantization")
    if q.get("oversampling") is not None:
        over = q["oversampling"]
        if isinstance(over, bool) or not isinstance(over, (int, float)) or over < 1:
            raise QdrantError(400, f"Bad request: oversampling must be a number >= 1, got {over!r}.")
        rescore = math.ceil(over)
    if q.get("rescore") is False:
        rescore = 0
    if params.get("exact"):
        rescore = max(1, math.ceil(count / max(k, 1)))
        out["ef"] = min(max(count, k, out.get("ef", 0)), 100_000)
    return rescore, (out if has_ef else {})


def qdrant_score(distance: str, score: float) -> float:
    """A slimvec score (higher is closer; L2 as the negated squared distance) as Qdrant returns
    it: Cosine and Dot as they are, Euclid the distance itself (lower is closer)."""
    if distance == "Euclid":
        return math.sqrt(max(-score, 0.0))
    return score


_UPDATE_FIELDS = ("vectors", "optimizers_config", "params", "hnsw_config", "quantization_config",
                  "strict_mode_config", "metadata", "sparse_vectors")


def update_collection(cols: Any, name: str, body: dict[str, Any]) -> bool:
    """``PATCH /collections/NAME``: ``metadata`` is merged (``null`` values delete keys) as Qdrant
    does; the other options are recorded beside the creation's and shown back, but do not
    rebuild the index (a new ``quantization_config`` does not re-quantize: rebuild with
    ``POST /indexes/NAME/rebuild`` and a recipe)."""
    check_fields(body, _UPDATE_FIELDS, "update collection")
    cols.served(name)
    s = cols.settings(name)
    meta = body.get("metadata")
    if meta is not None:
        if not isinstance(meta, dict):
            raise QdrantError(400, "Bad request: metadata must be an object.")
        merged = {**(s.get("metadata") or {}), **meta}
        s["metadata"] = {k: v for k, v in merged.items() if v is not None}
    opts = s.setdefault("options", {})
    for key in _UPDATE_FIELDS[:-2]:
        if isinstance(body.get(key), dict) and body[key]:
            opts[key] = {**(opts.get(key) or {}), **body[key]}
    cols._save(name, s)
    return True


def create_vector_name(cols: Any, name: str, vname: str, body: dict[str, Any]) -> dict[str, Any]:
    """``PUT /collections/NAME/vectors/VNAME``: a sparse vector (``{"sparse": {"modifier"}}``)
    or a multivector (``{"dense": {"size", "distance", "multivector_config"}}``) added to an
    existing collection, in its side shard (created when it has none); the points keep their
    other vectors and lack the new one until written with it. A plain dense vector is refused:
    its index would be a new build beside the collection's."""
    from pydantic import ValidationError
    from qdrant_client.http import models as m

    cols.served(name)
    try:
        cfg = m.DenseVectorNameConfig.model_validate(body) if "dense" in body else m.SparseVectorNameConfig.model_validate(body)
    except ValidationError as exc:
        raise QdrantError(400, f"Bad request: vector {vname!r}: send {{\"dense\": {{...}}}} or "
                               f"{{\"sparse\": {{...}}}} ({exc.errors()[0]['msg']}).") from None
    with cols.journal.locked(name):
        cols.journal.drain(name)
        s = cols.settings(name)
        taken = {"", *(v["name"] for v in s.get("vectors") or ()), *(s.get("sparse_vectors") or {}),
                 *(s.get("multi_vectors") or {})}
        if vname in taken:
            raise QdrantError(400, f"Wrong input: Vector name {vname!r} is empty or already exists.")
        if isinstance(cfg, m.DenseVectorNameConfig):
            d = cfg.dense
            if d.multivector_config is None or d.multivector_config.comparator != m.MultiVectorComparator.MAX_SIM:
                raise unsupported(f"adding the dense vector {vname!r} to an existing collection",
                                  "add a sparse vector or a max_sim multivector, or create the collection "
                                  "with this vector")
            key, params = "multi_vectors", {"size": d.size, "distance": d.distance.value}
        else:
            key, params = "sparse_vectors", cfg.sparse.model_dump(mode="json", exclude_none=True, exclude={"datatype"})
        cols.sparse.add_vector(name, vname, params)
        s[key] = {**(s.get(key) or {}), vname: params}
        cols._save(name, s)
    return {"operation_id": 0, "status": "completed"}


def delete_vector_name(cols: Any, name: str, vname: str) -> dict[str, Any]:
    """``DELETE /collections/NAME/vectors/VNAME``: a sparse vector or multivector removed from
    every point and the collection; a dense vector of the collection's indexes is refused."""
    cols.served(name)
    with cols.journal.locked(name):
        cols.journal.drain(name)
        s = cols.settings(name)
        key = next((k for k in ("sparse_vectors", "multi_vectors") if vname in (s.get(k) or {})), None)
        if key is None:
            raise QdrantError(400, f"Wrong input: Collection `{name}` has no sparse or multivector "
                                   f"named {vname!r} (a dense vector stays for the collection's life).")
        cols.sparse.drop_vector(name, vname)
        s[key] = {k: v for k, v in s[key].items() if k != vname}
        cols._save(name, s)
    return {"operation_id": 0, "status": "completed"}


def conditional(items: list[dict[str, Any]], existing: list[dict[str, Any] | None], mode: Any,
                flt: Any) -> list[dict[str, Any]]:
    """The points of a conditional upsert that are written: ``update_mode`` ``insert_only``
    writes only new ids, ``update_only`` only existing ones; ``update_filter`` replaces an
    existing point only when its stored payload matches (new ids are inserted)."""
    if mode not in (None, "upsert", "insert_only", "update_only"):
        raise QdrantError(400, f"Bad request: update_mode must be upsert, insert_only or "
                               f"update_only, got {mode!r}.")
    out = []
    for item, old in zip(items, existing):
        if old is None:
            keep = mode != "update_only"
        else:
            keep = mode != "insert_only" and (flt is None or flt.matches(item["id"], old["payload"]))
        if keep:
            out.append(item)
    return out
