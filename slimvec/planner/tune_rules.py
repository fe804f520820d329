"""The rules ``slimvec tune`` checks arguments and candidates by (issue 52 item 4: the p50
ceiling is held at ``--docs``, each candidate's rung measurements carried there by its store's
growth, :mod:`slimvec.planner.growth`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slimvec.errors import ConfigError
from slimvec.ranges import check_int, check_number

__all__ = ["DEFAULT_MAX_P50_MS", "check_args", "judge"]

#: the single-query p50 ceiling at ``--docs`` when none is given (ms): an interactive search
DEFAULT_MAX_P50_MS = 50.0


def _p50_at_docs(c: Any, docs: int) -> tuple[float | None, str]:
    """``c``'s p50 carried from its rungs to ``docs`` (None: a graph measured on one rung), and how."""
    from slimvec.planner.growth import fit_growth, growth_of
    from slimvec.planner.latency import latency_at

    form = growth_of(c.recipe.store)
    fit = fit_growth(c.points, form)
    if fit is not None:
        return max(fit.at(docs), float(c.p50_ms or 0.0)), f"{form} growth {fit.describe()}"
    n, p50 = c.points[-1]
    return latency_at(c.recipe.store, p50, n, docs)


def judge(c: Any, docs: int, min_recall: float | None, ceiling: float) -> None:
    """``c.meets``: the recall floor at the sample and the p50 ceiling at ``docs`` (refusals noted)."""
    c.p50_at_docs, how = _p50_at_docs(c, docs)
    p50 = c.p50_at_docs if c.p50_at_docs is not None else float(c.p50_ms or 0.0)
    c.meets = (min_recall is None or float(c.recall or 0.0) >= min_recall) and p50 <= ceiling
    if p50 > ceiling:
        c.note = f"refused: p50 at {docs:,} is {p50:,.1f} ms > the {ceiling:g} ms ceiling ({how})"
    elif c.p50_at_docs is None:
        c.note = f"p50 checked as measured on {c.n_sample:,} ({how})"


def check_args(docs: int, ram_budget: int | None, min_recall: float | None, max_p50_ms: float | None,
               rungs: Sequence[int], n_queries: int, k: int, seed: int, latency_queries: int,
               search: str) -> tuple:
    """The checked arguments of :func:`slimvec.planner.tune.tune` (see its Raises), in the same order."""
    docs = check_int("docs (--docs)", docs, low=1)
    if ram_budget is not None:
        ram_budget = check_int("ram_budget (--ram-budget, bytes)", ram_budget, low=1)
    if min_recall is not None:
        min_recall = check_number("min_recall (--min-recall)", min_recall, low=0, high=1)
    if max_p50_ms is not None:
        max_p50_ms = check_number("max_p50_ms (--max-p50-ms)", max_p50_ms, low=0, low_open=True)
    if not rungs:
        raise ConfigError("rungs must name at least one sample size, got none.")
    for r in rungs:
        check_int("rungs (sample sizes)", r, low=1)
    n_queries = check_int("n_queries (--queries)", n_queries, low=1)
    k = check_int("k", k, low=1)
    seed = check_int("seed (--seed)", seed, low=0)
    latency_queries = check_int("latency_queries", latency_queries, low=1)
    if search not in ("halving", "exhaustive", "auto"):
        raise ConfigError(f"search must be 'halving', 'exhaustive' or 'auto', got {search!r}.")
    if min_recall is None and ram_budget is None:
        raise ConfigError("Give a target: --min-recall R and/or --ram-budget SIZE.")
    return docs, ram_budget, min_recall, max_p50_ms, n_queries, k, seed, latency_queries
