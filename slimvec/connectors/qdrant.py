"""Qdrant through ``qdrant-client``: a server or cluster by URL, or the client's local mode.

Spec: ``qdrant[:URL|PATH|:memory:][,collection=slimvec,batch=256,retries=5,ef=64,timeout=60,
quant=none,rescore=true,oversampling=2.0,shard_number=N,replication_factor=N,
write_consistency_factor=N,shard_key=KEY,parallel=1]``. The cluster settings (``shard_number``,
``replication_factor``, ``write_consistency_factor``, a custom ``shard_key``) are sent when the
collection is created (server or cluster only; local mode ignores them) and, being part of the
spec, recorded in the index manifest; ``parallel=N`` sends upsert batches on N threads. With
``full_dim=D`` (set by ``--keep-full``) points hold named vectors ``reduced`` (HNSW, quantized with ``quant``) and ``full`` (on disk, HNSW ``m=0``),
and :meth:`QdrantStore.search_rescored` re-ranks a prefetch on ``reduced`` by ``full``. With a URL
the API key is read from the environment
variable ``QDRANT_API_KEY`` (never from the spec, never logged). Local mode (a folder or
``:memory:``) is qdrant-client's pure-Python brute force: right for API tests and small data, never
for timings; use ``qdrant-edge`` for the real engine in-process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore, check_vectors
from slimvec.connectors.options import FLAG, MAX_DIM, TEXT, check_options, number, parse_quantization, whole
from slimvec.errors import ConfigError, MissingDependencyError, StoreError

__all__ = ["QdrantStore", "API_KEY_ENV"]

log = logging.getLogger(__name__)

API_KEY_ENV = "QDRANT_API_KEY"
DEFAULTS: dict[str, Any] = {"collection": "slimvec", "batch": 256, "retries": 5, "ef": 64,
                            "timeout": 60, "quant": "none", "rescore": True, "oversampling": 2.0,
                            "full_dim": 0, "shard_number": 0, "replication_factor": 0,
                            "write_consistency_factor": 0, "shard_key": "", "parallel": 1}
#: ranges checked when the spec is parsed (batch=0 was a ZeroDivision-like range() error at the
#: first upsert; a negative or zero timeout, retries or parallel made no sense)
RULES = {
    "collection": TEXT,
    "batch": whole(1, 100_000, "Points per upload request (default 256)."),
    "retries": whole(1, 100, "Attempts per request before giving up (default 5)."),
    "ef": whole(1, 100_000, "The search beam hnsw_ef (default 64)."),
    "timeout": whole(1, 86_400, "Seconds per request (default 60)."),
    "rescore": FLAG,
    "oversampling": number(1, 1000, "Candidates fetched per result before rescoring (default 2)."),
    "full_dim": whole(0, MAX_DIM, "Set by --keep-full; 0 keeps no full vectors."),
    "shard_number": whole(0, 65_536, "0 leaves it to the server."),
    "replication_factor": whole(0, 1024, "0 leaves it to the server."),
    "write_consistency_factor": whole(0, 1024, "0 leaves it to the server."),
    "parallel": whole(1, 64, "Threads sending upsert batches (default 1)."),
}
#: create_collection arguments taken from the spec when set (0 / "": the server's default)
CLUSTER_OPTIONS = ("shard_number", "replication_factor", "write_consistency_factor")
#: named vectors of a collection that keeps full vectors (``full_dim`` > 0, set by --keep-full)
REDUCED, FULL = "reduced", "full"


def _client_models():
    try:
        from qdrant_client import QdrantClient, models
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise MissingDependencyError("qdrant-client is not installed: pip install qdrant-client") from exc
    return QdrantClient, models


def _is_remote(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _quantization(models, quant: Any):
    family, level = parse_quantization(quant)
    if family == "none":
        return None
    if family == "sq":
        return models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=0.99, always_ram=True))
    if family == "bq":
        return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
    if family == "pq":
        return models.ProductQuantization(product=models.ProductQuantizationConfig(
            compression=getattr(models.CompressionRatio, f"X{level}"), always_ram=True))
    raise StoreError(f"quant={quant!r} is not offered through qdrant-client; use the qdrant-edge store.")


class QdrantStore(VectorStore):
    """A Qdrant collection reached with ``qdrant-client``.

    Parameters
    ----------
    location : str
        ``http(s)://host:port`` of a server or cluster, a folder (local mode) or ``:memory:``.
    collection : str
        Collection name.
    batch : int
        Points per upload request.
    retries : int
        Attempts per request before giving up (exponential back-off).
    ef : int
        HNSW search beam (server only; local mode is exact).
    timeout : int
        Seconds per request.
    quant, rescore, oversampling
        Quantization of the collection and how searches use it (server only).
    """

    name = "qdrant"
    keeps_full_vectors = True
    option_defaults, option_rules = DEFAULTS, RULES
    reader = "slimvec.connectors.qdrant_readers:QdrantSource"

    @classmethod
    def needs_reader_lock(cls, spec: Any) -> bool:
        """Local mode takes its folder for itself (readers wait for the writer); a server does not."""
        location = cls._spec_location(spec)
        return location is None or not _is_remote(location)

    def __init__(self, location: str, **options: Any) -> None:
        super().__init__(location, **check_options(self.name, options, DEFAULTS, RULES))
        if parse_quantization(self.options["quant"])[0] == "tq":
            raise ConfigError(f"Store 'qdrant': option quant={self.options['quant']} is not offered "
                              "through qdrant-client: expected none, sq8, bq1/bq1.5/bq2 or pq4..pq64, "
                              "got TurboQuant. Use the qdrant-edge store for tq1..tq4.")
        self.local = not _is_remote(self.location) and self.location != ":memory:"
        self._client: Any = None

    def _connect(self):
        QdrantClient, _ = _client_models()
        if _is_remote(self.location):
            key = os.environ.get(API_KEY_ENV) or None
            log.info("connecting to Qdrant at %s (API key %s)", self.location,
                     "from $" + API_KEY_ENV if key else "not set")
            return QdrantClient(url=self.location, api_key=key, timeout=int(self.options["timeout"]))
        if self.location == ":memory:":
            return QdrantClient(location=":memory:")
        folder = self._folder(self.location)
        folder.mkdir(parents=True, exist_ok=True)
        return QdrantClient(path=str(folder))

    def _retry(self, what: str, call):
        attempts = max(1, int(self.options["retries"]))
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except Exception as exc:  # network errors come in many types
                if attempt == attempts or not _is_remote(self.location):
                    raise StoreError(f"Qdrant {what} failed at {self.location} after {attempt} "
                                     f"attempt(s): {exc}") from exc
                wait = min(30.0, 0.5 * 2 ** (attempt - 1))
                log.warning("Qdrant %s failed (%s); retry %d/%d in %.1fs", what, exc, attempt,
                            attempts - 1, wait)
                time.sleep(wait)
        raise AssertionError("unreachable")

    def create(self, dim: int, metric: str = "cosine") -> QdrantStore:
        _, models = _client_models()
        self.dim, self.metric = int(dim), self._check_metric(metric)
        self._client = self._connect()
        name = self.options["collection"]
        if self._retry("collection check", lambda: self._client.collection_exists(name)):
            raise StoreError(f"Collection {name!r} already exists at {self.location}; open it instead, "
                             "or pick another with collection=NAME.")
        distance = {"cosine": models.Distance.COSINE, "ip": models.Distance.DOT,
                    "l2": models.Distance.EUCLID}[metric]
        quant = _quantization(models, self.options["quant"])
        vectors: Any = models.VectorParams(size=self.dim, distance=distance)
        if self.keeps_full:
            vectors = {
                REDUCED: models.VectorParams(size=self.dim, distance=distance, quantization_config=quant),
                FULL: models.VectorParams(size=int(self.options["full_dim"]), distance=distance,
                                          on_disk=True, hnsw_config=models.HnswConfigDiff(m=0)),
            }
            quant = None
        cluster = {k: int(self.options[k]) for k in CLUSTER_OPTIONS if int(self.options[k] or 0) > 0}
        sharded = bool(self.options["shard_key"]) and _is_remote(self.location)
        if sharded:
            cluster["sharding_method"] = models.ShardingMethod.CUSTOM
        self._retry("create collection", lambda: self._client.create_collection(
            name, vectors_config=vectors, quantization_config=quant, **cluster))
        if sharded:
            key = str(self.options["shard_key"])
            self._retry("create shard key", lambda: self._client.create_shard_key(name, key))
        return self

    @property
    def keeps_full(self) -> bool:
        """True when points also hold their full vectors (named vectors ``reduced`` / ``full``)."""
        return int(self.options.get("full_dim") or 0) > 0

    def open(self) -> QdrantStore:
        self._client = self._connect()
        name = self.options["collection"]
        if not self._retry("collection check", lambda: self._client.collection_exists(name)):
            raise StoreError(f"No collection {name!r} at {self.location}. Create it first (slimvec ingest).")
        info = self._retry("collection info", lambda: self._client.get_collection(name))
        params = info.config.params.vectors
        if isinstance(params, dict):
            if REDUCED not in params or FULL not in params:
                raise StoreError(f"Collection {name!r} at {self.location} has named vectors "
                                 f"{', '.join(params)}; slimvec expects one unnamed vector, or "
                                 f"'{REDUCED}' and '{FULL}'.")
            self.options["full_dim"] = int(params[FULL].size)
            params = params[REDUCED]
        self.dim = int(params.size)
        self.metric = {"Cosine": "cosine", "Dot": "ip", "Euclid": "l2"}[str(params.distance.value)]
        return self

    def _require(self):
        if self._client is None:
            raise StoreError(f"Qdrant store at {self.location} is not open: call create() or open().")
        return self._client

    def _upsert(self, ids_arr: np.ndarray, vecs: np.ndarray,
                payloads: list[dict[str, Any] | None] | None, full: np.ndarray | None) -> None:
        """Insert or overwrite points (``full``: when :attr:`keeps_full`, checked by
        :meth:`VectorStore.upsert`)."""
        _, models = _client_models()
        client = self._require()
        pl = payloads if payloads is not None else [None] * len(ids_arr)
        step = int(self.options["batch"])
        key = (str(self.options["shard_key"]) or None) if _is_remote(self.location) else None

        def send(start: int) -> None:
            end = start + step
            named: list[Any] = ([v.tolist() for v in vecs[start:end]] if full is None else
                                [{REDUCED: v.tolist(), FULL: f.tolist()}
                                 for v, f in zip(vecs[start:end], full[start:end])])
            points = [models.PointStruct(id=int(i), vector=v, payload=p or {})
                      for i, v, p in zip(ids_arr[start:end], named, pl[start:end])]
            self._retry("upsert", lambda: client.upsert(self.options["collection"], points=points,
                                                        wait=True, shard_key_selector=key))

        starts = range(0, len(ids_arr), step)
        threads = max(1, int(self.options["parallel"]))
        if threads == 1 or len(starts) == 1:
            for start in starts:
                send(start)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(send, starts))  # re-raises the first failure

    def _search(self, qs: np.ndarray, k: int, filter: Any, params: dict[str, Any]) -> SearchResult:
        """k nearest points; ``filter`` (a :class:`slimvec.filters.Filter` or an array of allowed
        ids) is Qdrant's own filtered search."""
        _, models = _client_models()
        client = self._require()
        qfilter = self._qfilter(filter)
        o = check_options(self.name, params, self.options, RULES)  # values as the rules convert them
        quant = None
        if parse_quantization(o["quant"])[0] != "none":
            quant = models.QuantizationSearchParams(rescore=bool(o["rescore"]),
                                                    oversampling=float(o["oversampling"]))
        # local mode is exact and warns about search params; a server uses them
        sp = models.SearchParams(hnsw_ef=int(o["ef"]), quantization=quant) if _is_remote(self.location) else None
        using = REDUCED if self.keeps_full else None
        requests = [models.QueryRequest(query=v.tolist(), using=using, limit=int(k), params=sp,
                                        with_payload=False, filter=qfilter) for v in qs]
        responses = self._retry("query", lambda: client.query_batch_points(o["collection"], requests))
        return self._collect(responses, len(qs), k)

    def search_rescored(self, queries: np.ndarray, full_queries: np.ndarray, k: int,
                        candidates: int, filter: Any = None, **params: Any) -> SearchResult:
        """Two-stage search: ``candidates`` nearest on ``reduced`` re-ranked on ``full``.

        Parameters
        ----------
        queries, full_queries : ndarray
            The queries reduced (n, dim) and at full dimension (n, full_dim).
        k, candidates : int
            Results per query, and candidates prefetched on ``reduced``.
        filter : Filter or array of ids, optional
            Applied to the prefetch.
        """
        _, models = _client_models()
        client = self._require()
        qfilter = self._qfilter(filter)
        if not self.keeps_full:
            raise StoreError(f"The Qdrant collection at {self.location} holds no full vectors "
                             "(create it with full_dim, i.e. --keep-full).")
        o = check_options(self.name, params, self.options, RULES)
        qs = check_vectors(queries, self.dim or 0, "queries")
        fq = check_vectors(full_queries, int(self.options["full_dim"]), "full queries")
        k, candidates = self._capped(k), self._capped(candidates, "candidates")
        if k == 0 or candidates == 0:
            return SearchResult.empty(len(qs), k)
        sp = models.SearchParams(hnsw_ef=int(o["ef"])) if _is_remote(self.location) else None
        requests = [models.QueryRequest(
            query=f.tolist(), using=FULL, limit=int(k), with_payload=False,
            prefetch=models.Prefetch(query=v.tolist(), using=REDUCED, limit=int(candidates), params=sp,
                                     filter=qfilter))
            for v, f in zip(qs, fq)]
        responses = self._retry("query", lambda: client.query_batch_points(o["collection"], requests))
        return self._collect(responses, len(qs), k)

    def get_full(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Stored full vectors of ``ids`` (zeros where unknown) and a mask of the ids found."""
        client = self._require()
        wanted = [int(i) for i in ids]
        out = np.zeros((len(wanted), int(self.options.get("full_dim") or 0)), dtype=np.float32)
        found = np.zeros(len(wanted), dtype=bool)
        if not self.keeps_full or not wanted:
            return out, found
        recs = self._retry("retrieve", lambda: client.retrieve(
            self.options["collection"], sorted(set(wanted)), with_payload=False, with_vectors=[FULL]))
        by_id = {int(r.id): r.vector[FULL] for r in recs}
        for j, i in enumerate(wanted):
            if i in by_id:
                out[j], found[j] = by_id[i], True
        return out, found

    def _collect(self, responses: Any, n: int, k: int) -> SearchResult:
        out = SearchResult.empty(n, k)
        for row, resp in enumerate(responses):
            for col, p in enumerate(resp.points[:k]):
                out.ids[row, col] = int(p.id)
                out.scores[row, col] = -float(p.score) ** 2 if self.metric == "l2" else float(p.score)
        return out

    def count(self) -> int:
        client = self._require()
        return int(self._retry("count", lambda: client.count(self.options["collection"], exact=True)).count)

    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        client = self._require()
        wanted = [int(i) for i in ids]
        valid = sorted({i for i in wanted if i >= 0})
        found: dict[int, dict[str, Any]] = {}
        if valid:
            recs = self._retry("retrieve", lambda: client.retrieve(self.options["collection"], valid,
                                                                   with_payload=True, with_vectors=False))
            found = {int(r.id): dict(r.payload or {}) for r in recs}
        return [found.get(i) for i in wanted]

    # ---------------------------------------------- delete / filter / payload update (issue 25)
    def _qfilter(self, flt: Any) -> Any:
        from slimvec.connectors.qdrant_filter import to_qdrant_client

        if flt is None:
            return None
        if isinstance(flt, (np.ndarray, list, tuple, set, frozenset)):
            _, models = _client_models()
            return models.Filter(must=[models.HasIdCondition(has_id=sorted(int(i) for i in flt))])
        return to_qdrant_client(flt)

    def _scroll(self, qfilter: Any = None) -> Any:
        client = self._require()
        offset = None
        while True:
            recs, offset = self._retry("scroll", lambda at=offset: client.scroll(
                self.options["collection"], scroll_filter=qfilter, limit=2048, offset=at,
                with_payload=False, with_vectors=False))
            yield from recs
            if offset is None or not recs:
                return

    def ids(self) -> np.ndarray:
        """Every point id, sorted."""
        return np.sort(np.fromiter((int(r.id) for r in self._scroll()), dtype=np.int64))

    def filter_ids(self, flt: Any = None) -> np.ndarray:
        """Point ids matching ``flt`` (Qdrant's filter)."""
        return np.sort(np.fromiter((int(r.id) for r in self._scroll(self._qfilter(flt))), dtype=np.int64))

    def _stored(self, ids: Sequence[int] | np.ndarray) -> list[int]:
        wanted = sorted(set(self._as_ids(ids).tolist()))
        if not wanted:
            return []
        client = self._require()
        recs = self._retry("retrieve", lambda: client.retrieve(
            self.options["collection"], wanted, with_payload=False, with_vectors=False))
        return sorted(int(r.id) for r in recs)

    def delete(self, ids: Sequence[int] | np.ndarray) -> int:
        """Qdrant's ``delete`` of the stored ``ids`` (``wait=True``)."""
        _, models = _client_models()
        client = self._require()
        known = self._stored(ids)
        if known:
            self._retry("delete", lambda: client.delete(
                self.options["collection"], points_selector=models.PointIdsList(points=known), wait=True))
        return len(known)

    def set_payload(self, ids: Sequence[int] | np.ndarray, fields: Mapping[str, Any],
                    overwrite: bool = False) -> int:
        """Qdrant's ``set_payload`` (merge) or ``overwrite_payload`` on the stored ``ids``."""
        client = self._require()
        known = self._stored(ids)
        if known:
            call = client.overwrite_payload if overwrite else client.set_payload
            self._retry("set payload", lambda: call(self.options["collection"], payload=dict(fields),
                                                    points=known, wait=True))
        return len(known)

    def delete_payload_keys(self, ids: Sequence[int] | np.ndarray, keys: Sequence[str]) -> int:
        """Qdrant's ``delete_payload`` on the stored ``ids``."""
        client = self._require()
        known = self._stored(ids)
        if known and keys:
            self._retry("delete payload", lambda: client.delete_payload(
                self.options["collection"], keys=list(keys), points=known, wait=True))
        return len(known)

    def create_payload_index(self, field: str, kind: str) -> bool:
        """Qdrant's ``create_payload_index`` (``kind``: keyword, integer, float, bool or datetime)."""
        _, models = _client_models()
        client = self._require()
        schema = {"keyword": models.PayloadSchemaType.KEYWORD, "integer": models.PayloadSchemaType.INTEGER,
                  "float": models.PayloadSchemaType.FLOAT, "bool": models.PayloadSchemaType.BOOL,
                  "datetime": models.PayloadSchemaType.DATETIME}[kind]
        self._retry("create payload index", lambda: client.create_payload_index(
            self.options["collection"], field_name=field, field_schema=schema, wait=True))
        return True

    def flush(self) -> None:
        """Upserts are sent with ``wait=True``: acknowledged means persisted by the server."""
        self._require()

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["api_key"] = "from $" + API_KEY_ENV if _is_remote(self.location) else None
        return info

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
