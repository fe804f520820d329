"""The benchmark runner: every dataset × reducer × store measured in one run, rows to ``results.json``.

For each dataset the runner fits each reducer (pair-learning reducers on the training pairs only,
the others on a sample of the corpus), transforms corpus and queries, then for each store builds a
real index in a work folder, persists it, measures its allocated bytes, reopens it and searches:
neighbour recall@10 against exact full-dimension search, task recall/MRR@10, latency of single
queries on one thread, batched QPS. Optional extras in the same run: rescoring ``k * R``
candidates with the full vectors (memory-mapped from disk), the peer quantization baselines of
:mod:`slimvec.benchmarks.baselines`, and cluster-routed retrieval (FAISS k-means with K clusters on
each reducer's output, and the reducer's own clusters when it has them).

A configuration that fails (a missing optional dependency, a FAISS factory that does not fit the
dimension...) is recorded in ``meta["skipped"]`` with the reason and the run goes on.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.benchmarks.baselines import StoreVariant, STQuantIndex
from slimvec.benchmarks.config import BenchConfig, lossy
from slimvec.benchmarks.datasets import BenchDataset
from slimvec.benchmarks.metrics import (
    cluster_accuracy,
    cluster_balance,
    recall_at_k,
    routed_search,
    sts_spearman,
    task_recall_mrr,
    time_single,
)
from slimvec.connectors.fullvectors import FullVectors
from slimvec.errors import ConfigError, SlimvecError
from slimvec.measure import IndexUnderTest
from slimvec.planner.rows import ROW_KEYS, Row, rerank_of, save_rows

__all__ = ["BenchConfig", "run_bench", "write_results", "ROW_KEYS", "Row"]

log = logging.getLogger(__name__)

#: progress callback: (description or None, units of work finished)
Progress = Callable[[Any, int], None]


# --------------------------------------------------------------------------- helpers
def _status_bytes(key: str) -> int | None:
    """A ``/proc/self/status`` memory line (``VmRSS``, ``VmHWM``) in bytes; None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak_rss() -> int | None:
    """Reset the process's peak RSS to the current RSS (Linux ``clear_refs`` 5) and return the
    current RSS; None when the kernel does not allow it (then no build peak is reported)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return None
    return _status_bytes("VmRSS")


def _allocated(path: Path) -> int:
    from slimvec.persistence import allocated_bytes

    return int(allocated_bytes(path))


def _store_fixed_bytes(folder: Path) -> int | None:
    """Bytes of a built store that do not grow with the corpus, or None when not measurable.

    FAISS index files (``*.faiss``) are read back, emptied with ``reset()`` (which keeps what
    training made: codebooks, OPQ rotations, IVF centroids) and serialised again; the size of that
    empty index is the fixed part. Other stores keep no trained parts we can separate: None.
    """
    files = sorted(folder.rglob("*.faiss"))
    if not files:
        return None
    try:
        import faiss

        total = 0
        for path in files:
            index = faiss.read_index(str(path))
            index.reset()
            total += int(faiss.serialize_index(index).size)
        return total
    except Exception as exc:  # noqa: BLE001 - an optional figure; the row is still measured
        log.info("fixed bytes of %s not measured: %s", folder, exc)
        return None


def _rows_of(ids: np.ndarray) -> np.ndarray:
    """Store ids (row + 1) back to corpus rows; missing results stay -1."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.where(ids > 0, ids - 1, -1)


def _time_batch(search_all: Callable[[np.ndarray], Any], queries: np.ndarray) -> float:
    t0 = time.perf_counter()
    search_all(queries)
    return len(queries) / max(time.perf_counter() - t0, 1e-9)


def _base_row(ds: BenchDataset, reducer: str, dim_out: int, store: str, kind: str, k: int) -> Row:
    return Row(dataset=ds.name, encoder=ds.encoder, dim_in=ds.dim, reducer=reducer, dim_out=dim_out,
               store=store, kind=kind, n_corpus=int(len(ds.corpus)), n_queries=int(len(ds.queries)), k=k)


@dataclass
class _Reduced:
    """A fitted reducer and its outputs on one dataset."""

    spec: str
    reducer: Any
    corpus: np.ndarray
    queries: np.ndarray
    facts: dict[str, Any]


# --------------------------------------------------------------------------- the runner
class _Runner:
    def __init__(self, config: BenchConfig, progress: Progress | None) -> None:
        self.cfg = config
        self.progress = progress or (lambda text, done: None)
        self.rows: list[Row] = []
        self.skipped: list[dict[str, str]] = []
        self.build_rss: int | None = None

    def _skip(self, ds: BenchDataset, what: str, exc: BaseException) -> None:
        reason = str(exc) if isinstance(exc, SlimvecError) else f"{type(exc).__name__}: {exc}"
        log.warning("skipped %s on %s: %s", what, ds.name, reason)
        self.skipped.append({"dataset": ds.name, "config": what, "reason": reason})

    # ---------------------------------------------------------------- reducers
    def fit(self, ds: BenchDataset, spec: str, folder: Path) -> _Reduced:
        from slimvec.reducers import make_reducer

        reducer = make_reducer(spec)
        if getattr(reducer, "learns_from_pairs", False) and ds.train_vectors is not None:
            X, pairs = ds.train_vectors, ds.train_pairs
        else:
            on_train = self.cfg.fit_on == "train" and spec.strip().lower() != "none"  # none fits nothing
            if on_train and ds.train_vectors is None:
                raise ConfigError(f"fit_on = 'train' needs training sentences: give --train-pairs "
                                  f"(dataset {ds.name} has none).")
            X, pairs = (ds.train_vectors if on_train else ds.corpus), None
            if len(X) > self.cfg.fit_max:
                rng = np.random.default_rng(self.cfg.seed)
                X = X[np.sort(rng.choice(len(X), self.cfg.fit_max, replace=False))]
        t0 = time.perf_counter()
        reducer.fit(X, pairs=pairs)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        Z = reducer.transform(ds.corpus)
        per_10k = (time.perf_counter() - t0) / max(len(ds.corpus), 1) * 10000
        Q = reducer.transform_query(ds.queries)  # leanvec: its query side
        facts: dict[str, Any] = {"fit_s": fit_s, "transform_s_per_10k": per_10k, "reducer_bytes": None}
        try:
            facts["reducer_bytes"] = _allocated(Path(reducer.save(folder / "reducer")))
        except SlimvecError as exc:  # e.g. umap: no pickle-free artifact; measured anyway
            self._skip(ds, f"{spec} artifact (reducer_bytes is null)", exc)
        if ds.sts_file is not None:
            a, b, gold = ds.sts[ds.sts_file]
            facts["sts_spearman"] = sts_spearman(Z, a, b, gold)
        if getattr(reducer, "has_clusters", False):
            facts["cluster_accuracy"] = cluster_accuracy(reducer.predict_cluster(ds.corpus), ds.dup_pairs)
        return _Reduced(spec, reducer, Z, Q, facts)

    # ---------------------------------------------------------------- stores
    def build(self, spec: str, vectors: np.ndarray, metric: str, folder: Path) -> tuple[float, int, int | None]:
        """Build ``spec`` on ``vectors`` in ``folder`` with the build threads; returns build seconds,
        allocated bytes and the store's fixed bytes (the build's peak RSS growth, when measured,
        is left in ``self.build_rss``)."""
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        _set_threads(self.cfg.build_threads or os.cpu_count() or 1)
        self.build_rss = None
        rss0 = _reset_peak_rss() if self.cfg.measure_rss else None
        try:
            build_s = self._build(spec, vectors, metric, folder)
        finally:
            _set_threads(self.cfg.threads)
        if rss0 is not None:
            peak = _status_bytes("VmHWM")
            self.build_rss = max(peak - rss0, 0) if peak is not None else None
        return build_s, _allocated(folder / "store"), _store_fixed_bytes(folder / "store")

    @staticmethod
    def _build(spec: str, vectors: np.ndarray, metric: str, folder: Path) -> float:
        from slimvec.connectors import make_store

        t0 = time.perf_counter()
        store = make_store(spec, folder / "store")
        store.create(vectors.shape[1], metric)
        ids = np.arange(1, len(vectors) + 1, dtype=np.int64)
        for start in range(0, len(vectors), 4096):
            store.upsert(ids[start:start + 4096], vectors[start:start + 4096])
        store.finalize()
        store.flush()
        store.close()
        return time.perf_counter() - t0

    def measure_store(self, ds: BenchDataset, red: _Reduced, variant: StoreVariant, folder: Path,
                      full: FullVectors | None, kind: str) -> None:
        """Build ``variant.spec`` on the reduced corpus, reopen it, and add one row per search
        setting × rescore multiplier (``full``: the :class:`FullVectors` that re-rank, or None)."""
        from slimvec.connectors import make_store

        k = self.cfg.k
        build_s, index_bytes, store_fixed = self.build(variant.spec, red.corpus, ds.metric, folder)
        memory: dict[str, Any] = {}
        if self.cfg.measure_rss:
            from slimvec.planner.sizing import measure_open_rss

            memory["build_rss_bytes"] = self.build_rss
            try:
                memory["serve_rss_bytes"] = measure_open_rss(variant.spec, folder / "store",
                                                             red.corpus.shape[1], red.queries)["rss_delta"]
            except SlimvecError as exc:
                self._skip(ds, f"{red.spec} → {variant.spec} serving memory", exc)
        store = make_store(variant.spec, folder / "store").open()
        rescores: list[int | None] = [None] + (list(self.cfg.rescore) if full is not None else [])
        try:
            for label, params in variant.searches:
                # the product's search path (Index.search): reducer's query side, store, re-rank
                under_test = IndexUnderTest(store, red.reducer, full, dict(params))
                for R in rescores:
                    # k + 1 results (a query finds itself); k x R candidates plus that one
                    n_cand = k * R + 1 if R else None

                    def search(fq: np.ndarray, n_cand: int | None = n_cand,
                               under_test: IndexUnderTest = under_test) -> np.ndarray:
                        return _rows_of(under_test.search(fq, k + 1, n_cand).ids)

                    row = _base_row(ds, red.spec, red.corpus.shape[1], label, kind, k)
                    row.update(red.facts)
                    row.update(self._store_facts(build_s, index_bytes, len(ds.corpus), store_fixed,
                                                 red.facts.get("reducer_bytes")))
                    row.update(ds.quality(search(ds.queries), k))
                    row.update(memory)
                    row.rescore = R
                    row.reranked, row.rerank_depth = rerank_of(R, label)
                    if R:
                        row.full_bytes_per_vector = float(ds.dim * 4)
                    row.update(time_single(lambda i: search(ds.queries[i:i + 1]), len(ds.queries),
                                           self.cfg.latency_queries, self.cfg.latency_repeats))
                    row.qps = _time_batch(search, ds.queries)
                    self.rows.append(row)
        finally:
            store.close()

    @staticmethod
    def _store_facts(build_s: float, index_bytes: int, n: int, store_fixed: int | None = None,
                     reducer_bytes: int | None = None) -> dict[str, Any]:
        """Build time and bytes; with the store's fixed part known, bytes split into the fixed
        part (store's trained parts + the reducer artifact) and the cost of each further vector."""
        facts: dict[str, Any] = {"build_s": build_s, "index_bytes": index_bytes,
                                 "bytes_per_vector": index_bytes / max(n, 1)}
        if store_fixed is not None:
            facts["fixed_bytes"] = int(store_fixed + (reducer_bytes or 0))
            facts["per_vector_bytes"] = max(index_bytes - store_fixed, 0) / max(n, 1)
        return facts

    # ---------------------------------------------------------------- peers
    def measure_st(self, ds: BenchDataset, label: str, precision: str, R: int | None,
                   folder: Path) -> None:
        k = self.cfg.k
        t0 = time.perf_counter()
        index = STQuantIndex(precision, ds.corpus, folder)
        build_s = time.perf_counter() - t0
        index_bytes = sum(_allocated(p) for p in index.searchable_files())

        def search(q: np.ndarray) -> np.ndarray:
            return index.search(q, k + 1, rescore=R)

        row = _base_row(ds, "none", ds.dim, label, "peer", k)
        row.update(self._store_facts(build_s, index_bytes, len(ds.corpus)))
        row.update(ds.quality(search(ds.queries), k))
        row.rescore = R
        row.reranked, row.rerank_depth = rerank_of(R, label)  # re-ranked from the int8 vectors
        if R:
            row.full_bytes_per_vector = float(ds.dim)  # the int8 vectors read for rescoring
        row.update(time_single(lambda i: search(ds.queries[i:i + 1]), len(ds.queries),
                                self.cfg.latency_queries, self.cfg.latency_repeats))
        row.qps = _time_batch(search, ds.queries)
        if ds.sts_file is not None:
            a, b, gold = ds.sts[ds.sts_file]
            row.sts_spearman = sts_spearman(np.asarray(index.int8, dtype=np.float32), a, b, gold) \
                if precision == "int8" else None
        self.rows.append(row)

    # ---------------------------------------------------------------- clusters
    def measure_routed(self, ds: BenchDataset, red: _Reduced) -> None:
        import faiss

        K = int(self.cfg.kmeans or 0)
        Z, Q = red.corpus, red.queries
        sources: list[tuple[str, np.ndarray, np.ndarray]] = []
        km = faiss.Kmeans(Z.shape[1], K, niter=20, seed=self.cfg.seed + 1,
                          spherical=ds.metric == "cosine", verbose=False)
        from slimvec.ui import quiet_faiss

        with quiet_faiss():  # its clustering warnings are counted, not printed
            km.train(np.ascontiguousarray(Z, dtype=np.float32))
        labels = km.index.search(np.ascontiguousarray(Z, dtype=np.float32), 1)[1][:, 0]
        cent = np.asarray(km.centroids, dtype=np.float32)
        sources.append((f"kmeans:{K}", labels, Q @ cent.T))
        if getattr(red.reducer, "has_clusters", False) and hasattr(red.reducer, "cluster_scores"):
            sources.append((f"head:{getattr(red.reducer, 'clusters', '?')}",
                            red.reducer.predict_cluster(ds.corpus),
                            red.reducer.cluster_scores(ds.queries)))
        for name, labels, qscores in sources:
            acc = cluster_accuracy(labels, ds.dup_pairs)
            balance = cluster_balance(labels)
            for p in self.cfg.route_probes:
                p = min(int(p), qscores.shape[1])
                qc = np.argsort(-qscores, axis=1)[:, :p]
                found, frac = routed_search(Z, labels, Q, qc, self.cfg.k, exclude=ds.query_rows,
                                            metric=ds.metric)
                row = _base_row(ds, red.spec, Z.shape[1], f"{name},p={p}", "routed", self.cfg.k)
                row.update(cluster_accuracy=acc, routed_recall_at_k=recall_at_k(found, ds.truth, self.cfg.k),
                           routed_fraction_scanned=frac, **balance)
                row.task_recall_at_k, row.task_mrr_at_k = task_recall_mrr(
                    found, ds.task_query, ds.task_target, self.cfg.k)
                self.rows.append(row)

    # ---------------------------------------------------------------- one dataset
    def run_dataset(self, ds: BenchDataset) -> None:
        cfg = self.cfg
        root = cfg.work_dir / _safe(ds.name)
        root.mkdir(parents=True, exist_ok=True)
        # the full vectors on disk, memory-mapped, re-ranking like `search(..., rescore=R)` does
        full = FullVectors.create(root / "full", ds.dim, metric=ds.metric)
        full.append(np.arange(1, len(ds.corpus) + 1), ds.corpus)
        full.commit()
        for spec in cfg.reducers:
            folder = root / _safe(spec)
            self.progress(f"{ds.name}: fit {spec}", 0)
            try:
                red = self.fit(ds, spec, folder)
            except Exception as exc:  # noqa: BLE001 - recorded and reported, the run goes on
                self._skip(ds, f"reducer {spec}", exc)
                self.progress(None, len(cfg.stores) + (1 if cfg.kmeans else 0))
                continue
            for store in cfg.stores:
                self.progress(f"{ds.name}: {spec} → {store}", 0)
                try:
                    self.measure_store(ds, red, StoreVariant(store), folder / _safe(store),
                                       full if spec != "none" or lossy(store) else None, "reducer")
                except Exception as exc:  # noqa: BLE001
                    self._skip(ds, f"{spec} → {store}", exc)
                self._cleanup(folder / _safe(store))
                self.progress(None, 1)
            if cfg.kmeans:
                self.progress(f"{ds.name}: {spec} cluster routing", 0)
                try:
                    self.measure_routed(ds, red)
                except Exception as exc:  # noqa: BLE001
                    self._skip(ds, f"{spec} cluster routing", exc)
                self.progress(None, 1)
        if cfg.baselines:
            none = next((r for r in self.rows if r.dataset == ds.name and r.reducer == "none"), None)
            base = _Reduced("none", None, ds.corpus, ds.queries,
                            {k: none.get(k) for k in ("fit_s", "transform_s_per_10k", "reducer_bytes",
                                                      "sts_spearman")} if none else {})
            for variant in cfg._peer_variants(ds.dim):
                if variant.spec in cfg.stores:  # already measured as a --store of the none row
                    self.progress(None, 1)
                    continue
                self.progress(f"{ds.name}: peer {variant.spec}", 0)
                try:
                    self.measure_store(ds, base, variant, root / "peers" / _safe(variant.spec),
                                       full if cfg.rescore_peers and variant.rescorable else None, "peer")
                except Exception as exc:  # noqa: BLE001
                    self._skip(ds, f"peer {variant.spec}", exc)
                self._cleanup(root / "peers" / _safe(variant.spec))
                self.progress(None, 1)
            for label, precision, R in cfg._st_variants():
                self.progress(f"{ds.name}: peer {label}{' +rescore' if R else ''}", 0)
                try:
                    self.measure_st(ds, label, precision, R, root / "peers" / _safe(f"{label}-{R}"))
                except Exception as exc:  # noqa: BLE001
                    self._skip(ds, f"peer {label}", exc)
                self.progress(None, 1)
        if cfg.filtered:
            from slimvec.benchmarks.filtered import measure_filtered

            self.rows += measure_filtered(self, ds, root)
        if cfg.index_recipes:
            from slimvec.benchmarks.recipes import measure_recipes

            self.rows += measure_recipes(self, ds, root)
        full.close()
        if not cfg.keep_indexes:
            shutil.rmtree(root, ignore_errors=True)

    def _cleanup(self, folder: Path) -> None:
        if not self.cfg.keep_indexes:
            shutil.rmtree(folder, ignore_errors=True)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]


def _set_threads(n: int) -> None:
    try:
        import faiss

        faiss.omp_set_num_threads(n)
    except ImportError:  # pragma: no cover - a declared dependency
        pass
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass


def run_bench(datasets: Sequence[BenchDataset], config: BenchConfig,
              progress: Progress | None = None) -> tuple[list[Row], dict[str, Any]]:
    """Measure every configuration on every dataset.

    Parameters
    ----------
    datasets : sequence of BenchDataset
    config : BenchConfig
    progress : callable, optional
        ``progress(description, 0)`` before each unit of work and ``progress(None, n)`` when n units
        are finished (``config.n_steps`` in all).

    Returns
    -------
    rows : list of Row
        One row per dataset × reducer × store (× rescore); :meth:`Row.to_json` gives
        :data:`ROW_KEYS`.
    meta : dict
        ``skipped`` configurations with reasons, datasets' summaries, the config.
    """
    from slimvec.benchmarks.record import MachineFacts

    config.validate()
    machine = MachineFacts()  # load and other processes' CPU around the run: quiet or not
    _set_threads(config.threads)
    config.work_dir.mkdir(parents=True, exist_ok=True)
    runner = _Runner(config, progress)
    for ds in datasets:
        runner.run_dataset(ds)
    machine.finish()
    meta = {
        "skipped": runner.skipped,
        "datasets": [ds.summary() for ds in datasets],
        "config": {"reducers": config.reducers, "stores": config.stores, "baselines": config.baselines,
                   "rescore": list(config.rescore), "kmeans": config.kmeans,
                   "route_probes": list(config.route_probes), "k": config.k,
                   "latency_queries": config.latency_queries, "threads": config.threads,
                   "build_threads": config.build_threads or os.cpu_count(), "peers": config.peers,
                   "rescore_peers": config.rescore_peers,
                   "filtered": list(config.filtered), "filter_recipes": list(config.filter_recipes),
                   "index_recipes": list(config.index_recipes),
                   "measure_rss": config.measure_rss,
                   "fit_max": config.fit_max, "fit_on": config.fit_on, "seed": config.seed},
        "machine": machine.to_json(),
    }
    return runner.rows, meta


def write_results(rows: Sequence[Row], meta: dict[str, Any], out_dir: str | Path) -> Path:
    """Write ``results.json`` (``{"rows": [...], "meta": {...}}``) atomically into ``out_dir``."""
    return save_rows(rows, meta, out_dir)
