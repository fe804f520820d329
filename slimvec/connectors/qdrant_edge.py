"""Qdrant Edge (``qdrant-edge-py``): the real Qdrant engine in-process, the embedded default.

Spec: ``qdrant-edge[:PATH][,m=16,ef_construct=100,ef=64,quant=none,rescore=true,oversampling=2.0,memory=default,search_threads=1]``.
``memory`` places the searched vectors: ``default`` (the engine's choice), ``pinned`` (in RAM),
``cached`` (memory-mapped, in the page cache) or ``cold`` (on disk: with ``quant`` set, Qdrant's
RAM-saving layout of quantized codes in RAM and originals on disk for its rescoring).
``search_threads`` sizes the engine's search thread pool, fixed when the shard is created: 1 (the
default) runs each query's segment reads one after another on one pool thread; 0 takes the
engine's own default (a thread per CPU, each query's segments read in parallel). On 20,000 real
sentences, 320 candidates, two cores shared with other work, one thread answered with the same
ids in p50 1.3 ms against 7.8-12 ms for the engine's pool (a query fanned out over threads waits
for each to be scheduled; ``python -m benchmarks search-profile``, issue 28 item 4).
Bulk upserts go to the WAL; :meth:`QdrantEdgeStore.finalize` runs ``optimize()``, which builds
the HNSW graph (and quantized codes when ``quant`` is set).

With ``full_dim=D`` (set by ``--keep-full``, not the default) each point holds two named vectors:
``reduced`` (HNSW, quantized when ``quant`` is set) and ``full`` (original vectors in cold, on-disk
storage, no graph: HNSW ``m=0``). :meth:`QdrantEdgeStore.search_rescored` prefetches candidates on
``reduced`` and re-ranks them on ``full`` in one Qdrant query.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore, check_vectors
from slimvec.connectors.options import FLAG, MAX_DIM, check_options, number, parse_quantization, whole
from slimvec.connectors.storefiles import META_FILE, read_meta, write_meta
from slimvec.errors import ConfigError, MissingDependencyError, StoreError

__all__ = ["QdrantEdgeStore"]

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {"m": 16, "ef_construct": 100, "ef": 64, "quant": "none",
                            "rescore": True, "oversampling": 2.0, "exact": False, "full_dim": 0,
                            "memory": "default", "search_threads": 1}
MEMORY = ("default", "pinned", "cached", "cold")
#: ranges checked when the spec is parsed (the engine panics on ef_construct=0 and overflows on
#: a negative m; Qdrant's API takes ef_construct from 4 and vectors up to 65,536 dimensions)
RULES = {
    "m": whole(0, 512, "The HNSW graph degree: 0 builds no graph (exact scan), 16 is the default."),
    "ef_construct": whole(4, 4096, "Qdrant's build beam starts at 4 (default 100)."),
    "ef": whole(1, 100_000, "The search beam hnsw_ef (default 64)."),
    "rescore": FLAG,
    "oversampling": number(1, 1000, "Candidates fetched per result before rescoring; below 1 "
                                    "there would be fewer candidates than results (default 2)."),
    "exact": FLAG,
    "full_dim": whole(0, MAX_DIM, "Set by --keep-full to the full vectors' dimension; 0 keeps none."),
    "search_threads": whole(0, 1024, "Threads of the engine's search pool, set when the shard is "
                                     "created: 1 (default) for single-query latency, 0 for the "
                                     "engine's default (one per CPU)."),
}
REDUCED, FULL = "reduced", "full"
_UPSERT_BATCH = 512


def _edge():
    try:
        import qdrant_edge
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise MissingDependencyError("qdrant-edge-py is not installed: pip install qdrant-edge-py") from exc
    return qdrant_edge


def _quantization_config(q, quant: Any):
    family, level = parse_quantization(quant)
    if family == "none" or level is None:  # every other family has a level (parse_quantization)
        return None
    if family == "sq":
        return q.ScalarQuantizationConfig(type=q.ScalarType.Int8, quantile=0.99, always_ram=True)
    if family == "bq":
        enc = {"1": q.BinaryQuantizationEncoding.OneBit, "1.5": q.BinaryQuantizationEncoding.OneAndHalfBits,
               "2": q.BinaryQuantizationEncoding.TwoBits}[level]
        return q.BinaryQuantizationConfig(always_ram=True, encoding=enc)
    if family == "tq":
        bits = {"1": q.TurboQuantBitSize.Bits1, "1.5": q.TurboQuantBitSize.Bits1_5,
                "2": q.TurboQuantBitSize.Bits2, "4": q.TurboQuantBitSize.Bits4}[level]
        return q.TurboQuantQuantizationConfig(always_ram=True, bits=bits)
    ratio = getattr(q.CompressionRatio, f"X{level}")
    return q.ProductQuantizationConfig(compression=ratio, always_ram=True)


class QdrantEdgeStore(VectorStore):
    """Vectors and payloads in an embedded Qdrant Edge shard at ``location``.

    Parameters
    ----------
    location : str or path
        Shard folder.
    m, ef_construct : int
        HNSW graph degree and build beam.
    ef : int
        HNSW search beam (``hnsw_ef``).
    quant : str
        ``none``, ``sq8``, ``bq1``/``bq1.5``/``bq2``, ``tq1``/``tq1.5``/``tq2``/``tq4``, ``pq4``..``pq64``.
    rescore : bool
        With quantization, rescore candidates with the original vectors.
    oversampling : float
        Candidates fetched per result before rescoring.
    exact : bool
        Brute-force search (ground truth inside Qdrant).
    search_threads : int
        The engine's search thread pool, fixed at creation: 1 (default) for the lowest
        single-query latency, 0 for the engine's default of one thread per CPU.
    """

    name = "qdrant-edge"
    keeps_full_vectors = True
    option_defaults, option_rules = DEFAULTS, RULES
    reader = "slimvec.connectors.qdrant_readers:QdrantEdgeSource"
    resident_components = frozenset({"vectors", "quantized", "links", "id_tracker"})

    @classmethod
    def needs_reader_lock(cls, spec: Any) -> bool:
        """The engine holds its shard for itself: a reader waits for the writer (in place or at PATH)."""
        return True

    @classmethod
    def _component(cls, rel: str) -> str:
        if "/wal/" in f"/{rel}":
            return "wal"
        for key, comp in (("quantized", "quantized"), ("vector_storage", "vectors"),
                          ("vector_index", "links"), ("id_tracker", "id_tracker"),
                          ("payload", "payload")):
            if key in rel:
                return comp
        return "other"

    @classmethod
    def dim_problem(cls, arg: str | None, options: Mapping[str, Any], dim: int) -> str | None:
        """Qdrant holds vectors of 1 to 65,536 dimensions."""
        if not 1 <= int(dim) <= MAX_DIM:
            return f"Qdrant vectors must have 1 to {MAX_DIM} dimensions, got {dim}"
        return None

    def __init__(self, location: str, **options: Any) -> None:
        super().__init__(location, **check_options(self.name, options, DEFAULTS, RULES))
        parse_quantization(self.options["quant"])
        if str(self.options["memory"]).lower() not in MEMORY:
            raise ConfigError(f"qdrant-edge option memory={self.options['memory']!r} is not one of "
                              f"{', '.join(MEMORY)}.")
        self._shard = None

    # -------------------------------------------------------------- lifecycle
    def create(self, dim: int, metric: str = "cosine") -> QdrantEdgeStore:
        q = _edge()
        self.dim, self.metric = int(dim), self._check_metric(metric)
        folder = self._folder(self.location)
        if (folder / META_FILE).exists():
            raise StoreError(f"A store already exists at {folder}; open it instead or choose an empty folder.")
        folder.mkdir(parents=True, exist_ok=True)
        distance = {"cosine": q.Distance.Cosine, "ip": q.Distance.Dot, "l2": q.Distance.Euclid}[metric]
        o = self.options
        memory = str(o["memory"]).lower()
        placement = {} if memory == "default" else {"memory": getattr(q.Memory, memory.capitalize())}
        vectors = q.EdgeVectorParams(size=self.dim, distance=distance, **placement)
        if self.keeps_full:
            no_graph = q.HnswIndexConfig(m=0, ef_construct=int(o["ef_construct"]), full_scan_threshold=10)
            vectors = {REDUCED: vectors,
                       FULL: q.EdgeVectorParams(size=int(o["full_dim"]), distance=distance,
                                                memory=q.Memory.Cold, hnsw_config=no_graph)}
        config = q.EdgeConfig(
            vectors=vectors,
            hnsw_config=q.HnswIndexConfig(m=int(o["m"]), ef_construct=int(o["ef_construct"]),
                                          full_scan_threshold=10),
            quantization_config=_quantization_config(q, o["quant"]),
            optimizers=q.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1),
            max_search_threads=int(o["search_threads"]) or None,  # 0: the engine's CPU-derived pool
        )
        self._shard = q.EdgeShard.create(str(folder / "shard"), config)
        write_meta(folder, self.name, self.dim, self.metric, self.options)
        return self

    def open(self) -> QdrantEdgeStore:
        q = _edge()
        folder = self._folder(self.location)
        meta = read_meta(folder, self.name)
        self.dim, self.metric = int(meta["dim"]), meta["metric"]
        # search-time options (ef, rescore, oversampling, exact) may differ from creation time
        self.options = {**meta["options"], **{k: v for k, v in self.options.items() if v != DEFAULTS[k]}}
        try:
            self._shard = q.EdgeShard.load(str(folder / "shard"))
        except Exception as exc:  # the engine raises its own exception types
            raise StoreError(f"Could not open the Qdrant Edge shard at {folder / 'shard'}: {exc}") from exc
        return self

    @property
    def keeps_full(self) -> bool:
        """True when points also hold their full vectors (named vectors ``reduced`` / ``full``)."""
        return int(self.options.get("full_dim") or 0) > 0

    def _require(self):
        if self._shard is None:
            raise StoreError(f"Qdrant Edge store at {self.location} is not open: call create() or open().")
        return self._shard

    # ------------------------------------------------------------------ data
    def _upsert(self, ids_arr: np.ndarray, vecs: np.ndarray,
                payloads: list[dict[str, Any] | None] | None, full: np.ndarray | None) -> None:
        """Insert or overwrite points (``full``: when :attr:`keeps_full`, checked by
        :meth:`VectorStore.upsert`)."""
        q = _edge()
        shard = self._require()
        pl = payloads if payloads is not None else [None] * len(ids_arr)
        chunks = []  # every point is built (payloads converted) before the first update
        for start in range(0, len(ids_arr), _UPSERT_BATCH):
            end = start + _UPSERT_BATCH
            if full is None:
                named: list[Any] = [v.tolist() for v in vecs[start:end]]
            else:
                named = [{REDUCED: v.tolist(), FULL: f.tolist()}
                         for v, f in zip(vecs[start:end], full[start:end])]
            try:
                chunks.append([q.Point(int(i), v, p or {})
                               for i, v, p in zip(ids_arr[start:end], named, pl[start:end])])
            except Exception as exc:  # noqa: BLE001 - the engine's conversion error, any type
                raise StoreError(f"Qdrant Edge at {self.location} cannot hold a payload of this "
                                 f"batch ({type(exc).__name__}: {str(exc)[:200]}); nothing of it "
                                 "was written. Fix or drop that payload.") from exc
        for points in chunks:
            shard.update(q.UpdateOperation.upsert_points(points))

    def _search_params(self, q, params: dict[str, Any], filtered: bool = False):
        o = {**self.options, **params}
        quant = None
        if parse_quantization(o["quant"])[0] != "none":
            quant = q.QuantizationSearchParams(rescore=bool(o["rescore"]),
                                               oversampling=float(o["oversampling"]))
        # a filtered HNSW search only walks matching points: on clustered text vectors the graph
        # of a 10 % filter falls apart (1 result of 10 on MiniLM); ACORN also explores the
        # neighbours' neighbours (tests/connectors/test_store_lifecycle.py)
        acorn = q.AcornSearchParams(enable=True) if filtered else None
        return q.SearchParams(hnsw_ef=int(o["ef"]), exact=bool(o["exact"]), quantization=quant,
                              acorn=acorn)

    def _search(self, qs: np.ndarray, k: int, filter: Any, params: dict[str, Any]) -> SearchResult:
        """k nearest points; ``filter`` (a :class:`slimvec.filters.Filter` or an array of allowed
        ids) is Qdrant's own filtered search."""
        q = _edge()
        shard = self._require()
        qfilter = self._qfilter(filter)
        sp = self._search_params(q, params, qfilter is not None)
        using = REDUCED if self.keeps_full else None

        def run(rows: np.ndarray, sp: Any) -> SearchResult:
            requests = [q.QueryRequest(limit=int(k), query=q.Query.Nearest(v.tolist(), using=using),
                                       params=sp, with_payload=False, with_vector=False,
                                       filter=qfilter) for v in qs[rows]]
            return self._collect(shard.query_batch(q.QueryBatchRequest(requests)), len(rows), k)

        return self._fill_holes(run, len(qs), sp, qfilter, params)

    def _fill_holes(self, run: Any, n: int, sp: Any, qfilter: Any, params: dict[str, Any]) -> SearchResult:
        """Run the queries; with a filter, rerun the rows that came back short with an exact
        search (when even ACORN's walk of the graph misses matching points, as on a selective
        filter over clustered vectors), so a filtered search never has holes Qdrant could fill."""
        out = run(np.arange(n), sp)
        if qfilter is None:
            return out
        short = np.flatnonzero((out.ids < 0).any(axis=1))
        if len(short):
            exact = self._search_params(_edge(), {**params, "exact": True}, False)
            again = run(short, exact)
            out.ids[short], out.scores[short] = again.ids, again.scores
        return out

    def _collect(self, batches: Any, n: int, k: int) -> SearchResult:
        """Ids and scores of the engine's points, a row per query (padded to ``k``). One list per
        field and one slice assignment per row: two numpy item writes per point were 6 % of a
        search that fetches 320 candidates (issue 28 item 4, ``python -m benchmarks search-profile``)."""
        out = SearchResult.empty(n, k)
        for row, points in enumerate(batches):
            m = min(len(points), k)
            if m == 0:
                continue
            got = points[:m]
            out.ids[row, :m] = [p.id for p in got]
            scores = np.array([p.score for p in got], dtype=np.float64)
            out.scores[row, :m] = -scores * scores if self.metric == "l2" else scores
        return out

    def search_rescored(self, queries: np.ndarray, full_queries: np.ndarray, k: int,
                        candidates: int, filter: Any = None, **params: Any) -> SearchResult:
        """Two-stage search: ``candidates`` nearest on ``reduced`` re-ranked on ``full``.

        Parameters
        ----------
        queries : ndarray (n, dim)
            Reduced queries.
        full_queries : ndarray (n, full_dim)
            The same queries at full dimension.
        k, candidates : int
            Results per query, and candidates prefetched from the reduced HNSW.
        filter : Filter or array of ids, optional
            Applied to the prefetch (Qdrant's filtered HNSW search).
        """
        q = _edge()
        shard = self._require()
        qfilter = self._qfilter(filter)
        if not self.keeps_full:
            raise StoreError(f"The Qdrant Edge store at {self.location} holds no full vectors "
                             "(create it with full_dim, i.e. --keep-full).")
        qs = check_vectors(queries, self.dim or 0, "queries")
        fq = check_vectors(full_queries, int(self.options["full_dim"]), "full queries")
        check_options(self.name, params, DEFAULTS, RULES)
        sp = self._search_params(q, params, qfilter is not None)
        k, candidates = self._capped(k), self._capped(candidates, "candidates")
        if k == 0 or candidates == 0:
            return SearchResult.empty(len(qs), k)
        def run(rows: np.ndarray, sp: Any) -> SearchResult:
            requests = [q.QueryRequest(
                limit=int(k), query=q.Query.Nearest(f.tolist(), using=FULL),
                prefetches=[q.Prefetch(limit=int(candidates), params=sp, filter=qfilter,
                                       query=q.Query.Nearest(v.tolist(), using=REDUCED))],
                with_payload=False, with_vector=False)
                for v, f in zip(qs[rows], fq[rows])]
            return self._collect(shard.query_batch(q.QueryBatchRequest(requests)), len(rows), k)

        return self._fill_holes(run, len(qs), sp, qfilter, params)

    def get_full(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Stored full vectors of ``ids`` (zeros where unknown) and a mask of the ids found."""
        wanted = [int(i) for i in ids]
        dim = int(self.options.get("full_dim") or 0)
        out = np.zeros((len(wanted), dim), dtype=np.float32)
        found = np.zeros(len(wanted), dtype=bool)
        if not self.keeps_full or not wanted:
            return out, found
        recs = {int(r.id): r for r in self._require().retrieve(sorted(set(wanted)), with_payload=False,
                                                               with_vector=[FULL])}
        for j, i in enumerate(wanted):
            if i in recs:
                out[j] = recs[i].vector[FULL]
                found[j] = True
        return out, found

    def count(self) -> int:
        q = _edge()
        return int(self._require().count(q.CountRequest(exact=True)))

    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        wanted = [int(i) for i in ids]
        valid = sorted({i for i in wanted if i >= 0})
        found = {}
        if valid:
            for rec in self._require().retrieve(valid, with_payload=True, with_vector=False):
                found[int(rec.id)] = dict(rec.payload or {})
        return [found.get(i) for i in wanted]

    # ---------------------------------------------- delete / filter / payload update (issue 25)
    def _qfilter(self, flt: Any) -> Any:
        """A filter for the engine. Translated as is when every key it reads has a payload index
        (Qdrant then estimates its cardinality and plans); otherwise the matching ids as a
        ``has_id`` condition: measured on 600 MiniLM vectors, a 10 % filter on an unindexed
        field gave neighbour recall@10 0.01 (one result of ten, ACORN or not, any hnsw_ef),
        ``has_id`` of the same points with ACORN 1.0. Filters Qdrant Edge would answer otherwise
        (:func:`~slimvec.connectors.qdrant_filter.edge_native`: a boolean match, a range past
        2**53, a range / except / is_null / is_empty on an indexed key) also go through ``has_id``."""
        from slimvec.connectors.qdrant_filter import edge_native, to_qdrant_edge
        from slimvec.filter_syntax import qdrant_key

        if flt is None:
            return None
        q = _edge()
        if isinstance(flt, (np.ndarray, list, tuple, set, frozenset)):
            return q.Filter(must=[q.HasIdCondition({int(i) for i in flt})])
        if isinstance(flt, q.Filter):  # the engine's own filter, as given (the benchmarks' reference)
            return flt
        indexed = self.payload_indexes()
        if edge_native(flt, indexed) and {qdrant_key(k) for k in flt.keys()} <= indexed:
            return to_qdrant_edge(flt, q)
        return q.Filter(must=[q.HasIdCondition({int(i) for i in self.filter_ids(flt)})])

    def payload_indexes(self) -> set[str]:
        """Payload fields with a Qdrant payload index."""
        return set(self._require().info().payload_schema)

    def _scroll(self, qfilter: Any = None, with_payload: bool = False) -> Any:
        q = _edge()
        shard = self._require()
        offset = None
        while True:
            recs, offset = shard.scroll(q.ScrollRequest(offset=offset, limit=2048, filter=qfilter,
                                                        with_payload=with_payload, with_vector=False))
            yield from recs
            if offset is None or not recs:
                return

    def ids(self) -> np.ndarray:
        """Every point id, sorted."""
        return np.sort(np.fromiter((int(r.id) for r in self._scroll()), dtype=np.int64))

    def plan_filter(self, flt: Any) -> tuple[int, Any]:
        """A filter Qdrant can run as is on indexed fields is counted by Qdrant (its payload
        indexes) and goes to its own filtered search; others select their ids first."""
        from slimvec.connectors.qdrant_filter import edge_native, to_qdrant_edge
        from slimvec.filter_syntax import qdrant_key

        indexed = self.payload_indexes()
        if flt is not None and edge_native(flt, indexed) and {qdrant_key(k) for k in flt.keys()} <= indexed:
            q = _edge()
            n = self._require().count(q.CountRequest(exact=True, filter=to_qdrant_edge(flt, q)))
            return int(n), flt
        return super().plan_filter(flt)

    def filter_ids(self, flt: Any = None) -> np.ndarray:
        """Point ids matching ``flt``: Qdrant's filter, or a Python evaluation of the payloads
        where Qdrant Edge would answer otherwise (see
        :func:`slimvec.connectors.qdrant_filter.edge_native`)."""
        from slimvec.connectors.qdrant_filter import edge_native, to_qdrant_edge

        if flt is None:
            return self.ids()
        if edge_native(flt, self.payload_indexes()):
            got = (int(r.id) for r in self._scroll(to_qdrant_edge(flt, _edge())))
        else:
            got = (int(r.id) for r in self._scroll(with_payload=True)
                   if flt.matches(int(r.id), dict(r.payload or {})))
        return np.sort(np.fromiter(got, dtype=np.int64))

    def _stored(self, ids: Sequence[int] | np.ndarray) -> list[int]:
        wanted = sorted(set(self._as_ids(ids).tolist()))
        if not wanted:
            return []
        recs = self._require().retrieve(wanted, with_payload=False, with_vector=False)
        return sorted(int(r.id) for r in recs)

    def delete(self, ids: Sequence[int] | np.ndarray) -> int:
        """Qdrant's ``delete_points`` on the stored ``ids``."""
        known = self._stored(ids)
        if known:
            self._require().update(_edge().UpdateOperation.delete_points(known))
        return len(known)

    def set_payload(self, ids: Sequence[int] | np.ndarray, fields: Mapping[str, Any],
                    overwrite: bool = False) -> int:
        """Qdrant's ``set_payload`` (merge) or ``overwrite_payload`` on the stored ``ids``."""
        op = _edge().UpdateOperation
        known = self._stored(ids)
        if known:
            make = op.overwrite_payload if overwrite else op.set_payload
            self._require().update(make(known, dict(fields)))
        return len(known)

    def delete_payload_keys(self, ids: Sequence[int] | np.ndarray, keys: Sequence[str]) -> int:
        """Qdrant's ``delete_payload`` on the stored ``ids``."""
        known = self._stored(ids)
        if known and keys:
            self._require().update(_edge().UpdateOperation.delete_payload(known, list(keys)))
        return len(known)

    def create_payload_index(self, field: str, kind: str) -> bool:
        """Qdrant's ``create_field_index`` (``kind``: keyword, integer, float, bool or datetime) on the key
        ``field`` as filters name it (:func:`slimvec.filter_syntax.qdrant_key`)."""
        from slimvec.filter_syntax import check_key, qdrant_key

        field = qdrant_key(check_key(field, "payload index field"))
        q = _edge()
        schema = {"keyword": q.PayloadSchemaType.Keyword, "integer": q.PayloadSchemaType.Integer,
                  "float": q.PayloadSchemaType.Float, "bool": q.PayloadSchemaType.Bool,
                  "datetime": q.PayloadSchemaType.Datetime}[kind]
        self._require().update(q.UpdateOperation.create_field_index(field, schema))
        return True

    def finalize(self) -> None:
        """Build the HNSW graph (and quantized codes) over everything loaded so far."""
        shard = self._require()
        shard.flush()
        shard.optimize()
        shard.flush()

    def flush(self) -> None:
        self._require().flush()

    def close(self) -> None:
        if self._shard is not None:
            try:
                self._shard.flush()
            finally:
                self._shard.close()
                self._shard = None
