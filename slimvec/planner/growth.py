"""Latency and recall at the target size from measured growth (issue 52 item 3).

Rows of one configuration measured at several corpus sizes of one dataset family (the shipped
runs ``realtext-minilm-100k`` / ``-300k``, ``minilm-mixture-100k`` / ``-300k`` / ``-1000k``, a
quick sweep on the user's sample) are fitted by least squares to one form per store family
(:meth:`~slimvec.connectors.base.VectorStore.search_growth`)::

    graph (HNSW):           p = a + b · ln N
    linear (flat, IVF):     p = a + b · N       (IVF at fixed nlist / nprobe scans nprobe/nlist of N)
    recall (every store):   r = a + b · ln N    (clipped to [0, 1])

and carried to the plan's N. The forms are checked, not assumed: :func:`held_out_check` fits
every configuration measured at three or more sizes on all but its largest size, predicts the
largest, and reports the errors per form. The uncertainty quoted at N is the check's largest
error, scaled by how much farther N lies beyond the largest measured size than the check's
prediction did (``ln(N / n_max) / ln(n_check / n_fit_max)``, at least 1): a stated rule, not a
confidence interval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GrowthFit", "family", "fit_growth", "held_out_check", "growth_of", "insertion_scale"]

_SIZE_SUFFIX = re.compile(r"[-_@]?\d+k?$")


def family(dataset: str) -> str:
    """``realtext-minilm-300k`` -> ``realtext-minilm``: the dataset without its size suffix."""
    return _SIZE_SUFFIX.sub("", str(dataset)) or str(dataset)


def growth_of(store: str) -> str:
    """``linear`` (a scan: flat, IVF) or ``graph`` (anything else) for a store spec."""
    from slimvec.connectors import parse_store_spec, store_class
    from slimvec.errors import SlimvecError

    try:
        if "|" in store:  # a recipe row's store is the recipe
            from slimvec.recipe import parse_recipe

            store = parse_recipe(store).store
        parsed = parse_store_spec(store)
        return str(store_class(parsed).search_growth(parsed.arg, dict(parsed.options or {})))
    except SlimvecError:
        return "graph"


@dataclass
class GrowthFit:
    """``y = a + b · f(N)`` with ``f = ln`` (graph, recall) or the identity (linear)."""

    form: str
    a: float
    b: float
    sizes: list[int]

    def at(self, n: float) -> float:
        """The fitted value at ``n``."""
        return self.a + self.b * (math.log(n) if self.form != "linear" else float(n))

    def describe(self) -> str:
        """``a + b·ln N fitted on n = 100,000, 300,000``."""
        term = "ln N" if self.form != "linear" else "N"
        return f"{self.a:.4g} + {self.b:.4g}·{term}, fitted on n = {', '.join(f'{n:,}' for n in self.sizes)}"


def fit_growth(points: Sequence[tuple[int, float]], form: str) -> GrowthFit | None:
    """Least-squares fit of ``(n, y)`` points (two or more distinct n); None with fewer."""
    pts = [(int(n), float(y)) for n, y in points if n and y is not None and math.isfinite(float(y))]
    sizes = sorted({n for n, _ in pts})
    if len(sizes) < 2:
        return None
    x = np.array([math.log(n) if form != "linear" else float(n) for n, _ in pts])
    y = np.array([v for _, v in pts])
    b, a = np.polyfit(x, y, 1)
    return GrowthFit(form, float(a), float(b), sizes)


def _config_points(rows: Sequence[Any]) -> dict[tuple, dict[int, Any]]:
    """(family, reducer, store, rescore) -> n -> row."""
    out: dict[tuple, dict[int, Any]] = {}
    for r in rows:
        n = r.get("n_corpus")
        if not n or r.get("latency_p50_ms") is None:
            continue
        key = (family(str(r.get("dataset") or "")), str(r.get("reducer") or "none"), str(r.get("store") or ""),
               r.get("rescore"))
        out.setdefault(key, {})[int(n)] = r
    return out


def held_out_check(rows: Sequence[Any]) -> dict[str, Any]:
    """Each configuration measured at three or more sizes: fitted on all but the largest, the
    largest predicted. Returns per form (``graph``, ``linear``, ``recall``) the errors (relative
    for latency, absolute for recall), their median and largest magnitude, and the sizes."""
    errors: dict[str, list[float]] = {"graph": [], "linear": [], "recall": []}
    sizes: dict[str, tuple[list[int], int]] = {}
    for (_fam, _red, store, _depth), by_n in _config_points(rows).items():
        ns = sorted(by_n)
        if len(ns) < 3 or str(store).startswith("st:"):
            continue
        fit_n, check_n = ns[:-1], ns[-1]
        form = growth_of(store)
        fit = fit_growth([(n, by_n[n]["latency_p50_ms"]) for n in fit_n], form)
        if fit is not None:
            errors[form].append(fit.at(check_n) / float(by_n[check_n]["latency_p50_ms"]) - 1)
            sizes[form] = (fit_n, check_n)
        rec = [(n, by_n[n].get("neighbor_recall_at_k")) for n in fit_n]
        rfit = fit_growth([(n, v) for n, v in rec if v is not None], "graph")
        if rfit is not None and by_n[check_n].get("neighbor_recall_at_k") is not None:
            errors["recall"].append(rfit.at(check_n) - float(by_n[check_n]["neighbor_recall_at_k"]))
            sizes["recall"] = (fit_n, check_n)
    out: dict[str, Any] = {}
    for form, errs in errors.items():
        if errs:
            fit_n, check_n = sizes[form]
            out[form] = {"configs": len(errs), "median": float(np.median(errs)),
                         "max_abs": float(np.max(np.abs(errs))), "fit_n": fit_n, "check_n": check_n}
    return out


def uncertainty(check: dict[str, Any] | None, sizes: Sequence[int], docs: int) -> float | None:
    """The relative (latency) or absolute (recall) uncertainty quoted at ``docs``: the held-out
    check's largest error, scaled by the extrapolation's reach (module docstring); None without
    a check."""
    if not check:
        return None
    reach = math.log(max(docs, max(sizes)) / max(sizes))
    checked = math.log(check["check_n"] / max(check["fit_n"])) or 1.0
    return float(check["max_abs"]) * max(1.0, reach / checked)


def carry(c: Any, docs: int, check: dict[str, Any] | None) -> None:
    """Set candidate ``c``'s p50 / p99 / quality at ``docs`` from its :attr:`points`: fitted on
    the dataset family measured at the most sizes when it has two or more, else the one-size
    rule of :func:`slimvec.planner.latency.latency_at` (and the quality as measured, noted)."""
    from slimvec.planner.latency import latency_at

    by_family: dict[str, list[tuple[int, Any, Any, Any]]] = {}
    for fam, n, p50, p99, q in c.points:
        by_family.setdefault(fam, []).append((n, p50, p99, q))
    best = max(by_family.values(), key=lambda pts: (len({p[0] for p in pts}), max(p[0] for p in pts)),
               default=[])
    form = growth_of(c.store)
    fit = fit_growth([(n, p50) for n, p50, _, _ in best if p50 is not None], form)
    if fit is None:
        c.p50_at_docs, c.p50_note = latency_at(c.store, c.p50_ms, c.p50_n, docs)
        if c.quality is not None and c.p50_n and docs > c.p50_n:
            c.quality_note = (f"measured at n = {c.p50_n:,} only: recall falls with N, bench at two "
                              "or more sizes to carry it to the plan's N")
        return
    top = max(fit.sizes)
    beyond = docs > top
    c.p50_at_docs = max(fit.at(docs), 0.0)
    p99 = fit_growth([(n, v) for n, _, v, _ in best if v is not None], form)
    c.p99_at_docs = None if p99 is None else max(p99.at(docs), 0.0)
    c.p50_uncertainty = uncertainty((check or {}).get(form), fit.sizes, docs) if beyond else None
    band = "" if c.p50_uncertainty is None else f" ±{c.p50_uncertainty:.0%} (held-out check rule)"
    c.p50_note = (f"{form} growth {fit.describe()}" + (f"; extrapolated to {docs:,}{band}" if beyond else
                                                      f"; interpolated at {docs:,}"))
    qfit = fit_growth([(n, q) for n, _, _, q in best if q is not None], "graph")
    if qfit is not None:
        c.quality_at_docs = min(max(qfit.at(docs), 0.0), 1.0)
        qu = uncertainty((check or {}).get("recall"), qfit.sizes, docs) if beyond else None
        c.quality_note = (f"quality {qfit.describe()}" + (f"; extrapolated to {docs:,}" if beyond else "")
                          + ("" if qu is None else f" ±{qu:.3f}"))


def insertion_scale(rows: Sequence[Any], store: str, measured_n: int, docs: int
                    ) -> tuple[float, str] | None:
    """How much slower than at ``measured_n`` documents a writer inserting into ``store``'s graph
    runs on average over ``docs``, from the rows' build times (``build_s``; unreduced rows of the
    same index, search options aside) at two or more sizes of one dataset family.

    The time per inserted vector is fitted as ``t(n) = a + b · ln n`` (each insert searches a
    graph of n vectors); the mean over an ingest of N is ``a + b · (ln N - 1)``. Returns (mean at
    ``measured_n`` / mean at ``docs``, at most 1, and how it was fitted), or None without such
    rows (the caller states the flat assumption instead).
    """
    from slimvec.connectors import parse_store_spec

    def index_of(text: str) -> str | None:
        try:
            if "|" in text:
                from slimvec.recipe import parse_recipe

                text = parse_recipe(text).store
            parsed = parse_store_spec(text)
        except Exception:  # noqa: BLE001 -- a store this version does not parse is not the one asked for
            return None
        return f"{parsed.name}:{parsed.arg}"

    want = index_of(store)
    by_family: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        n, build = r.get("n_corpus"), r.get("build_s")
        if (n and build and str(r.get("reducer") or "none") == "none"
                and index_of(str(r.get("store") or "")) == want):
            by_family.setdefault(family(str(r.get("dataset") or "")), []).append((int(n), float(build) / int(n)))
    best = max(by_family.values(), key=lambda pts: len({n for n, _ in pts}), default=[])
    fit = fit_growth(best, "graph")
    if fit is None:
        return None
    mean_at = lambda n: fit.a + fit.b * (math.log(n) - 1)  # noqa: E731 -- the one formula, twice
    scale = min(1.0, mean_at(measured_n) / mean_at(docs)) if mean_at(docs) > 0 else 1.0
    return scale, (f"{want} insertion time per vector {fit.a * 1e3:.4g} + {fit.b * 1e3:.4g}·ln N ms, "
                   f"fitted on the build times at n = {', '.join(f'{n:,}' for n in fit.sizes)}")
