"""The one ranking rule of slimvec's decisions: bench's ``report.md``, ``report.html``'s planner,
``slimvec plan`` and ``slimvec tune`` all rank configurations here, so they recommend the same
configuration for the same target and budget (issue 27).

Three parts::

    checks = check_metrics(rows)            # can each quality metric tell the rows apart?
    metric = ranking_metric(rows, "task_recall_at_k")   # the requested one, or the next that can
    ok, why = buildable(row)                # can `slimvec ingest` build it with one command?
    ingest_command(row)                     # slimvec ingest DOCS --index INDEX --recipe '...'
    sorted(cands, key=lambda c: rank_key(c.meets, c.quality, c.ram, floor=0.95))

A metric **cannot discriminate** when it is saturated (at least half the rows measure
:data:`SATURATED` or more, or at least half lie within one standard error of the best row, so
the order among them is noise) or when it rests on too few positives (fewer than
:data:`MIN_POSITIVES` queries). Such a metric is flagged in every output and not used to rank.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slimvec.errors import ConfigError, SlimvecError

__all__ = ["footing", "equal_footing", "footing_fronts", "FootingPick", "RERANKED", "NOT_RERANKED", "MetricCheck", "check_metric", "check_metrics", "ranking_metric", "buildable", "row_recipe",
           "ingest_command", "rank_key", "SATURATED", "MIN_POSITIVES", "RANKABLE_METRICS"]

#: a recall at or above this is "at the ceiling" (1.000 on 30 of 36 STS-B dev rows, issue 27)
SATURATED = 0.99
#: fewer queries (positives) than this cannot rank configurations
MIN_POSITIVES = 50
#: the metrics tried, in order, when the requested one cannot discriminate
RANKABLE_METRICS = ("task_recall_at_k", "neighbor_recall_at_k", "task_mrr_at_k")

def _value(row: Any, metric: str) -> float | None:
    from slimvec.planner.rows import num

    return num(row, metric)


@dataclass
class MetricCheck:
    """Whether a metric can rank the rows.

    Attributes
    ----------
    metric : str
    usable : bool
        False when saturated or based on too few positives (or no row has it).
    reason : str
        Why not (empty when usable), with the counts: ``saturated: 30 of 36 rows >= 0.99``.
    n_rows : int
        Rows with a value.
    """

    metric: str
    usable: bool
    reason: str
    n_rows: int

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "usable": self.usable, "reason": self.reason, "n_rows": self.n_rows}


def _scored(row: Any, metric: str) -> int:
    """Binary outcomes behind one row's metric (its standard error's n)."""
    from slimvec.planner.rows import num, row_k

    n = int(num(row, "n_queries") or 0)
    return n * row_k(row) if metric.startswith("neighbor") else n


def check_metric(rows: Sequence[Any], metric: str) -> MetricCheck:
    """Can ``metric`` tell the ``rows`` apart? See the module docstring for the rule."""
    pairs = [(v, r) for r in rows if (v := _value(r, metric)) is not None]
    n = len(pairs)
    if n == 0:
        return MetricCheck(metric, False, "no row measures it", 0)
    if n < 2:
        return MetricCheck(metric, True, "", n)
    positives = [int(_value(r, "n_queries") or 0) for _, r in pairs]
    if metric.startswith("task") and positives and max(positives) and max(positives) < MIN_POSITIVES:
        return MetricCheck(metric, False, f"too few positives: {max(positives)} queries "
                           f"(< {MIN_POSITIVES})", n)
    at_top = sum(v >= SATURATED for v, _ in pairs)
    if metric != "task_mrr_at_k" and 2 * at_top >= n:
        return MetricCheck(metric, False, f"saturated: {at_top} of {n} rows >= {SATURATED}", n)
    best_v, best_r = max(pairs, key=lambda p: p[0])
    scored = _scored(best_r, metric)
    if scored > 0 and 0.0 <= best_v <= 1.0:
        se = math.sqrt(max(best_v * (1.0 - best_v), 1e-12) / scored)
        close = sum(best_v - v <= se for v, _ in pairs)
        if 2 * close >= n:
            return MetricCheck(metric, False, f"cannot discriminate: {close} of {n} rows within one "
                               f"standard error ({se:.4f}) of the best {best_v:.4f}", n)
    return MetricCheck(metric, True, "", n)


def check_metrics(rows: Sequence[Any]) -> dict[str, MetricCheck]:
    """:func:`check_metric` for each of :data:`RANKABLE_METRICS`."""
    return {m: check_metric(rows, m) for m in RANKABLE_METRICS}


def ranking_metric(rows: Sequence[Any], preferred: str | None = None) -> tuple[str, list[MetricCheck]]:
    """The metric to rank by: ``preferred`` (default task recall) when it can discriminate, else
    the first of :data:`RANKABLE_METRICS` that can; with the checks of those passed over (to print).
    When none can, ``preferred`` is kept and every check is returned."""
    order = [preferred] if preferred else []
    order += [m for m in RANKABLE_METRICS if m not in order]
    flagged: list[MetricCheck] = []
    for m in order:
        c = check_metric(rows, m)
        if c.usable:
            return m, flagged
        if c.n_rows:
            flagged.append(c)
    return (order[0] if order else RANKABLE_METRICS[0]), flagged


def _get(row: Any, key: str) -> Any:
    if isinstance(row, Mapping) or hasattr(row, "get"):
        return row.get(key)
    return getattr(row, key, None)


def row_recipe(row: Any) -> str:
    """The recipe string of a row or candidate (``pca:96|hnsw|rescore=8``).

    Raises
    ------
    ConfigError
        Not buildable (see :func:`buildable`).
    """
    from slimvec.recipe import Recipe, parse_recipe

    ok, why = buildable(row)
    if not ok:
        raise ConfigError(f"{_get(row, 'reducer')} → {_get(row, 'store')}: {why}")
    rescore = _get(row, "rescore")
    depth = int(rescore) if rescore and not isinstance(rescore, bool) else (4 if rescore else None)
    recipe = _get(row, "recipe")
    if isinstance(recipe, str) and recipe:
        return recipe
    if "|" in str(_get(row, "store")):  # a recipe row of slimvec bench: its recipe at its depth
        base = parse_recipe(str(_get(row, "store")))
        return str(base.with_depth(depth) if depth and base.rescore is not None else base)
    return str(Recipe(str(_get(row, "reducer") or "none"), str(_get(row, "store")), depth))


def buildable(row: Any) -> tuple[bool, str]:
    """Can ``slimvec ingest ... --recipe ...`` build this configuration? ``(True, "")`` or
    ``(False, why)``: peer labels that are not stores (``st:binary``), cluster-routed rows,
    reducers without an artifact (UMAP), specs a recipe does not accept."""
    from slimvec.recipe import Recipe, parse_recipe
    from slimvec.reducers import make_reducer

    kind = str(_get(row, "kind") or "")
    reducer = str(_get(row, "reducer") or "none")
    store = str(_get(row, "store") or "")
    if kind == "routed":
        return False, "cluster-routed retrieval is measured, not built by slimvec ingest"
    if store.startswith("st:"):
        return False, (f"{store} is sentence-transformers quantization measured as a peer, not a "
                       "store slimvec ingest builds")
    try:
        if reducer != "none" and not getattr(type(make_reducer(reducer)), "persistable", True):
            return False, f"{reducer} cannot be saved (no artifact), so no index can keep it"
        rescore = _get(row, "rescore")
        if "|" in store:  # a recipe row: its recipe is what ingest builds
            store = parse_recipe(store).store
        Recipe(reducer, store, int(rescore) if rescore and not isinstance(rescore, bool) else None)
    except (SlimvecError, ValueError, TypeError) as exc:
        return False, f"not a recipe slimvec ingest takes: {exc}"
    return True, ""


def ingest_command(row: Any, docs: str = "DOCS.jsonl", index: str = "INDEX") -> str:
    """The one command that builds ``row``: ``slimvec ingest DOCS.jsonl --index INDEX --recipe '...'``."""
    return f"slimvec ingest {docs} --index {index} --recipe {shlex.quote(row_recipe(row))}"


def rank_key(meets: bool, quality: float | None, cost: float | None, *, floor: float | None = None,
             buildable: bool = True, tiebreak: float | None = None) -> tuple:
    """Sort key of the one ranking rule (ascending = better).

    Buildable configurations first; then those meeting the target. Under a quality floor the
    ones meeting it go smallest ``cost`` (RAM, bytes) first, best quality next; without a
    floor (a budget alone, or a budget per row) best quality first, smallest cost next. Missing
    the target: under a floor closest quality first, else smallest cost first. ``tiebreak``
    (e.g. p50 latency) orders what is still equal. An unknown quality ranks as the worst.
    """
    q = quality if quality is not None and math.isfinite(quality) else -1.0
    c = cost if cost is not None and math.isfinite(cost) else math.inf
    t = tiebreak if tiebreak is not None else 0.0
    if meets:
        body = (c, -q, t) if floor is not None else (-q, c, t)
    else:
        body = (-q, c, t) if floor is not None else (c, -q, t)
    return (0 if buildable else 1, 0 if meets else 1) + body


#: the two footings rows are compared on (issue 28: a re-ranked recipe against re-ranked peers)
RERANKED, NOT_RERANKED = "re-ranked", "not re-ranked"


def footing(row: Any) -> str:
    """:data:`RERANKED` when the row's candidates were re-ranked by higher-precision vectors
    (its ``reranked`` flag; derived from ``rescore`` and the store label for older rows), else
    :data:`NOT_RERANKED`."""
    from slimvec.planner.rows import rerank_of

    flag = _get(row, "reranked")
    if flag is None:
        flag = rerank_of(_get(row, "rescore"), _get(row, "store"))[0]
    return RERANKED if flag else NOT_RERANKED


def equal_footing(rows: Sequence[Any]) -> dict[str, list[Any]]:
    """Rows grouped by :func:`footing` (not re-ranked first), cluster-routed rows left out (they
    are not searched through a store). Fronts and per-budget picks are computed within a group,
    never across: a re-ranked row is never ranked against rows that were not re-ranked."""
    groups: dict[str, list[Any]] = {NOT_RERANKED: [], RERANKED: []}
    for r in rows:
        if str(_get(r, "kind") or "") != "routed":
            groups[footing(r)].append(r)
    return {name: group for name, group in groups.items() if group}


@dataclass
class FootingPick:
    """The best row within a bytes/vector budget on one footing, and the best peer beside it.

    Attributes
    ----------
    footing : str
        :data:`RERANKED` or :data:`NOT_RERANKED`.
    budget : float
    best : row or None
        Best buildable row of this footing within the budget (any kind).
    best_recipe : row or None
        Best reducer row (a recipe) of this footing within the budget.
    best_peer : row or None
        Best peer of this footing within the budget; None when no peer was measured on this
        footing (then the recipe is not said to beat a peer).
    """

    footing: str
    budget: float
    best: Any
    best_recipe: Any
    best_peer: Any


def footing_fronts(rows: Sequence[Any], metric: str, budgets: Sequence[float] | None = None,
                   key: str = "bytes_per_vector") -> list[FootingPick]:
    """Per footing (:func:`equal_footing`) and per budget (``budgets``; default the powers of two
    of :func:`slimvec.planner.rows.budget_ladder`), the best row, the best recipe and
    the best peer by ``metric`` (:func:`rank_key`: highest quality, then fewest bytes), each
    taken only from rows of that footing. Peers are rows of kind ``peer``; recipes are the
    others (the reducer rows, ``none`` included) and must be buildable, peers need not be."""
    from slimvec.planner.rows import budget_ladder, num

    def best_of(cands: list[Any], budget: float) -> Any:
        fitting = [r for r in cands if num(r, key) is not None and num(r, metric) is not None
                   and num(r, key) <= budget]  # type: ignore[operator]
        return min(fitting, key=lambda r: rank_key(True, num(r, metric), num(r, key)), default=None)

    out: list[FootingPick] = []
    for name, group in equal_footing(rows).items():
        peers = [r for r in group if str(_get(r, "kind") or "") == "peer"]
        recipes = [r for r in group if str(_get(r, "kind") or "") != "peer" and buildable(r)[0]]
        usable = [r for r in group if buildable(r)[0]]
        for budget in (budget_ladder(rows, key) if budgets is None else budgets):
            out.append(FootingPick(name, float(budget), best_of(usable, budget),
                                   best_of(recipes, budget), best_of(peers, budget)))
    return out
