"""Analysis of benchmark rows shared by the report, the plots and the HTML page: numbers, labels,
Pareto fronts and budget picks, over :class:`~slimvec.planner.rows.Row` objects (a metric
chosen at run time is read by name through ``row.get``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

# the row readers live in planner/rows.py (ranking.py reads rows too and analysis imports ranking: one
# home below both, no cycle); imported here for the callers that know them from this module
from slimvec.planner.rows import Row, budget_ladder, finite, num, row_k

__all__ = ["NULL", "num", "format_value", "human_bytes", "config_label", "short_faiss", "rescore_suffix", "pareto_front",
           "budget_ladder", "best_per_budget", "quality_metric", "by_dataset", "row_k", "finite"]

#: how a null (not applicable) metric is printed
NULL = "—"

def format_value(value: Any, decimals: int = 3) -> str:
    """Print a table cell: null/NaN as "—", floats with ``decimals``, integers with thousands
    separators when ``decimals`` is 0."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return NULL
        if decimals == 0:
            return f"{int(round(value)):,}"
        return f"{value:.{decimals}f}"
    return str(value)


def human_bytes(n: float | None) -> str:
    """``1536`` -> ``1.5 KiB``; None -> "—"."""
    if n is None:
        return NULL
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - loop always returns


def rescore_suffix(row: Row) -> str:
    """`` +rescore×R`` for rows re-ranked from ``k × R`` candidates (`` +rescore`` without R)."""
    value = row.rescore
    if not value:
        return ""
    return f" +rescore×{value}" if isinstance(value, int) and not isinstance(value, bool) else " +rescore"


def short_faiss(text: str) -> str:
    """``text`` without the ``faiss:`` prefix every FAISS factory string repeats and without
    build-only ``,train_size=N`` (tables that show search configurations)."""
    return re.sub(r",train_size=\d+", "", text).replace("faiss:", "")


def config_label(row: Row) -> str:
    """``pca:96 → faiss:HNSW32`` (with ``+rescore`` when the row was rescored)."""
    return f"{row.reducer or '?'} → {row.store or '?'}{rescore_suffix(row)}"


def pareto_front(rows: Iterable[Row], x: str = "bytes_per_vector",
                 y: str = "task_recall_at_k") -> list[Any]:
    """Rows not dominated by another: no other row has ``x`` <= and ``y`` >= with one strict.

    Smaller ``x`` (bytes) and larger ``y`` (quality) are better; rows where either is null are
    left out. The front is returned sorted by ``x`` ascending (and so ``y`` strictly ascending).
    """
    usable = [r for r in rows if num(r, x) is not None and num(r, y) is not None]
    usable.sort(key=lambda r: (num(r, x), -num(r, y)))  # type: ignore[operator]
    front: list[Any] = []
    best = -math.inf
    for r in usable:
        value = num(r, y)
        assert value is not None
        if value > best:
            front.append(r)
            best = value
    return front


def best_per_budget(rows: Sequence[Row], budgets: Sequence[float], metric: str = "task_recall_at_k",
                    key: str = "bytes_per_vector") -> list[tuple[float, Any]]:
    """For each budget, the best row by ``metric`` among rows with ``key`` <= budget that
    ``slimvec ingest`` can build (:func:`slimvec.planner.ranking.buildable`), ranked by
    :func:`slimvec.planner.ranking.rank_key` (the rule plan and tune use): highest ``metric``,
    ties to the smaller ``key``. ``None`` when no row fits the budget (or none has the metric).
    """
    from slimvec.planner.ranking import buildable, rank_key

    out: list[tuple[float, Any]] = []
    usable = [r for r in rows if num(r, metric) is not None and num(r, key) is not None and buildable(r)[0]]
    for budget in budgets:
        fitting = [r for r in usable if num(r, key) <= budget]  # type: ignore[operator]
        best = min(fitting, key=lambda r: rank_key(True, num(r, metric), num(r, key)), default=None)
        out.append((budget, best))
    return out


def quality_metric(rows: Sequence[Row]) -> str:
    """The metric rows are ranked by: task recall@k when it can tell the rows apart, else the
    next that can (:func:`slimvec.planner.ranking.ranking_metric`: a saturated metric, or
    one on too few positives, is not used)."""
    from slimvec.planner.ranking import ranking_metric

    if not any(num(r, "task_recall_at_k") is not None for r in rows):
        return "neighbor_recall_at_k"
    return ranking_metric(rows, "task_recall_at_k")[0]


def by_dataset(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Rows grouped by dataset name, in first-seen order."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(str(r.dataset or "dataset"), []).append(r)
    return groups
