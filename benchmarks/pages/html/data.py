"""The data a ``report.html`` embeds: rows labelled with their run, derived facets, planner models.

Everything the page computes from (filters, fronts, planner answers) is prepared here, in
Python, from typed :class:`~slimvec.planner.rows.Row` objects (old and new results files both
load through :func:`~slimvec.planner.rows.load_rows`); they become JSON once, as the page's
data. Metrics measured "at k" are the rows' ``*_at_k`` fields, titled with the rows' k. The planner part calls :func:`slimvec.planner.plan.make_plan`, the
code behind ``slimvec plan``, and exports its fitted size models and candidates.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError, SlimvecError
from slimvec.planner.rows import Row, finite, load_rows

__all__ = ["PageSource", "load_sources", "build_page_data", "planner_data", "row_facets",
           "skipped_groups", "null_metric_notes", "PLOT_METRICS", "default_metric"]

log = logging.getLogger(__name__)

#: quality metrics the Pareto plots offer (row field, title; an "at k" title gets ``@k`` of the rows)
PLOT_METRICS = [("neighbor_recall_at_k", "neighbour recall"), ("task_recall_at_k", "task recall"),
                ("sts_spearman", "STS Spearman ρ")]
#: the planner's metrics beyond the plots' (titles, as PLOT_METRICS)
_PLAN_TITLES = dict(PLOT_METRICS, task_mrr_at_k="task MRR")

#: metrics whose nulls the notes count
_NOTED = ["task_recall_at_k", "neighbor_recall_at_k", "sts_spearman", "cluster_accuracy",
          "latency_p50_ms", "qps", "bytes_per_vector"]


@dataclass
class PageSource:
    """One results file shown on the page.

    Attributes
    ----------
    label : str
        Short name of the run (the results file's folder, made unique), shown on every row.
    path : str
    rows : list of Row
    meta : dict
    """

    label: str
    path: str
    rows: list[Row]
    meta: dict[str, Any] = field(default_factory=dict)


def load_sources(paths: Sequence[str | Path]) -> list[PageSource]:
    """Read each results file (:func:`slimvec.planner.rows.load_rows`) and label it.

    The label is the file's folder name (``bench-results/dev/results.json`` -> ``dev``), or the
    file stem when the file is not called ``results.json``; repeated labels get ``#2``, ``#3``.

    Raises
    ------
    ConfigError
        No path given.
    PersistenceError
        A file is missing or not JSON (from ``load_rows``).
    """
    if not paths:
        raise ConfigError("No results file given: pass one or more results.json files of `slimvec bench`.")
    out: list[PageSource] = []
    seen: dict[str, int] = {}
    for raw in paths:
        p = Path(raw)
        rows, meta = load_rows(p)
        base = (p.parent.name or p.stem) if p.name == "results.json" else p.stem
        base = base or "run"
        seen[base] = seen.get(base, 0) + 1
        label = base if seen[base] == 1 else f"{base}#{seen[base]}"
        out.append(PageSource(label, str(p), rows, meta))
    return out


# --------------------------------------------------------------------------- facets
_num = finite  # a finite float or None


def _store_parts(store: str) -> tuple[str, str | None, dict[str, str]]:
    """``faiss:HNSW32,SQ8`` -> ("faiss", "HNSW32,SQ8", {}); ``qdrant-edge:quant=sq8`` -> options."""
    try:
        from slimvec.connectors import parse_store_spec

        parsed = parse_store_spec(store)
        return parsed.name, parsed.arg, {k: str(v) for k, v in dict(parsed.options or {}).items()}
    except (SlimvecError, ValueError, TypeError):
        name, _, rest = store.partition(":")
        return name, rest or None, {}


def _quantization(name: str, arg: str | None, options: dict[str, str]) -> str:
    if name == "st":  # a sentence-transformers peer label, not a store
        return arg or "?"
    try:
        from slimvec.connectors import store_class

        return store_class(name).quantization_label(arg, options)
    except SlimvecError:  # a store this version does not know (an old results file)
        return str(options.get("quant", "float32"))


def row_facets(row: Row) -> dict[str, Any]:
    """The facets the page filters on, derived from one row.

    Returns
    -------
    dict
        ``family`` (reducer family: ``pca``, ``none``...), ``store_name`` (``faiss``...),
        ``quant`` (``float32``, ``sq8``, ``pq``, ``bq1``, ``int8``...; ``—`` for routed rows),
        ``rescoring`` (``none``, ``×R`` full-vector re-rank, ``store`` when the store re-scores
        itself), ``reranked`` (the footing fronts are drawn on:
        :func:`slimvec.planner.ranking.footing`), ``role`` (``full``, ``reduced``, ``peer``
        or ``routed``) and ``label``.
    """
    from slimvec.benchmarks.report import config_label

    reducer = str(row.reducer or "none")
    store = str(row.store or "?")
    kind = str(row.kind or "")
    name, arg, options = _store_parts(store)
    routed = kind == "routed" or (kind == "" and _num(row.routed_recall_at_k) is not None)
    if routed:
        role = "routed"
    elif kind == "peer":
        role = "peer"
    elif reducer == "none":
        role = "full"
    else:
        role = "reduced"
    rescore = row.rescore
    if rescore and not isinstance(rescore, bool) and _num(rescore) is not None:
        rescoring = f"×{int(_num(rescore) or 0)}"
    elif rescore:
        rescoring = "rescore"
    elif str(options.get("rescore", "")).lower() == "true":
        rescoring = "store"
    else:
        rescoring = "none"
    from slimvec.planner.candidates import row_rescore_bytes
    from slimvec.planner.ranking import buildable, ingest_command

    # what x R rescoring costs beyond the plain twin's bytes, as `slimvec plan` sizes it: the id
    # lookup in RAM and the full vectors at the dtype the built recipe keeps, read from disk
    dim_in = _num(row.dim_in)
    extra_ram, extra_disk = (row_rescore_bytes(row, int(dim_in))
                             if rescoring.startswith("×") and dim_in else (0, 0))
    ok, why = buildable(row)
    from slimvec.planner.ranking import RERANKED, footing

    return {"family": reducer.split(":", 1)[0], "store_name": "routed" if routed else name,
            "reranked": footing(row) == RERANKED,
            "quant": "—" if routed else _quantization(name, arg, options), "rescoring": rescoring,
            "role": role, "label": config_label(row), "rescore_ram_per_vector": extra_ram,
            "rescore_disk_per_vector": extra_disk,
            "build": ingest_command(row) if ok else None, "why_not": why or None}


# --------------------------------------------------------------------------- notes
_PATH = re.compile(r"(/[^\s:;,'\"]+)+")


def skipped_groups(sources: Sequence[PageSource]) -> list[dict[str, Any]]:
    """Skipped configurations grouped by reason (paths and the configuration's own spec taken out).

    Returns
    -------
    list of dict
        ``{"reason", "count", "configs", "sources", "example"}``, largest group first.
    """
    groups: dict[str, dict[str, Any]] = {}
    for src in sources:
        for entry in src.meta.get("skipped") or []:
            if isinstance(entry, dict):
                config = str(entry.get("config", "?"))
                reason = str(entry.get("reason", ""))
            else:
                config, reason = str(entry), ""
            spec = config.split(" ")[0] if config else ""
            key = _PATH.sub("<path>", reason)
            if spec:
                key = key.replace(spec, "<config>")
            g = groups.setdefault(key, {"reason": key, "count": 0, "configs": [], "sources": [],
                                        "example": reason})
            g["count"] += 1
            g["configs"].append(config)
            if src.label not in g["sources"]:
                g["sources"].append(src.label)
    return sorted(groups.values(), key=lambda g: -g["count"])


def null_metric_notes(rows: Sequence[Row], roles: Sequence[str]) -> list[dict[str, Any]]:
    """Per metric, how many rows have it null, counted by row role (not a list of labels)."""
    out = []
    for key in _NOTED:
        by_role: dict[str, int] = {}
        for r, role in zip(rows, roles):
            if _num(r.get(key)) is None:
                by_role[role] = by_role.get(role, 0) + 1
        missing = sum(by_role.values())
        if missing:
            out.append({"metric": key, "count": missing, "total": len(rows), "by_role": by_role})
    return out


# --------------------------------------------------------------------------- planner
def _group_key(row: Row) -> tuple[str, str, bool, int] | None:
    from slimvec.planner.sizing import sizing_spec

    try:
        store = sizing_spec(str(row.store or ""))
    except (SlimvecError, ValueError):
        return None
    rescore = row.rescore
    depth = int(_num(rescore) or 0) if not isinstance(rescore, bool) else 0
    return (str(row.reducer or "none"), store, bool(rescore), depth)


def _growth(store: str) -> str:
    """``linear`` or ``graph`` (:meth:`slimvec.connectors.base.VectorStore.search_growth`)."""
    try:
        from slimvec.connectors import parse_store_spec, store_class

        parsed = parse_store_spec(store)
        return store_class(parsed).search_growth(parsed.arg, dict(parsed.options or {}))
    except SlimvecError:
        return "graph"


def planner_data(rows: Sequence[Row], *, workdir: str | Path | None = None,
                 cache: str | Path | None = None) -> dict[str, Any]:
    """Size models and candidates of :func:`~slimvec.planner.plan.make_plan`, per encoder dimension.

    For each input dimension of the rows, ``make_plan`` is run once (a huge memory budget as a
    target, so nothing is filtered): its fitted :class:`~slimvec.planner.sizing.SizeModel`
    per store are exported as JSON, and its candidates in the order
    :func:`~slimvec.planner.plan.candidates_from_results` produces them (the order
    ``make_plan`` sorts from), with the quality of every plan metric and the worst p50 latency.
    The page evaluates ``RAM(N) = Σ resident components max(fixed + fixed_per_dim·d +
    N·(per_vector + per_dim·d), 0) + extra_ram_per_vector·N + reducer_bytes`` exactly like
    :meth:`SizeModel.ram_bytes`, and sorts like ``make_plan``. ``cache``: the folder of size
    models ``slimvec plan`` keeps (:func:`~slimvec.planner.plan.size_model_cache`), reused.

    Returns
    -------
    dict
        ``{"metrics": [...], "dims": {"384": {"models", "candidates", "notes", "checks"}},
        "errors": {dim: reason}}``.
    """
    from slimvec.planner.plan import QUALITY_METRICS, candidates_from_results, make_plan
    from slimvec.planner.ranking import ranking_metric

    dims = sorted({int(_num(r.dim_in) or 0) for r in rows if _num(r.dim_in)})
    out: dict[str, Any] = {"metrics": list(QUALITY_METRICS), "payload_bytes": 0, "dims": {}, "errors": {},
                           "default_metric": QUALITY_METRICS[0]}
    with tempfile.TemporaryDirectory(prefix="slimvec-report-sizes-", dir=workdir) as tmp:
        for dim in dims:
            at_dim = [r for r in rows if _num(r.dim_in) == dim]
            try:
                plan = make_plan(1, dim, rows=at_dim, memory_budget=2**60, workdir=tmp, progress=True,
                                 cache=cache)
                ordered = candidates_from_results(at_dim, dim)
            except SlimvecError as exc:
                log.warning("report.html planner: no size models for dimension %d: %s", dim, exc)
                out["errors"][str(dim)] = str(exc)
                continue
            quality: dict[str, dict[tuple[str, str, bool, int], float | None]] = {}
            for metric in QUALITY_METRICS:
                quality[metric] = {(c.reducer, c.store, c.rescore, c.depth): c.quality
                                   for c in candidates_from_results(at_dim, dim, (), metric)}
            # the metric each plan metric ranks by (benchmarks.ranking: a saturated one does not)
            ranked_by, flagged = {}, {}
            for metric in QUALITY_METRICS:
                ranked_by[metric], passed = ranking_metric(at_dim, metric)
                flagged[metric] = [c.to_json() for c in passed]
            p50: dict[tuple[str, str, bool, int], float] = {}
            p50_n: dict[tuple[str, str, bool, int], int | None] = {}
            for r in at_dim:
                key = _group_key(r)
                value = _num(r.latency_p50_ms)
                if key is not None and value is not None and value >= p50.get(key, value):
                    p50[key] = value
                    p50_n[key] = int(_num(r.n_corpus) or 0) or None
            cands = []
            for c in ordered:
                key = (c.reducer, c.store, c.rescore, c.depth)
                cands.append({"reducer": c.reducer, "dim_out": c.dim_out, "store": c.store,
                              "rescore": c.rescore, "depth": c.depth, "label": c.label,
                              "buildable": c.buildable, "command": c.command, "why_not": c.why_not or None,
                              "quality": {m: quality[m].get(key) for m in QUALITY_METRICS},
                              "datasets": sorted(set(c.datasets)), "reducer_bytes": c.reducer_bytes,
                              "p50_ms": p50.get(key), "p50_n": p50_n.get(key),
                              # how its latency grows with N (benchmarks.latency.latency_at)
                              "growth": _growth(c.store),
                              # per vector, what rescoring adds (plan.Candidate.rescore_bytes_per_vector)
                              "rescore_bytes": list(c.rescore_bytes_per_vector(dim))})
            out["dims"][str(dim)] = {
                "models": {spec: m.to_json() for spec, m in plan.models.items()},
                "candidates": cands,
                "ranked_by": ranked_by,
                "flagged": flagged,
                "checks": [{"store": k.spec, "n": k.n, "dim": k.dim, "predicted_bytes": int(k.predicted),
                            "measured_bytes": k.measured, "error": k.error} for k in plan.checks],
                # the page words the ranking metric per chosen metric itself (flagged, ranked_by)
                "notes": [n for n in plan.notes if not n.startswith("size models checked")
                          and "is not used for ranking" not in n],
            }
    out["default_metric"] = _measured_metric(out["dims"], QUALITY_METRICS)
    return out


def _measured_metric(dims: dict[str, Any], metrics: Sequence[str]) -> str:
    """The first of ``metrics`` some planner candidate has (a ``--vectors`` run: no task recall)."""
    for m in metrics:
        if any(c["quality"][m] is not None for b in dims.values() for c in b["candidates"]):
            return m
    return metrics[0]


# --------------------------------------------------------------------------- the page's data
def default_metric(rows: Sequence[Row]) -> dict[str, str]:
    """The plots' default y-axis: a metric that tells the rows apart, and why it was chosen.

    The rule (a metric that cannot discriminate must not rank anything, so it must not be the
    axis everything is read against either): the first of task recall, neighbour recall and STS
    Spearman (:data:`PLOT_METRICS`) that :func:`slimvec.planner.ranking.check_metric` finds
    able to discriminate (not saturated, enough positives, rows not all within one standard
    error of the best); when none can, the recorded metric with the largest spread (max - min)
    over the rows.

    Returns
    -------
    dict
        ``{"key": row field, "reason": the sentence the page prints after "chosen because"}``.
    """
    from slimvec.planner.ranking import check_metric

    passed: list[str] = []
    spreads: dict[str, float] = {}
    preferred = ["task_recall_at_k", "neighbor_recall_at_k", "sts_spearman"]
    for key, title in sorted(PLOT_METRICS, key=lambda m: preferred.index(m[0])):
        values = [v for r in rows if (v := _num(r.get(key))) is not None]
        if not values:
            continue
        spreads[key] = max(values) - min(values)
        check = check_metric(rows, key)
        if check.usable:
            why = f"it tells the rows apart (spread {spreads[key]:.3f} over {len(values)} rows)"
            return {"key": key, "reason": why + "".join(f"; {p}" for p in passed)}
        passed.append(f"{title} does not: {check.reason}")
    if not spreads:
        return {"key": PLOT_METRICS[0][0], "reason": "no row records a quality metric"}
    key = max(spreads, key=lambda k: spreads[k])
    return {"key": key, "reason": f"no metric tells the rows apart ({'; '.join(passed)}); it has the "
                                  f"largest spread, {spreads[key]:.3f}"}


def _page_k(rows: Sequence[Row]) -> int | None:
    """The k of the page's "at k" metrics; None when the runs were measured at several k."""
    ks = {r.k for r in rows}
    return ks.pop() if len(ks) == 1 else None


def build_page_data(sources: Sequence[PageSource], *, planner: bool = True,
                    workdir: str | Path | None = None) -> dict[str, Any]:
    """Everything the page shows, as one JSON-serialisable dict.

    Parameters
    ----------
    sources : list of PageSource
    planner : bool
        Fit the store size models for the capacity planner (real builds at 1,000 and 2,000
        vectors per store spec, as ``slimvec plan`` does; seconds per store). ``False`` leaves
        the planner out.
    workdir : path, optional
        Parent of the temporary folders of the size builds.
    """
    rows = [r for src in sources for r in src.rows]
    facets = [row_facets(r) for r in rows]
    k = _page_k(rows)
    data: dict[str, Any] = {
        # the page's JSON: each row as results.json writes it, labelled with its run
        "rows": [dict(r.to_json(), source=src.label) for src in sources for r in src.rows],
        "facets": facets,
        "k": k,
        "metrics": [[key, title if key == "sts_spearman" else f"{title}@{'k' if k is None else k}"]
                    for key, title in PLOT_METRICS],
        "sources": [{"label": s.label, "path": s.path, "n_rows": len(s.rows),
                     "command": s.meta.get("command"), "wall_s": s.meta.get("wall_s"),
                     "datasets": s.meta.get("datasets") or [], "machine": s.meta.get("machine")}
                    for s in sources],
        "default_metric": default_metric(rows),
        "skipped": skipped_groups(sources),
        "nulls": null_metric_notes(rows, [f["role"] for f in facets]),
        "planner": None,
    }
    if planner:
        from slimvec.planner.plan import size_model_cache

        # all rows, as `slimvec plan` reads them, and the size models it cached
        data["planner"] = planner_data(rows, workdir=workdir, cache=size_model_cache())
        data["planner"]["titles"] = {
            m: title if m == "sts_spearman" else f"{title}@{'k' if k is None else k}"
            for m, title in _PLAN_TITLES.items()}
    return data
