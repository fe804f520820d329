"""The filtered-search planner's costs, measured once when an index is built (issue 51 item 3).

A filtered search either scans the matching documents' kept full vectors exactly or searches the
graph (the store's filtered search, or the unfiltered one post-filtered). Which is cheaper depends
on the machine, the store and the recipe, so the index's writer measures both once, after it
calibrates the rescoring depth, and records them in the manifest (``search_costs``,
:class:`SearchCosts`). Every search then plans from those numbers, the same way in every process:
the same index gives the same plan for the same filter in every run (before, a rule on the
calibrated depth and the byte size of a row moved between builds: 1,365 against 2,000 matches).

The model, fitted to what was measured:

- exact scan of ``m`` matches: ``scan_us_fixed + m * scan_us_per_vector`` (:meth:`FullVectors.scan`);
- graph search at a share ``s = m / N`` of the documents: ``graph_us * s ** -graph_exponent``,
  through the unfiltered search (``s = 1``) and a filtered one at ``s = 0.1`` (a graph search
  for ``k x depth`` matches visits about ``1 / s`` times the nodes, more where matches are rare).

An index without recorded costs (built before them, or with no side file to scan) plans by the
older rule, :func:`slimvec.index.lifecycle.exact_threshold`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import PersistenceError, SlimvecError

log = logging.getLogger(__name__)

__all__ = ["SearchCosts", "measure_search_costs", "cost_scan_limit", "planner_info"]

#: single-query searches timed per measured point (medians are recorded)
COST_QUERIES = 24
#: share of the documents the filtered graph search is timed at
COST_SHARE = 0.1


@dataclass(frozen=True)
class SearchCosts:
    """Per-query costs of the filtered planner's paths, in microseconds (one thread, the build's
    machine), recorded in the manifest as ``search_costs``.

    Attributes
    ----------
    scan_us_fixed, scan_us_per_vector : float
        The exact scan: a fixed part and the cost of each matching document.
    graph_us : float
        The rescored graph search, unfiltered (``k x depth`` candidates re-ranked).
    graph_exponent : float
        How the graph search grows as the share ``s`` of matches falls: ``graph_us * s ** -x``.
    k, depth, n_corpus : int
        Results, rescoring depth and documents they were measured at.
    """

    scan_us_fixed: float
    scan_us_per_vector: float
    graph_us: float
    graph_exponent: float
    k: int
    depth: int
    n_corpus: int

    @classmethod
    def from_json(cls, path: Path, raw: Any) -> SearchCosts | None:
        """The manifest's ``search_costs`` (absent: None), each value checked."""
        if raw is None:
            return None
        names = [f for f in cls.__dataclass_fields__]
        if not isinstance(raw, dict) or set(raw) != set(names):
            raise PersistenceError(f"{path}: key 'search_costs' should be an object with the keys "
                                   f"{', '.join(names)}, got {raw!r:.200}. Remove the key (searches "
                                   "then plan by the older rule) or rebuild the index.")
        for name in names:
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 \
                    or not math.isfinite(value):
                raise PersistenceError(f"{path}: key 'search_costs.{name}' should be a finite "
                                       f"number >= 0, got {value!r}. Remove the key or rebuild the index.")
        f = {n: float(raw[n]) for n in names}
        return cls(scan_us_fixed=f["scan_us_fixed"], scan_us_per_vector=f["scan_us_per_vector"],
                   graph_us=f["graph_us"], graph_exponent=f["graph_exponent"], k=int(f["k"]),
                   depth=int(f["depth"]), n_corpus=int(f["n_corpus"]))

    def scan_us(self, matches: int) -> float:
        """Estimated exact scan of ``matches`` documents."""
        return self.scan_us_fixed + self.scan_us_per_vector * max(int(matches), 0)

    def graph_search_us(self, matches: int, n_total: int) -> float:
        """Estimated graph search when ``matches`` of ``n_total`` documents match."""
        share = min(1.0, max(int(matches), 1) / max(int(n_total), 1))
        return self.graph_us * share ** -self.graph_exponent


@lru_cache(maxsize=64)
def cost_scan_limit(costs: SearchCosts, n_total: int) -> int:
    """The most matches whose exact scan is estimated no dearer than the graph search: the
    crossover of the two models, found by bisection (the scan grows with the matches, the graph
    search shrinks); cached, so a query pays a dictionary look-up."""
    lo, hi = 0, max(int(n_total), 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if costs.scan_us(mid) <= costs.graph_search_us(mid, n_total):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _medians_us(paths: list[Any], n: int) -> list[float]:
    """Median time (us) of each path over ``n`` single queries, the paths alternated query by
    query (a busy machine slows them alike), after one warm-up round (first-use allocations,
    page faults of the kept rows)."""
    times: list[list[float]] = [[] for _ in paths]
    for i in range(-1, n):
        rows = np.arange(max(i, 0), max(i, 0) + 1)
        for fn, out in zip(paths, times):
            t0 = time.perf_counter()
            fn(rows)
            if i >= 0:
                out.append(time.perf_counter() - t0)
    return [float(np.median(t) * 1e6) for t in times]


def measure_search_costs(store: Any, reducer: Any, full: Any, depth: int, k: int = 10,
                         seed: int = 0) -> SearchCosts | None:
    """Time the planner's paths on a finished index (``full``: its
    :class:`~slimvec.connectors.fullvectors.FullVectors`): :data:`COST_QUERIES` corpus vectors as
    single queries, the rescored search unfiltered and at :data:`COST_SHARE` of the documents,
    and exact scans of 256 and 4,096 of them. None when there is too little to time (fewer than
    :data:`COST_QUERIES` documents) or the store refuses a filtered search by ids."""
    from slimvec.measure import reduce_queries, rescored_search

    ids = full.ids()
    n = len(ids)
    if n < COST_QUERIES:
        return None
    rng = np.random.default_rng(seed)
    queries, _ = full.get(rng.choice(ids, COST_QUERIES, replace=False))
    reduced = reduce_queries(reducer, queries)
    width = int(k) * max(int(depth), 1)
    some = np.sort(rng.choice(ids, min(n, max(width, int(n * COST_SHARE))), replace=False))

    def graph(rows: np.ndarray, allowed: np.ndarray | None = None) -> None:
        if allowed is None:
            rescored_search(store, reduced[rows], queries[rows], k, width, full)
        else:
            full.rerank(queries[rows], store.search(reduced[rows], width, filter=allowed), k)
    small, large = min(256, n), min(4096, n)
    try:
        g1, g_share, t_small, t_large = _medians_us(
            [graph, lambda rows: graph(rows, some), lambda rows: full.scan(queries[rows], ids[:small], k),
             lambda rows: full.scan(queries[rows], ids[:large], k)], COST_QUERIES)
    except SlimvecError as exc:  # a store without a filtered search by ids
        log.info("search costs not measured: %s", exc)
        return None
    per = max(t_large - t_small, 0.0) / (large - small) if large > small else t_small / small
    share = len(some) / n
    exponent = math.log(max(g_share, g1) / g1) / -math.log(share) if share < 1 else 1.0
    return SearchCosts(scan_us_fixed=round(max(t_small - per * small, 0.0), 3),
                       scan_us_per_vector=round(per, 5), graph_us=round(g1, 3),
                       graph_exponent=round(min(exponent, 3.0), 4), k=int(k), depth=int(depth),
                       n_corpus=int(n))


def planner_info(costs: SearchCosts | None, limit: int | None, k: int = 10) -> dict[str, Any]:
    """What ``slimvec info`` shows of the planner: the recorded costs (or that the older rule
    plans) and ``limit``, the most matches scanned exactly at ``k`` results."""
    return {"costs_us": asdict(costs) if costs is not None else None,
            "planned_by": "costs recorded at build" if costs is not None else "the matches rule",
            f"exact_scan_up_to_at_k{k}": limit}
