"""Capacity planning: which reducer × store meets a quality target or a memory budget at N documents.

Quality comes from measured benchmark rows (:class:`~slimvec.planner.rows.Row`: the
``results.json`` of ``slimvec bench`` read by :func:`~slimvec.planner.rows.load_rows`, or a
quick sweep on a sample of the user's data, :func:`slimvec.benchmarks.sweep.quick_sweep`); size
comes from the per-store models of :mod:`slimvec.planner.sizing`, fitted on real builds at small
sizes and checked at a size they were not fitted on, so every plan prints its own prediction error::

    rows, _ = load_rows("out/results.json")
    plan = make_plan(1_000_000, 384, ["hnsw"], rows=rows, min_quality=0.93)
    plan.recommendations[0]   # the smallest configuration meeting task recall@k >= 0.93
    plan.k                    # the k the rows were measured at
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError
from slimvec.planner.candidates import (
    QUALITY_METRICS,
    Candidate,
    candidates_for_recipes,
    candidates_from_results,
    check_metric_name,
    rows_at_dim,
    rows_k,
    sizing_candidates,
)
from slimvec.planner.growth import carry, held_out_check
from slimvec.planner.ranking import rank_key
from slimvec.planner.rows import Row
from slimvec.planner.sizing import SizeCheck, SizeModel, calibrate, check_model, sizing_sizes
from slimvec.ranges import check_int, check_number

__all__ = ["Candidate", "Plan", "parse_bytes", "candidates_from_results", "candidates_for_recipes",
           "make_plan", "check_metric_name", "rows_k",
           "QUALITY_METRICS", "default_sweep_reducers", "size_model_cache"]

log = logging.getLogger(__name__)

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
class Plan:
    """The outcome of :func:`make_plan`: candidates best first, size checks and notes.

    ``metric`` is a row field (``task_recall_at_k``...) and ``k`` the k the rows measured it at
    (``None`` without rows, or when the rows were measured at several k, which is noted).
    """

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
    k: int | None = None
    #: the payload indexes' predicted RAM / disk at ``docs`` (:func:`~slimvec.index.filter_info.
    #: payload_index_bytes`, with ``kinds``); empty without ``--payload-index``
    payload_indexes: dict[str, Any] = field(default_factory=dict)
    #: latency / recall growth forms checked on the rows (:func:`~slimvec.planner.growth.held_out_check`)
    latency_check: dict[str, Any] = field(default_factory=dict)

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
                    "p99_ms_at_docs": c.p99_at_docs, "p50_uncertainty": c.p50_uncertainty,
                    "quality_at_docs": c.quality_at_docs, "quality_note": c.quality_note or None,
                    **({c.rank_metric: c.rank_quality} if c.rank_metric and c.rank_metric != self.metric else {}),
                    self.metric: c.quality, "datasets": c.datasets, "reducer_bytes": c.reducer_bytes,
                    "ram_bytes": int(c.ram_bytes), "disk_bytes": int(c.disk_bytes),
                    "meets_target": c.meets_target}
        return {
            "docs": self.docs, "dim": self.dim, "metric": self.metric, "k": self.k,
            "min_quality": self.min_quality,
            "memory_budget": self.memory_budget, "payload_bytes": self.payload_bytes,
            "recommendation": cand(self.recommendations[0]) if self.recommendations else None,
            "candidates": [cand(c) for c in self.candidates],
            "size_checks": [{"store": k.spec, "n": k.n, "dim": k.dim, "predicted_bytes": int(k.predicted),
                             "measured_bytes": k.measured, "error": round(k.error, 4)} for k in self.checks],
            "size_models": {k: m.to_json() for k, m in self.models.items()},
            "notes": self.notes,
            "ranked_by": self.ranked_by,
            "flagged_metrics": [f.to_json() for f in self.flagged],
            "payload_indexes": self.payload_indexes or None,
            "latency_check": self.latency_check or None,
        }


def make_plan(docs: int, dim: int, stores: Sequence[str] = (), *,
              rows: Sequence[Row] | None = None, min_quality: float | None = None,
              memory_budget: int | str | None = None, metric: str = "task_recall_at_k",
              payload_bytes: int = 0, calibrate_sizes: Sequence[int] = (1000, 2000),
              check_size: int | None = None, workdir: str | Path | None = None,
              models: dict[str, SizeModel] | None = None, recipes: Sequence[Any] = (),
              progress: bool = False, cache: str | Path | None = None,
              payload_index: dict[str, str] | None = None,
              payload_index_measured: dict[str, float] | None = None) -> Plan:
    """Recommend reducer × store configurations for ``docs`` documents of encoder dimension ``dim``.

    Parameters
    ----------
    docs, dim : int
        Corpus size to plan for and the encoder's output dimension.
    stores : list of str
        Store specs to consider (all stores of the results when empty).
    rows : list of Row, optional
        Benchmark rows giving the quality side (any k: the plan reports it as ``Plan.k``).
        Without rows the plan only sizes the full dimension and PCA at 1/2, 1/4, 1/8 of it.
    min_quality : float, optional
        Target: ``metric`` at least this. Recommendations are the smallest in RAM first.
    memory_budget : int or str, optional
        Target: predicted RAM at most this (``"2GiB"``). Alone, recommendations are the best
        quality first.
    metric : str
        One of :data:`QUALITY_METRICS` (a row field).
    payload_bytes : int
        Mean JSON payload bytes per document stored next to each vector (0: none).
    calibrate_sizes : list of int
        Corpus sizes the size models are fitted on (real builds; keep them small).
    check_size : int, optional
        Size of the held-out measurement (default twice the largest calibration size).
    models : dict, optional
        Size models already fitted (sizing spec -> :class:`SizeModel`, e.g. the ones a
        ``report.html`` embeds); a store found here is neither re-measured nor re-checked.
    recipes : list of Recipe, optional
        Plan exactly these recipes (:func:`candidates_for_recipes`) instead of every
        configuration of the rows; without rows they are sized only.
    progress : bool
        Show the size builds' progress (:func:`slimvec.ui.make_progress`).
    cache : path, optional
        A folder of size models fitted by earlier plans (:func:`size_model_cache`): a store whose
        model is there (same sizes, dimensions, payload and library versions) is not re-built;
        new fits are added to it.
    payload_index, payload_index_measured : dict, optional
        Payload indexes (field -> kind) and constants measured on the user's rows (payload_sizing).

    Raises
    ------
    ConfigError
        No target; a quality target without quality numbers; an unknown metric; a number out
        of range (``docs``, ``dim`` >= 1, ``min_quality`` in [0, 1] ([-1, 1] for
        ``sts_spearman``), ``payload_bytes`` >= 0, ``memory_budget`` at least a byte), before
        any size build.
    """
    docs, dim = check_int("docs", docs, low=1), check_int("dim", dim, low=1)
    min_quality, budget = _check_targets(metric, min_quality, memory_budget, recipes)
    payload_bytes = check_int("payload_bytes", payload_bytes, low=0)
    _check_sizes(calibrate_sizes, check_size)
    rows = list(rows or ())
    notes: list[str] = []
    cands = _plan_candidates(rows, recipes, dim, stores, metric, min_quality, notes)
    ranked_by, flagged = _rank_quality(cands, rows, dim, stores, metric, recipes, notes)
    fitted, checks = _size_models(cands, calibrate_sizes, check_size, payload_bytes, workdir, models,
                                  progress, cache, notes)
    pidx = _payload_indexes(payload_index or {}, payload_index_measured, docs, notes)
    check = held_out_check(rows)
    for c in cands:
        carry(c, docs, check)
        _price(c, fitted[c.store], docs, dim, payload_bytes, min_quality, budget, pidx)
    # the one ranking rule (benchmarks.ranking.rank_key): a floor on a metric that cannot
    # discriminate still filters, but ranks nothing: the discriminating metric does, best first
    floor = min_quality if ranked_by == metric else None
    cands.sort(key=lambda c: rank_key(c.meets_target, c.rank_quality, c.ram_bytes, floor=floor,
                                      buildable=c.buildable))
    _closing_notes(cands, checks, check_size or 2 * max(calibrate_sizes), docs, notes)
    return Plan(docs, dim, metric, min_quality, budget, payload_bytes, cands, checks, fitted, notes,
                ranked_by, flagged, k=rows_k(rows_at_dim(rows, dim)), payload_indexes=pidx,
                latency_check=check)


def _check_targets(metric: str, min_quality: float | None, memory_budget: int | str | None,
                   recipes: Sequence[Any]) -> tuple[float | None, int | None]:
    """The checked quality floor and the budget in bytes; refuses a plan without a target."""
    check_metric_name(metric)
    if min_quality is not None:  # a correlation may be negative; recalls and MRR are in [0, 1]
        min_quality = check_number(f"min_quality ({metric})", min_quality,
                                   low=-1 if metric == "sts_spearman" else 0, high=1)
    if min_quality is None and memory_budget is None and not recipes:
        raise ConfigError("Give a target: --min-task-recall R (a quality floor) and/or --memory-budget SIZE.")
    return min_quality, (parse_bytes(memory_budget) if memory_budget is not None else None)


def _check_sizes(calibrate_sizes: Sequence[int], check_size: int | None) -> None:
    for size in calibrate_sizes:
        check_int("calibrate_sizes", size, low=1)
    if not calibrate_sizes:
        raise ConfigError("calibrate_sizes must name at least one corpus size, got none.")
    if check_size is not None:
        check_int("check_size", check_size, low=1)


def _plan_candidates(rows: list[Row], recipes: Sequence[Any], dim: int, stores: Sequence[str], metric: str,
                     min_quality: float | None, notes: list[str]) -> list[Candidate]:
    """The candidates of a plan: the recipes, the rows' configurations, or sizes only."""
    what = "--results FILE from `slimvec bench`" + (" --recipe ..." if recipes else "")
    if min_quality is not None and not rows:
        raise ConfigError(f"A {metric} target needs measured quality: pass {what}, or --pairs/--vectors "
                          "for a quick sweep on your data.")
    if recipes:
        cands = candidates_for_recipes(recipes, dim, rows, metric, notes)
        if not rows:
            notes.append("quality not measured (no --results): the recipes are sized only")
    elif rows:
        cands = candidates_from_results(rows, dim, stores, metric, notes)
        rows_k(rows_at_dim(rows, dim), notes)
    else:
        if not stores:
            raise ConfigError("Without --results, name the store(s) to size with --store (e.g. --store hnsw).")
        cands = sizing_candidates(dim, stores)
        notes.append("quality not measured (no --results): sizes only; PCA dimensions shown as options")
    if not cands:
        raise ConfigError("The results hold no usable rows to plan from.")
    return cands


def size_model_cache() -> Path:
    """``$SLIMVEC_CACHE/size-models`` or ``~/.cache/slimvec/size-models``: the size models
    ``slimvec plan`` fitted, reused by the next plan (issue 40 item 5: plan answers in seconds)."""
    import os

    root = os.environ.get("SLIMVEC_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "slimvec") / "size-models"


def _cache_file(cache: Path, spec: str, sizes: Sequence[int], dims: Sequence[int], payload: int,
                check: tuple[int, int]) -> Path:
    import hashlib
    import json
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for dist in ("slimvec", "numpy", "faiss-cpu", "hnswlib", "qdrant-edge-py"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    key = json.dumps([spec, list(sizes), list(dims), payload, list(check), versions], sort_keys=True)
    return cache / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _size_models(cands: list[Candidate], calibrate_sizes: Sequence[int], check_size: int | None,
                 payload_bytes: int, workdir: str | Path | None, models: dict[str, SizeModel] | None,
                 progress: bool, cache: str | Path | None = None, notes: list[str] | None = None,
                 ) -> tuple[dict[str, SizeModel], list[SizeCheck]]:
    """A size model per store of the candidates (given ones reused, then ones in ``cache``, the
    others fitted on real builds and checked at a size they were not fitted on)."""
    from dataclasses import asdict

    from slimvec.persistence import read_json, write_json_atomic
    from slimvec.ui import make_progress  # the size builds are most of a bench run's report

    specs = sorted({c.store for c in cands})
    fitted = {spec: models[spec] for spec in specs if models and spec in models}
    checks: list[SizeCheck] = []
    check_n = check_size or 2 * max(calibrate_sizes)
    jobs = {}  # spec -> (sizes, dims, check (n, dim), cache file or None)
    for spec in (spec for spec in specs if spec not in fitted):
        dims_here = sorted({c.dim_out for c in cands if c.store == spec})
        sizes = sizing_sizes(spec, calibrate_sizes)
        dims, check = sorted({dims_here[0], dims_here[-1]}), (max(check_n, 2 * max(sizes)), dims_here[len(dims_here) // 2])
        path = _cache_file(Path(cache), spec, sizes, dims, payload_bytes, check) if cache else None
        if path is not None and path.is_file():
            data = read_json(path)
            fitted[spec] = SizeModel.from_json(data["model"])
            checks.append(SizeCheck(**data["check"]))
            continue
        jobs[spec] = (sizes, dims, check, path)
    reused = [s for s in fitted if s not in jobs and not (models and s in models)]
    if reused and notes is not None:
        notes.append(f"size models of {', '.join(reused)} reused from {cache} (fitted by an "
                     "earlier plan with the same library versions; delete the folder to re-measure)")
    with make_progress(progress and bool(jobs), unit="stores") as bar:
        builds = sum(len(sizes) * len(dims) + 1 for sizes, dims, _, _ in jobs.values())
        task = bar.add_task(f"size models of {len(jobs)} store kind(s): {builds} real builds of "
                            "1,000 to a few thousand vectors, seconds to minutes each (kept for "
                            "the next plan)" if cache else f"size models of {len(jobs)} store kind(s)",
                            total=len(jobs))
        for spec, (sizes, dims, check, path) in jobs.items():
            bar.update(task, description=f"size model of {spec} (real builds)")
            fitted[spec], _ = calibrate(spec, sizes, dims, (payload_bytes,), workdir=workdir)
            checks.append(check_model(fitted[spec], check[0], check[1], payload_bytes, workdir=workdir))
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json_atomic(path, {"model": fitted[spec].to_json(), "check": asdict(checks[-1])})
            bar.advance(task, 1)
    return fitted, checks


def _payload_indexes(fields: dict[str, str], measured: dict[str, float] | None, docs: int,
                     notes: list[str]) -> dict[str, Any]:
    """The payload indexes' figure at ``docs`` (empty without fields), noted with its source."""
    from slimvec.index.filter_info import payload_index_bytes

    if not fields:
        return {}
    got = {**payload_index_bytes(fields, docs, measured), "kinds": dict(fields), "measured": measured}
    qdrant = payload_index_bytes(fields, docs, store="qdrant-edge")
    notes.append(f"payload indexes {', '.join(f'{f}:{k}' for f, k in fields.items())}: "
                 f"{got['ram_per_point']:.0f} B/point of RAM from the first filtered search on "
                 f"(FAISS / hnswlib, {got['source']}); Qdrant stores' own: "
                 f"{qdrant['ram_per_point']:.0f} B/point ({qdrant['source']})")
    return got


def _price(c: Candidate, model: SizeModel, docs: int, dim: int, payload_bytes: int,
           min_quality: float | None, budget: int | None, pidx: dict[str, Any] | None = None) -> None:
    """Predicted RAM and disk at ``docs`` (the reducer is loaded to transform every query; a
    rescored candidate adds its full vectors on disk and their ids in RAM; every store its payload
    indexes), and the target."""
    from slimvec.index.filter_info import payload_index_bytes

    c.ram_bytes = model.ram_bytes(docs, c.dim_out, payload_bytes) + c.reducer_bytes
    c.disk_bytes = model.disk_bytes(docs, c.dim_out, payload_bytes) + c.reducer_bytes
    if pidx:
        got = payload_index_bytes(pidx["kinds"], docs, pidx["measured"], store=c.store)
        c.ram_bytes += got["ram"]
        c.disk_bytes += got["disk"]
    full_ram, full_disk = c.rescore_bytes_per_vector(dim)
    c.ram_bytes += full_ram * docs
    c.disk_bytes += full_disk * docs
    q = c.quality_at_docs if c.quality_at_docs is not None else c.quality  # carried to N when it can be
    ok = min_quality is None or (q is not None and q >= min_quality)
    if budget is not None:
        ok = ok and c.ram_bytes <= budget
    c.meets_target = ok and c.buildable  # nothing is recommended that ingest cannot build


def _closing_notes(cands: list[Candidate], checks: list[SizeCheck], check_n: int, docs: int,
                   notes: list[str]) -> None:
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


def _rank_quality(cands: list[Candidate], rows: Sequence[Row], dim: int, stores: Sequence[str],
                  metric: str, recipes: Sequence[Any], notes: list[str]) -> tuple[str | None, list[Any]]:
    """Set each candidate's ranking quality: ``metric`` when it discriminates on the rows at
    ``dim`` (:func:`slimvec.planner.ranking.ranking_metric`), else the first metric that
    does (noted). Returns (the metric ranked by, the checks of the metrics passed over)."""
    from slimvec.planner.ranking import ranking_metric

    at_dim = rows_at_dim(rows, dim)
    for c in cands:
        c.rank_quality, c.rank_metric = c.quality, metric
    if not at_dim:
        return None, []
    ranked_by, flagged = ranking_metric(at_dim, metric)
    for check in flagged:
        notes.append(f"{check.metric} is not used for ranking: {check.reason}")
    if ranked_by == metric:
        return ranked_by, flagged
    other = (candidates_for_recipes(recipes, dim, at_dim, ranked_by) if recipes
             else candidates_from_results(at_dim, dim, stores, ranked_by))
    by_key = {(o.reducer, o.store, o.rescore, o.depth, o.recipe): o.quality for o in other}
    for c in cands:
        c.rank_quality = by_key.get((c.reducer, c.store, c.rescore, c.depth, c.recipe))
        c.rank_metric = ranked_by
    notes.append(f"ranked by {ranked_by} instead (the target on {metric} still filters)")
    return ranked_by, flagged


def default_sweep_reducers(dim: int) -> list[str]:
    """PCA at 1/2, 1/4 and 1/8 of the encoder dimension."""
    return [f"pca:{d}" for d in (dim // 2, dim // 4, dim // 8) if d >= 8]
