"""The one benchmark row type: what ``slimvec bench`` measures per configuration, in ``results.json``.

A :class:`Row` is written by the runner and read, as a :class:`Row`, by the report, the plots,
the planner, the ranking rule, the HTML page and the CLI; it becomes JSON only at the file
boundary (:func:`save_rows`, :func:`load_rows`, the data embedded in ``report.html``).

Metrics measured "at k" have one spelling: the field ``*_at_k`` (``neighbor_recall_at_k``) and the
row's ``k``, so a run with ``k=5`` is read, planned on and titled ``nbr R@5``. Results files written
before the typed row spelled them ``*_at_10`` (:data:`LEGACY_KEYS`); :meth:`Row.from_json` reads
those as the ``*_at_k`` fields at ``k = 10``, and nothing writes or looks up the old keys any more::

    rows, meta = load_rows("bench-results/dev/results.json")
    rows[0].neighbor_recall_at_k, rows[0].k      # 0.998, 10 (read from neighbor_recall_at_10)

A metric that does not apply is ``None`` (``null`` in JSON). Keys a row does not know (written by a
newer or older tool) are kept in :attr:`Row.extra` and written back unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError, PersistenceError

__all__ = ["Row", "rerank_of", "ROW_KEYS", "AT_K_METRICS", "LEGACY_KEYS", "load_rows",
           "save_rows", "metric_title", "num", "finite", "row_k", "budget_ladder"]

#: metrics measured "at k": new key -> short title stem (the title gets ``@{k}``)
AT_K_METRICS: dict[str, str] = {
    "neighbor_recall_at_k": "nbr R",
    "task_recall_at_k": "task R",
    "task_mrr_at_k": "MRR",
    "routed_recall_at_k": "routed R",
}

#: legacy key (results files before the typed row) -> field; read only, as ``k == 10``
LEGACY_KEYS: dict[str, str] = {
    "neighbor_recall_at_10": "neighbor_recall_at_k",
    "task_recall_at_10": "task_recall_at_k",
    "task_mrr_at_10": "task_mrr_at_k",
    "routed_recall_at_10": "routed_recall_at_k",
}

_OTHER_TITLES = {"sts_spearman": "STS ρ", "cluster_accuracy": "cluster acc"}


@dataclass
class Row:
    """One measured configuration: dataset × reducer × store (× rescoring depth).

    Attributes
    ----------
    dataset, encoder : str
        Dataset name and the encoder that made its vectors (``None`` for vector files).
    dim_in, dim_out : int
        Encoder dimension and the dimension stored after the reducer.
    reducer, store : str
        Specs as given (``none`` is the full dimension); for peers and routed rows ``store`` is
        the peer label or ``kmeans:K,p=P``.
    rescore : int or None
        R when ``k × R`` candidates were re-ranked with the full vectors.
    reranked : bool
        The row's candidates were re-ranked by higher-precision vectors before the top k was
        taken: full vectors on disk (``rescore`` R), a store's own rescoring (Qdrant
        ``rescore=true`` with its oversampling) or sentence-transformers' int8 rescoring. Rows
        are compared on equal footing only (:func:`slimvec.planner.ranking.equal_footing`):
        a re-ranked row against re-ranked rows. Derived from ``rescore`` and the store label
        for files written before the field.
    rerank_depth : float or None
        Candidates re-ranked per result (R, or Qdrant's oversampling); None when not re-ranked.
    kind : str
        ``reducer`` (reducer → store), ``peer`` (a quantization baseline on full vectors) or
        ``routed`` (cluster-routed retrieval, no store built).
    n_corpus, n_queries, k : int
        Corpus and query counts; results per query (the "at k" of the metrics).
    fit_s, transform_s_per_10k : float
        Reducer fit time and transform time per 10,000 vectors.
    reducer_bytes : int
        Size of the saved reducer artifact (a fixed cost, loaded to transform every query).
    build_s : float
        Store build time (create, upsert, finalize, flush).
    index_bytes : int
        Allocated bytes of the built store on disk.
    bytes_per_vector : float
        ``index_bytes / n_corpus`` (fixed parts included, spread over this corpus).
    full_bytes_per_vector : float
        Bytes per vector read for rescoring (the full vectors on disk), when rescored.
    fixed_bytes : int or None
        Part of ``index_bytes`` plus ``reducer_bytes`` that does not grow with the corpus
        (rotations, codebooks, centroids, the reducer's matrix); ``None`` when not measured.
    per_vector_bytes : float or None
        ``(index_bytes - store fixed part) / n_corpus``: what each further vector costs;
        ``None`` when the store's fixed part was not measured.
    neighbor_recall_at_k, task_recall_at_k, task_mrr_at_k : float
        Neighbour recall against exact full-dimension search, task recall and MRR on duplicate pairs.
    sts_spearman, cluster_accuracy : float
    latency_p50_ms, latency_p95_ms, latency_p99_ms, qps : float
        Single-query latency percentiles (one thread) and batched queries per second.
    build_rss_bytes : int or None
        Measured peak growth of the process's resident memory while the store was built
        (``VmHWM`` after the build minus ``VmRSS`` before it; the corpus itself was already
        loaded); ``None`` unless the run measures memory (``measure_rss``).
    serve_rss_bytes : int or None
        Measured resident memory a fresh process gains by opening the built store and answering
        the queries (``VmRSS`` after minus before, mapped store files included); ``None`` unless
        the run measures memory.
    routed_recall_at_k, routed_fraction_scanned : float
        Cluster-routed rows: neighbour recall and the share of the corpus scanned.
    clusters_used, effective_clusters, largest_cluster_share : float
        Cluster-routed rows: how evenly the clustering spreads the corpus
        (:func:`slimvec.benchmarks.metrics.cluster_balance`).
    selectivity : float or None
        Filtered-search rows (``kind == "filtered"``, :mod:`slimvec.benchmarks.filtered`): the
        percent of the corpus the filter matches; their recall is against exact filtered truth.
    filter_matches : int or None
        Filtered-search rows: documents the filter matches.
    filter_path : str or None
        Filtered-search rows: the path the search took, ``exact scan``, ``store filter`` or
        ``native`` (the reference: Qdrant Edge's own filtered search on full vectors), or
        ``post filter`` (a broad filter: unfiltered search, candidates looked up in the payload index).
    filter_fields : str or None
        Filtered-search rows: the fields of the filter's conditions (``bucket``, or
        ``bucket AND tag`` for the two-condition rows).
    extra : dict
        Keys this version does not know, kept as read.
    """

    dataset: str | None = None
    encoder: str | None = None
    dim_in: int | None = None
    reducer: str | None = None
    dim_out: int | None = None
    store: str | None = None
    rescore: int | None = None
    reranked: bool | None = None
    rerank_depth: float | None = None
    kind: str | None = None
    n_corpus: int | None = None
    n_queries: int | None = None
    k: int = 10
    fit_s: float | None = None
    transform_s_per_10k: float | None = None
    reducer_bytes: int | None = None
    build_s: float | None = None
    index_bytes: int | None = None
    bytes_per_vector: float | None = None
    full_bytes_per_vector: float | None = None
    fixed_bytes: int | None = None
    per_vector_bytes: float | None = None
    neighbor_recall_at_k: float | None = None
    task_recall_at_k: float | None = None
    task_mrr_at_k: float | None = None
    sts_spearman: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    qps: float | None = None
    build_rss_bytes: int | None = None
    serve_rss_bytes: int | None = None
    cluster_accuracy: float | None = None
    routed_recall_at_k: float | None = None
    routed_fraction_scanned: float | None = None
    clusters_used: int | None = None
    effective_clusters: float | None = None
    largest_cluster_share: float | None = None
    selectivity: float | None = None
    filter_matches: int | None = None
    filter_path: str | None = None
    filter_fields: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.reranked is None:
            self.reranked, depth = rerank_of(self.rescore, self.store)
            if self.rerank_depth is None:
                self.rerank_depth = depth

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Row:
        """A row from a ``results.json`` object (``*_at_k`` keys, legacy ``*_at_10`` keys, or both).

        A legacy key fills its ``*_at_k`` field when the row's k is 10 (or unrecorded) and the field
        is not given; in a row of another k it is kept in :attr:`extra` as read (it cannot be an
        "at k" figure of that row).

        Raises
        ------
        ConfigError
            ``k`` is not a positive integer.
        """
        known = {f.name for f in fields(cls)} - {"extra"}
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key in known:
                values[key] = value
            elif key not in LEGACY_KEYS and key != "extra":
                extra[key] = value
        k = values.get("k", 10)
        if k is None:
            k = 10
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"Result row {data.get('reducer')!r} → {data.get('store')!r}: field 'k' "
                              f"must be a positive integer, got {k!r}.")
        values["k"] = k
        for legacy, new in LEGACY_KEYS.items():
            if data.get(legacy) is None:
                continue
            if k != 10:
                extra[legacy] = data[legacy]
            elif values.get(new) is None:
                values[new] = data[legacy]
        return cls(**values, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The ``results.json`` object: every field, then the extra keys."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return {key: _plain(value) for key, value in out.items()}

    # ------------------------------------------------------------------ mapping access
    def get(self, key: str, default: Any = None) -> Any:
        """A value by name: a field (``row.get(metric)`` for a metric chosen at run time) or an
        extra key; ``default`` when unknown."""
        if key != "extra" and key in _FIELD_NAMES:
            return getattr(self, key)
        return self.extra.get(key, default)

    def __getitem__(self, key: str) -> Any:
        if (key != "extra" and key in _FIELD_NAMES) or key in self.extra:
            return self.get(key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in _FIELD_NAMES or key in self.extra)

    def update(self, values: Mapping[str, Any] | None = None, **more: Any) -> None:
        """Set fields from a mapping (unknown keys go to :attr:`extra`)."""
        for key, value in {**(values or {}), **more}.items():
            if key != "extra" and key in _FIELD_NAMES:
                setattr(self, key, value)
            else:
                self.extra[key] = value

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def keys(self) -> Iterator[str]:
        """Keys of :meth:`to_json`."""
        return iter(self.to_json().keys())

    @property
    def label(self) -> str:
        """``pca:96 → faiss:HNSW32`` (`` +rescore×R`` when rescored)."""
        suffix = f" +rescore×{self.rescore}" if self.rescore else ""
        return f"{self.reducer or '?'} → {self.store or '?'}{suffix}"


_FIELD_NAMES = frozenset(f.name for f in fields(Row))

def rerank_of(rescore: Any, store: str | None) -> tuple[bool, float | None]:
    """Whether a row was re-ranked, and how deep, from its ``rescore`` and store label: R from
    the full vectors, or a store that keeps full vectors and rescores its quantized codes itself
    (Qdrant: ``rescore=true``, or any ``quant=`` without ``rescore=false``, which is Qdrant's
    default), at its ``oversampling`` (2 when not written, Qdrant's default)."""
    if rescore and not isinstance(rescore, bool):
        return True, float(rescore)
    if rescore:
        return True, None
    from slimvec.connectors import parse_store_spec, store_class
    from slimvec.errors import SlimvecError

    try:
        parsed = parse_store_spec(str(store or ""))
        klass = store_class(parsed)
    except (SlimvecError, ValueError, TypeError):  # a peer label (st:binary) or a routed row
        return False, None
    options = dict(parsed.options or {})
    lossy = klass.quantization_label(parsed.arg, options) not in ("float32", "none")
    if not (klass.keeps_full_vectors and lossy and options.get("rescore", True) is not False):
        return False, None
    return True, float(options.get("oversampling", 2.0))

#: keys every written row carries (``None`` when the metric does not apply)
ROW_KEYS: list[str] = [f.name for f in fields(Row) if f.name != "extra"]


def _plain(value: Any) -> Any:
    """numpy scalars to Python numbers, non-finite floats to ``None`` (JSON has no NaN)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metric_title(key: str, k: int | None = 10) -> str:
    """A column title that says what the metric is: ``nbr R@20`` for ``neighbor_recall_at_k`` at
    k = 20 (``nbr R@k`` when ``k`` is None: rows of several k)."""
    if key in AT_K_METRICS:
        return f"{AT_K_METRICS[key]}@{'k' if k is None else k}"
    return _OTHER_TITLES.get(key, key)


def load_rows(path: str | Path) -> tuple[list[Row], dict[str, Any]]:
    """Read ``results.json``: ``{"rows": [...], "meta": {...}}`` or a bare list of rows.

    Returns
    -------
    rows : list of Row
    meta : dict
        Empty when the file is a bare list.

    Raises
    ------
    PersistenceError
        The file is missing or not JSON.
    ConfigError
        The JSON is neither a list of objects nor an object with a ``rows`` list.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PersistenceError(f"No results file at {p}: run `slimvec bench --out DIR` first "
                               "and pass DIR/results.json.") from exc
    except (OSError, ValueError) as exc:
        raise PersistenceError(f"Could not read results file {p} as JSON: {exc}.") from exc
    meta: dict[str, Any] = {}
    if isinstance(data, dict):
        meta = dict(data.get("meta") or {})
        data = data.get("rows")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ConfigError(f"Results file {p}: expected a JSON list of row objects or "
                          f'{{"rows": [...], "meta": {{...}}}}, got {type(data).__name__}.')
    return [Row.from_json(r) for r in data], meta


def save_rows(rows: Iterable[Row], meta: Mapping[str, Any], out_dir: str | Path) -> Path:
    """Write ``out_dir/results.json`` (``{"rows": [...], "meta": {...}}``) atomically."""
    from slimvec.persistence import write_json_atomic

    path = Path(out_dir) / "results.json"
    write_json_atomic(path, {"rows": [r.to_json() for r in rows], "meta": dict(meta)})
    return path


# ------------------------------------------------------------------ reading one row
# (here, below analysis.py and ranking.py, which both read rows: issue 24 item 7)

def num(row: Row, key: str) -> float | None:
    """The field (or extra key) ``key`` as a finite float, or None (missing, null, bool, NaN,
    not a number)."""
    return finite(row.get(key))


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (null, bool, NaN, infinite, not a number)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def row_k(row: Row) -> int:
    """The k of a row's "at k" metrics (10 for rows written before k was recorded)."""
    return row.k


def budget_ladder(rows: Sequence[Row], key: str = "bytes_per_vector") -> list[float]:
    """Powers of two spanning the rows' bytes per vector (the budgets of the report)."""
    values = [v for v in (num(r, key) for r in rows) if v is not None and v > 0]
    if not values:
        return []
    lo = 2 ** math.floor(math.log2(min(values)))
    hi = 2 ** math.ceil(math.log2(max(values)))
    out, b = [], float(lo)
    while b <= hi:
        out.append(b)
        b *= 2
    return out
