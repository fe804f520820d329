"""Capacity planning: which reducer × store meets a quality target or a memory budget at N documents.

Quality comes from measured benchmark rows (``results.json`` of ``slimvec bench``, or a quick
sweep on a sample of the user's data, :func:`slimvec.benchmarks.sweep.quick_sweep`); size comes
from the per-store models of :mod:`slimvec.benchmarks.sizing`, fitted on real builds at small
sizes and checked at a size they were not fitted on, so every plan prints its own prediction error::

    rows, _ = load_results("out/results.json")
    plan = make_plan(1_000_000, 384, ["hnsw"], rows=rows, min_quality=0.93)
    plan.recommendations[0]   # the smallest configuration meeting task recall@10 >= 0.93
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from slimvec.benchmarks.analysis import value_of
from slimvec.benchmarks.latency import latency_at
from slimvec.benchmarks.ranking import rank_key
from slimvec.benchmarks.rows import Row
from slimvec.benchmarks.sizing import (SizeCheck, SizeModel, calibrate, check_model, rescore_bytes_per_vector,
                                       sizing_sizes, sizing_spec)
from slimvec.connectors import parse_store_spec
from slimvec.errors import ConfigError
from slimvec.ranges import check_int, check_number
from slimvec.benchmarks.analysis import finite

__all__ = ["Candidate", "Plan", "parse_bytes", "candidates_from_results", "candidates_for_recipes",
           "make_plan",
           "QUALITY_METRICS", "default_sweep_reducers"]

log = logging.getLogger(__name__)

#: metrics a plan can target (higher is better); the ``*_at_10`` names are the legacy spelling of
#: ``*_at_k`` for rows measured at k = 10 (every row the planner reads is, unless told otherwise)
QUALITY_METRICS = ("task_recall_at_k", "neighbor_recall_at_k", "task_mrr_at_k", "sts_spearman",
                   "task_recall_at_10", "neighbor_recall_at_10", "task_mrr_at_10")

_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "kb": 10**3, "m": 2**20, "mib": 2**20, "mb": 10**6,
          "g": 2**30, "gib": 2**30, "gb": 10**9, "t": 2**40, "tib": 2**40, "tb": 10**12}


def parse_bytes(text: str | int | float, what: str = "Memory budget") -> int:
    """``"2GiB"`` -> 2147483648. Binary units (KiB, MiB, GiB, TiB and bare K, M, G, T) and decimal
    ones (KB, MB, GB, TB).

    ``what`` names the value in the error (``"--node-ram"``).

    Raises
    ------
    ConfigError
        Not a positive number with a known unit (at least one byte; NaN and infinities refused).
    """
    if isinstance(text, bool):
        raise ConfigError(f"{what} {text!r}: expected a size in bytes or a number with a unit, e.g. 2GiB.")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
        if not match:
            raise ConfigError(f"{what} {text!r}: expected a number with a unit, e.g. 2GiB, 512MiB, 1.5GB.")
        value, unit = float(match.group(1)), match.group(2).lower()
    if unit not in _UNITS or not math.isfinite(value) or value * _UNITS.get(unit, 1) < 1:
        raise ConfigError(f"{what} {text!r}: expected a positive size (at least 1 byte) with one of the units "
                          "B, KiB, MiB, GiB, TiB (binary, also K/M/G/T) or KB, MB, GB, TB (decimal).")
    return int(value * _UNITS[unit])


@dataclass
class Candidate:
    """One configuration considered by the plan.

    Attributes
    ----------
    reducer, store : str
        Specs as in the results (``store`` as built for sizing).
    dim_out : int
    rescore : bool
    quality : float or None
        The target metric (the lowest over the datasets it was measured on); None when unknown.
    datasets : list of str
        Where the quality was measured.
    reducer_bytes : int
        Size of the fitted reducer artifact (from the results; 0 when unknown), counted in RAM
        (it transforms every query) and on disk.
    ram_bytes, disk_bytes : float
        Predicted at the plan's N (a rescored candidate adds its full vectors on disk and their
        id lookup in RAM, as ``slimvec tune`` counts them).
    meets_target : bool
    recipe : str or None
        The recipe this candidate stands for (``slimvec plan --recipe``).
    keep_full : str
        dtype of the full vectors a rescored candidate keeps on disk.
    """

    reducer: str
    dim_out: int
    store: str
    rescore: bool = False
    quality: float | None = None
    datasets: list[str] = field(default_factory=list)
    reducer_bytes: int = 0
    ram_bytes: float = 0.0
    disk_bytes: float = 0.0
    meets_target: bool = False
    recipe: str | None = None
    keep_full: str = "float32"
    depth: int = 0
    rank_quality: float | None = None
    rank_metric: str | None = None
    buildable: bool = True
    why_not: str = ""
    p50_ms: float | None = None
    p50_n: int | None = None
    p50_at_docs: float | None = None
    p50_note: str = ""

    @property
    def command(self) -> str | None:
        """The one command that builds this candidate (``slimvec ingest ... --recipe ...``), or
        ``None`` when ``slimvec ingest`` cannot build it (:attr:`why_not`)."""
        from slimvec.benchmarks.ranking import ingest_command

        if not self.buildable:
            return None
        return ingest_command({"reducer": self.reducer, "store": self.store, "recipe": self.recipe,
                               "rescore": self.depth or self.rescore})

    def rescore_bytes_per_vector(self, dim: int) -> tuple[int, int]:
        """(RAM, disk) bytes per vector a rescored candidate adds
        (:func:`~slimvec.benchmarks.sizing.rescore_bytes_per_vector`); (0, 0) when not rescored."""
        return rescore_bytes_per_vector(dim, self.keep_full) if self.rescore else (0, 0)

    @property
    def label(self) -> str:
        """``pca:96 → hnsw`` (``+rescore`` when rescored), or the recipe string."""
        if self.recipe is not None:
            return self.recipe
        return f"{self.reducer} → {self.store}" + (f" +rescore×{self.depth}" if self.depth
                                                   else " +rescore" if self.rescore else "")


@dataclass
class Plan:
    """The outcome of :func:`make_plan`: candidates best first, size checks and notes."""

    docs: int
    dim: int
    metric: str
    min_quality: float | None
    memory_budget: int | None
    payload_bytes: int
    candidates: list[Candidate]
    checks: list[SizeCheck]
    models: dict[str, SizeModel]
    notes: list[str]
    ranked_by: str | None = None
    flagged: list[Any] = field(default_factory=list)

    @property
    def recommendations(self) -> list[Candidate]:
        """Candidates meeting the target, best first."""
        return [c for c in self.candidates if c.meets_target]

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable plan (``slimvec plan --json``)."""
        def cand(c: Candidate) -> dict[str, Any]:
            return {"reducer": c.reducer, "dim_out": c.dim_out, "store": c.store, "rescore": c.rescore,
                    "recipe": c.recipe, "depth": c.depth, "command": c.command,
                    "why_not": c.why_not or None,
                    "p50_ms_measured": c.p50_ms, "p50_measured_at_n": c.p50_n,
                    "p50_ms_at_docs": c.p50_at_docs, "p50_note": c.p50_note,
                    **({c.rank_metric: c.rank_quality} if c.rank_metric and c.rank_metric != self.metric else {}),
                    self.metric: c.quality, "datasets": c.datasets, "reducer_bytes": c.reducer_bytes,
                    "ram_bytes": int(c.ram_bytes), "disk_bytes": int(c.disk_bytes),
                    "meets_target": c.meets_target}
        return {
            "docs": self.docs, "dim": self.dim, "metric": self.metric, "min_quality": self.min_quality,
            "memory_budget": self.memory_budget, "payload_bytes": self.payload_bytes,
            "recommendation": cand(self.recommendations[0]) if self.recommendations else None,
            "candidates": [cand(c) for c in self.candidates],
            "size_checks": [{"store": k.spec, "n": k.n, "dim": k.dim, "predicted_bytes": int(k.predicted),
                             "measured_bytes": k.measured, "error": round(k.error, 4)} for k in self.checks],
            "size_models": {k: m.to_json() for k, m in self.models.items()},
            "notes": self.notes,
            "ranked_by": self.ranked_by,
            "flagged_metrics": [f.to_json() for f in self.flagged],
        }


_num = finite  # a finite float or None


def _store_matches(row_store: str, wanted: Sequence[str]) -> bool:
    for spec in wanted:
        if ":" not in spec and "," not in spec:
            if parse_store_spec(row_store).name == parse_store_spec(spec).name:
                return True
        elif sizing_spec(row_store) == sizing_spec(spec):
            return True
    return False


def candidates_from_results(rows: Sequence[Row | dict[str, Any]], dim: int, stores: Sequence[str] = (),
                            metric: str = "task_recall_at_10",
                            notes: list[str] | None = None) -> list[Candidate]:
    """One candidate per (reducer, store, rescore) of the rows, quality the lowest over datasets.

    Rows measured with another input dimension than ``dim``, remote stores (no local size model)
    and, when ``stores`` is given, other stores are left out (and counted in ``notes``).

    Raises
    ------
    ConfigError
        Rows exist but none was measured at ``dim``, or none uses one of ``stores``.
    """
    notes = notes if notes is not None else []
    if metric not in QUALITY_METRICS:
        raise ConfigError(f"Unknown plan metric {metric!r}. Known: {', '.join(QUALITY_METRICS)}.")
    at_dim = [r for r in rows if r.get("dim_in") in (None, dim) or _num(r.get("dim_in")) == dim]
    if rows and not at_dim:
        dims = sorted({int(r["dim_in"]) for r in rows if _num(r.get("dim_in")) is not None})
        raise ConfigError(f"The results were measured with encoder dimension(s) {dims}, not --dim {dim}: "
                          "quality does not carry over between encoders. Pass the matching --dim or "
                          "bench your encoder first.")
    groups: dict[tuple[str, str, bool, int], Candidate] = {}
    skipped_remote: set[str] = set()
    for r in at_dim:
        store_text = str(r.get("store") or "")
        try:
            store = sizing_spec(store_text)
        except ConfigError:
            skipped_remote.add(store_text)
            continue
        if stores and not _store_matches(store_text, stores):
            continue
        reducer = str(r.get("reducer") or "none")
        depth = int(_num(r.get("rescore")) or 0) if not isinstance(r.get("rescore"), bool) else 0
        key = (reducer, store, bool(r.get("rescore")), depth)
        dim_out = int(_num(r.get("dim_out")) or dim)
        if key not in groups:
            from slimvec.benchmarks.ranking import buildable

            ok, why = buildable(r)
            groups[key] = Candidate(reducer, dim_out, store, bool(r.get("rescore")), depth=depth,
                                    buildable=ok, why_not=why)
        cand = groups[key]
        value = _num(value_of(r, metric))
        if value is not None:
            cand.quality = value if cand.quality is None else min(cand.quality, value)
            cand.datasets.append(str(r.get("dataset", "?")))
        cand.reducer_bytes = max(cand.reducer_bytes, int(_num(r.get("reducer_bytes")) or 0))
        p50 = _num(r.get("latency_p50_ms"))
        if p50 is not None and (cand.p50_ms is None or p50 > cand.p50_ms):  # the slowest dataset
            cand.p50_ms, cand.p50_n = p50, int(_num(r.get("n_corpus")) or 0) or None
    if skipped_remote:
        notes.append(f"no local size model for {', '.join(sorted(skipped_remote))}: left out")
    if at_dim and not groups:
        known = sorted({str(r.get("store")) for r in at_dim})
        raise ConfigError(f"No result row uses store(s) {', '.join(stores)}; the results hold {', '.join(known)}. "
                          "Bench that store or pick one of those.")
    if len({d for c in groups.values() for d in c.datasets}) > 1:
        notes.append(f"{metric} is the lowest over the datasets it was measured on")
    return list(groups.values())


def candidates_for_recipes(recipes: Sequence[Any], dim: int, rows: Sequence[Row | dict[str, Any]] = (),
                           metric: str = "neighbor_recall_at_10",
                           notes: list[str] | None = None) -> list[Candidate]:
    """One candidate per recipe (:class:`~slimvec.recipe.Recipe`), quality from ``rows``.

    A row counts for a recipe when its reducer, store (as sized) and rescoring depth are the
    recipe's; for ``rescore=auto`` the depth calibration would pick is used: per dataset, the
    smallest measured depth whose quality reaches the recipe's target, else the deepest. The
    quality is the lowest over datasets; a recipe no row measured keeps ``quality=None`` (noted).
    """
    from slimvec.recipe import AUTO_LADDER

    notes = notes if notes is not None else []
    out = []
    for rec in recipes:
        store = sizing_spec(rec.store)
        cand = Candidate(rec.reducer, rec.dim_out(dim), store, rec.rescore is not None,
                         recipe=str(rec), keep_full=rec.keep_full or "float32")
        wanted = {0} if rec.rescore is None else set(AUTO_LADDER) if rec.auto_rescore else {int(rec.rescore)}
        by_dataset: dict[str, dict[int, float]] = {}
        for r in rows:
            if str(r.get("reducer") or "none") != rec.reducer or _num(r.get("dim_in")) not in (None, dim):
                continue
            try:
                if sizing_spec(str(r.get("store") or "")) != store:
                    continue
            except ConfigError:
                continue
            depth = int(_num(r.get("rescore")) or 0)
            value = _num(value_of(r, metric))
            if depth in wanted and value is not None:
                by_dataset.setdefault(str(r.get("dataset", "?")), {})[depth] = value
            cand.reducer_bytes = max(cand.reducer_bytes, int(_num(r.get("reducer_bytes")) or 0))
        for dataset, per_depth in by_dataset.items():
            if rec.auto_rescore:
                reached = [d for d in sorted(per_depth) if per_depth[d] >= rec.target_recall]
                value = per_depth[reached[0] if reached else max(per_depth)]
            else:
                value = next(iter(per_depth.values()))
            cand.quality = value if cand.quality is None else min(cand.quality, value)
            cand.datasets.append(dataset)
        if rows and cand.quality is None:
            notes.append(f"{rec}: no result row measures it (add it with slimvec bench --recipe)")
        out.append(cand)
    return out


def _sizing_candidates(dim: int, stores: Sequence[str]) -> list[Candidate]:
    dims = [dim] + [d for d in (dim // 2, dim // 4, dim // 8) if d >= 8]
    return [Candidate("none" if d == dim else f"pca:{d}", d, sizing_spec(s)) for s in stores for d in dims]


def make_plan(docs: int, dim: int, stores: Sequence[str] = (), *,
              rows: Sequence[Row | dict[str, Any]] | None = None, min_quality: float | None = None,
              memory_budget: int | str | None = None, metric: str = "task_recall_at_10",
              payload_bytes: int = 0, calibrate_sizes: Sequence[int] = (1000, 2000),
              check_size: int | None = None, workdir: str | Path | None = None,
              models: dict[str, SizeModel] | None = None, recipes: Sequence[Any] = (),
              progress: bool = False) -> Plan:
    """Recommend reducer × store configurations for ``docs`` documents of encoder dimension ``dim``.

    Parameters
    ----------
    docs, dim : int
        Corpus size to plan for and the encoder's output dimension.
    stores : list of str
        Store specs to consider (all stores of the results when empty).
    rows : list of dict, optional
        Benchmark rows giving the quality side. Without rows the plan only sizes the full
        dimension and PCA at 1/2, 1/4, 1/8 of it, quality unknown.
    min_quality : float, optional
        Target: ``metric`` at least this. Recommendations are the smallest in RAM first.
    memory_budget : int or str, optional
        Target: predicted RAM at most this (``"2GiB"``). Alone, recommendations are the best
        quality first.
    metric : str
        One of :data:`QUALITY_METRICS`.
    payload_bytes : int
        Mean JSON payload bytes per document stored next to each vector (0: none).
    calibrate_sizes : list of int
        Corpus sizes the size models are fitted on (real builds; keep them small).
    check_size : int, optional
        Size of the held-out measurement (default twice the largest calibration size).
    models : dict, optional
        Size models already fitted (sizing spec -> :class:`SizeModel`, e.g. the ones a
        ``report.html`` embeds); a store found here is neither re-measured nor re-checked, so the
        plan repeats that page's figures exactly.
    recipes : list of Recipe, optional
        Plan exactly these recipes (:func:`candidates_for_recipes`) instead of every
        configuration of the rows; without rows they are sized only.
    progress : bool
        Show the size builds' progress (:func:`slimvec.ui.make_progress`: a bar on a terminal,
        joined to a bar already on screen; plain lines in a log).

    Raises
    ------
    ConfigError
        No target; a quality target without quality numbers; a number out of range (``docs``,
        ``dim`` >= 1, ``min_quality`` in [0, 1] ([-1, 1] for ``sts_spearman``), ``payload_bytes``
        >= 0, ``memory_budget`` at least a byte), before any size build.
    """
    docs = check_int("docs", docs, low=1)
    dim = check_int("dim", dim, low=1)
    if metric not in QUALITY_METRICS:
        raise ConfigError(f"Unknown plan metric {metric!r}. Known: {', '.join(QUALITY_METRICS)}.")
    if min_quality is not None:  # a correlation may be negative; recalls and MRR are in [0, 1]
        min_quality = check_number(f"min_quality ({metric})", min_quality,
                                   low=-1 if metric == "sts_spearman" else 0, high=1)
    payload_bytes = check_int("payload_bytes", payload_bytes, low=0)
    for size in calibrate_sizes:
        check_int("calibrate_sizes", size, low=1)
    if not calibrate_sizes:
        raise ConfigError("calibrate_sizes must name at least one corpus size, got none.")
    if check_size is not None:
        check_int("check_size", check_size, low=1)
    if min_quality is None and memory_budget is None and not recipes:
        raise ConfigError("Give a target: --min-task-recall R (a quality floor) and/or --memory-budget SIZE.")
    budget = parse_bytes(memory_budget) if memory_budget is not None else None
    notes: list[str] = []
    if recipes:
        cands = candidates_for_recipes(recipes, dim, rows or (), metric, notes)
        if not rows:
            if min_quality is not None:
                raise ConfigError(f"A {metric} target needs measured quality: pass --results FILE "
                                  "from `slimvec bench --recipe ...`, or --pairs/--vectors for a "
                                  "quick sweep on your data.")
            notes.append("quality not measured (no --results): the recipes are sized only")
    elif rows:
        cands = candidates_from_results(rows, dim, stores, metric, notes)
    else:
        if min_quality is not None:
            raise ConfigError(f"A {metric} target needs measured quality: pass --results FILE from "
                              "`slimvec bench`, or --pairs/--vectors for a quick sweep on your data.")
        if not stores:
            raise ConfigError("Without --results, name the store(s) to size with --store (e.g. --store hnsw).")
        cands = _sizing_candidates(dim, stores)
        notes.append("quality not measured (no --results): sizes only; PCA dimensions shown as options")
    if not cands:
        raise ConfigError("The results hold no usable rows to plan from.")
    ranked_by, flagged = _rank_quality(cands, rows or (), dim, stores, metric, recipes, notes)

    checks: list[SizeCheck] = []
    check_n = check_size or 2 * max(calibrate_sizes)
    pays = (payload_bytes,)
    fitted: dict[str, SizeModel] = {}
    to_fit = [spec for spec in sorted({c.store for c in cands}) if not (models and spec in models)]
    fitted.update({spec: models[spec] for spec in sorted({c.store for c in cands})
                   if models and spec in models})
    from slimvec.ui import make_progress  # the size builds are most of a bench run's report

    with make_progress(progress and bool(to_fit), unit="stores") as bar:
        task = bar.add_task("size models (real store builds)", total=len(to_fit))
        for spec in to_fit:
            bar.update(task, description=f"size model of {spec} (real builds)")
            dims_here = sorted({c.dim_out for c in cands if c.store == spec})
            fit_dims = sorted({dims_here[0], dims_here[-1]})
            sizes = sizing_sizes(spec, calibrate_sizes)
            model, _ = calibrate(spec, sizes, fit_dims, pays, workdir=workdir)
            fitted[spec] = model
            check_dim = dims_here[len(dims_here) // 2]
            checks.append(check_model(model, max(check_n, 2 * max(sizes)), check_dim,
                                      payload_bytes, workdir=workdir))
            bar.advance(task, 1)
    for c in cands:
        model = fitted[c.store]
        c.ram_bytes = model.ram_bytes(docs, c.dim_out, payload_bytes) + c.reducer_bytes  # reducer loaded to query
        c.disk_bytes = model.disk_bytes(docs, c.dim_out, payload_bytes) + c.reducer_bytes
        full_ram, full_disk = c.rescore_bytes_per_vector(dim)  # full vectors on disk, ids in RAM
        c.ram_bytes += full_ram * docs
        c.disk_bytes += full_disk * docs
        ok = True
        if min_quality is not None:
            ok = c.quality is not None and c.quality >= min_quality
        if budget is not None:
            ok = ok and c.ram_bytes <= budget
        c.meets_target = ok and c.buildable  # nothing is recommended that ingest cannot build
        c.p50_at_docs, c.p50_note = latency_at(c.store, c.p50_ms, c.p50_n, docs)

    # the one ranking rule (benchmarks.ranking.rank_key): a floor on a metric that cannot
    # discriminate still filters, but ranks nothing: the discriminating metric does, best first
    floor = min_quality if ranked_by == _alias(metric) else None
    cands.sort(key=lambda c: rank_key(c.meets_target, c.rank_quality, c.ram_bytes, floor=floor,
                                      buildable=c.buildable))
    left_out = sorted({c.label for c in cands if not c.buildable})
    if left_out:
        notes.append(f"not recommended, slimvec ingest cannot build them: {', '.join(left_out[:6])}"
                     + (f" and {len(left_out) - 6} more" if len(left_out) > 6 else ""))
    if not any(c.meets_target for c in cands):
        notes.append("no configuration meets the target; the closest are listed")
    if checks:
        worst = max(checks, key=lambda k: abs(k.error))
        notes.append(f"size models checked at n={check_n} (not fitted on): worst disk error {worst.error:+.1%} "
                     f"({worst.spec}); predictions at {docs:,} extrapolate the same linear form")
    return Plan(docs, dim, metric, min_quality, budget, payload_bytes, cands, checks, fitted, notes,
                ranked_by, flagged)


def _alias(metric: str) -> str:
    return metric.replace("_at_10", "_at_k")


def _rank_quality(cands: list[Candidate], rows: Sequence[Any], dim: int, stores: Sequence[str],
                  metric: str, recipes: Sequence[Any], notes: list[str]) -> tuple[str | None, list[Any]]:
    """Set each candidate's ranking quality: ``metric`` when it discriminates on the rows at
    ``dim`` (:func:`slimvec.benchmarks.ranking.ranking_metric`), else the first metric that
    does (noted). Returns (the metric ranked by, the checks of the metrics passed over)."""
    from slimvec.benchmarks.ranking import ranking_metric

    at_dim = [r for r in rows if _num(r.get("dim_in")) in (None, dim)]
    for c in cands:
        c.rank_quality, c.rank_metric = c.quality, _alias(metric)
    if not at_dim:
        return None, []
    ranked_by, flagged = ranking_metric(at_dim, _alias(metric))
    for check in flagged:
        notes.append(f"{check.metric} is not used for ranking: {check.reason}")
    if ranked_by == _alias(metric):
        return ranked_by, flagged
    other = (candidates_for_recipes(recipes, dim, at_dim, ranked_by) if recipes
             else candidates_from_results(at_dim, dim, stores, ranked_by))
    by_key = {(o.reducer, o.store, o.rescore, o.depth, o.recipe): o.quality for o in other}
    for c in cands:
        c.rank_quality = by_key.get((c.reducer, c.store, c.rescore, c.depth, c.recipe))
        c.rank_metric = ranked_by
    notes.append(f"ranked by {ranked_by} instead (the target on {_alias(metric)} still filters)")
    return ranked_by, flagged


def default_sweep_reducers(dim: int) -> list[str]:
    """PCA at 1/2, 1/4 and 1/8 of the encoder dimension."""
    return [f"pca:{d}" for d in (dim // 2, dim // 4, dim // 8) if d >= 8]

