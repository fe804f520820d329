"""Reports of a benchmark run: ``report.md`` with tables, budgets, the Pareto front, and plots.

The runner writes raw rows to ``results.json`` (a JSON list of row objects, or
``{"rows": [...], "meta": {...}}``); everything here is computed from those rows, so a report can be
rebuilt without re-running anything::

    from slimvec.benchmarks.report import write_report
    write_report("out/results.json", "out")      # -> out/report.md, out/*.png

A metric that does not apply is ``null`` in the rows and shows as "—" in the report.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slimvec.benchmarks.analysis import (
    NULL,
    best_per_budget,
    budget_ladder,
    by_dataset,
    config_label,
    format_value,
    human_bytes,
    num,
    pareto_front,
    quality_metric,
    rescore_suffix,
    row_k,
)
from slimvec.planner.rows import Row, load_rows, metric_title

__all__ = [
    "NULL",
    "pareto_front",
    "best_per_budget",
    "budget_ladder",
    "config_label",
    "format_value",
    "human_bytes",
    "quality_metric",
    "rescore_suffix",
    "render_report",
    "write_report",
    "MAX_LINE",
]

log = logging.getLogger(__name__)

#: (key, column title or None for a metric title generated from k, decimals) of the tables
TABLE_COLUMNS: list[tuple[str, str | None, int]] = [
    ("reducer", "reducer", 0),
    ("dim_out", "dim", 0),
    ("store", "store", 0),
    ("bytes_per_vector", "bytes/vec", 1),
    ("index_bytes", "index", 0),
    ("task_recall_at_k", None, 3),
    ("task_mrr_at_k", None, 3),
    ("neighbor_recall_at_k", None, 3),
    ("sts_spearman", "STS ρ", 3),
    ("cluster_accuracy", "cluster acc", 3),
    ("latency_p50_ms", "p50 ms", 2),
    ("latency_p95_ms", "p95 ms", 2),
    ("latency_p99_ms", "p99 ms", 2),
    ("qps", "QPS", 0),
    ("fit_s", "fit s", 2),
    ("build_s", "build s", 2),
    ("reranked", "re-ranked", 0),
]

#: metrics whose nulls are counted in the notes
NOTED_METRICS = ["task_recall_at_k", "task_mrr_at_k", "neighbor_recall_at_k", "sts_spearman",
                 "cluster_accuracy", "latency_p50_ms", "qps", "index_bytes", "bytes_per_vector"]

#: no line of a report is longer than this (long reasons are cut; details stay in results.json)
MAX_LINE = 300


def _title(key: str, k: int) -> str:
    return metric_title(key, k)


# --------------------------------------------------------------------------- markdown
def _table(header: list[str], body: list[list[str]]) -> list[str]:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return lines


def reranked_cell(row: Row) -> str:
    """``×8`` for a row re-ranked from 8 candidates per result (``yes`` without a depth), ``no``
    when it was not re-ranked: every table says on which footing a row stands."""
    from slimvec.planner.ranking import RERANKED, footing

    if footing(row) != RERANKED:
        return "no"
    depth = row.rerank_depth if isinstance(row, Row) else None
    return f"×{depth:g}" if depth else "yes"


def _cell(row: Row, key: str, decimals: int) -> str:
    if key == "index_bytes":
        return human_bytes(num(row, key))
    if key == "reranked":
        return reranked_cell(row)
    return format_value(row.get(key), decimals)


def _reducer_costs(rows: list[Row]) -> list[str]:
    """One line per reducer: fit time, transform time per 10k vectors, artifact size."""
    seen: dict[str, Row] = {}
    for r in rows:
        seen.setdefault(str(r.reducer), r)
    if all(num(r, k) is None for r in seen.values()
           for k in ("fit_s", "transform_s_per_10k", "reducer_bytes")):
        return []
    body = [[name, format_value(r.dim_out, 0), format_value(r.fit_s, 2),
             format_value(r.transform_s_per_10k, 3), human_bytes(num(r, "reducer_bytes"))]
            for name, r in sorted(seen.items(), key=lambda kv: -(num(kv[1], "dim_out") or 0))]
    return ["### Reducer costs", ""] + _table(
        ["reducer", "dim", "fit s", "transform s / 10k", "artifact"], body) + [""]


def _routed(rows: list[Row]) -> list[str]:
    """Cluster-routed retrieval rows (reducers that cluster and FAISS k-means baselines)."""
    routed = [r for r in rows if num(r, "routed_recall_at_k") is not None]
    if not routed:
        return []
    k = row_k(routed[0])
    body = [[config_label(r), format_value(r.cluster_accuracy, 3),
             format_value(r.routed_recall_at_k, 3), format_value(r.routed_fraction_scanned, 3),
             format_value(r.effective_clusters, 1), format_value(r.largest_cluster_share, 3)]
            for r in routed]
    return ["### Cluster-routed retrieval", ""] + _table(
        ["configuration", "cluster acc", _title("routed_recall_at_k", k), "fraction scanned",
         "effective clusters", "largest share"], body) + [""]


def _dataset_section(name: str, rows: list[Row]) -> list[str]:
    first = rows[0]
    k = row_k(first)
    out = [f"## Dataset `{name}`", ""]
    facts = [f"{key} {format_value(first.get(key), 0)}" for key in ("n_corpus", "n_queries", "dim_in")
             if first.get(key) is not None]
    if first.encoder:
        facts.insert(0, f"encoder `{first.encoder}`")
    facts.append(f"k {k}")
    out += [", ".join(facts) + ".", ""]
    header = [title or _title(key, k) for key, title, _ in TABLE_COLUMNS]
    ordered = sorted(rows, key=lambda r: (-(num(r, "bytes_per_vector") or 0), config_label(r)))
    body = []
    for r in ordered:
        cells = [_cell(r, key, dec) for key, _, dec in TABLE_COLUMNS]
        cells[2] += rescore_suffix(r)
        body.append(cells)
    out += _table(header, body) + [""]

    out += _reducer_costs(rows) + _routed(rows)

    from slimvec.planner.ranking import buildable, ranking_metric

    metrics = [quality_metric(rows)]
    _, flagged = ranking_metric(rows, "task_recall_at_k")
    for check in flagged:
        out += [f"**{_title(check.metric, k)} is not used for ranking**: {check.reason}; it cannot "
                "tell these configurations apart.", ""]
    if metrics[0] != "neighbor_recall_at_k" and any(num(r, "neighbor_recall_at_k") is not None for r in rows):
        metrics.append("neighbor_recall_at_k")
    unbuildable = sorted({config_label(r) for r in rows if not buildable(r)[0]
                          and num(r, "bytes_per_vector") is not None})
    for metric in metrics:
        out += _footing_sections(rows, metric, k)
        if unbuildable:
            out += [_cut(f"Not recommended (slimvec ingest cannot build them, measured for comparison): "
                         f"{', '.join(unbuildable)}", MAX_LINE - 10), ""]
    return out


def _footing_sections(rows: list[Row], metric: str, k: int) -> list[str]:
    """Per footing (re-ranked or not, :func:`slimvec.planner.ranking.equal_footing`): the best
    configuration per bytes/vector budget beside the best peer on the same footing, and the
    Pareto front. A re-ranked row is only ever set against re-ranked peers."""
    from slimvec.planner.ranking import equal_footing, footing_fronts, ingest_command

    title = _title(metric, k)
    out: list[str] = []
    picks = footing_fronts(rows, metric)
    for name, group in equal_footing(rows).items():
        mine = [p for p in picks if p.footing == name]
        out += [f"### Best configuration per bytes/vector budget ({title}), {name} rows", ""]
        if not any(str(r.kind) == "peer" for r in group):
            out += [f"No peer was measured {name}: these rows are not compared with any peer.", ""]
        out += _table(["budget (bytes/vec)", "best configuration", "bytes/vec", title,
                       f"best {name} peer", f"peer {title}", "build it"],
                      [[format_value(p.budget, 0), config_label(p.best) if p.best else NULL,
                        format_value(p.best.bytes_per_vector, 1) if p.best else NULL,
                        format_value(p.best.get(metric), 3) if p.best else NULL,
                        config_label(p.best_peer) if p.best_peer else NULL,
                        format_value(p.best_peer.get(metric), 3) if p.best_peer else NULL,
                        f"`{ingest_command(p.best)}`" if p.best else NULL] for p in mine]) + [""]
        out += [f"### Pareto front: {title} against bytes per vector, {name} rows", ""]
        front = pareto_front(group, "bytes_per_vector", metric)
        if front:
            out += _table(["configuration", "re-ranked", "bytes/vec", title, "p50 ms"],
                          [[config_label(r), reranked_cell(r), format_value(r.bytes_per_vector, 1),
                            format_value(r.get(metric), 3), format_value(r.latency_p50_ms, 2)]
                           for r in front]) + [""]
        else:
            out += [f"No {name} row has both bytes_per_vector and {title}.", ""]
    return out


def _cut(text: str, limit: int = MAX_LINE - 40) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _reason_group(reason: str) -> str:
    """A skip reason without its configuration-specific numbers, so alike reasons group."""
    return _cut(re.sub(r"\d+", "N", reason), 160)


def _skipped_notes(meta: dict[str, Any]) -> list[str]:
    """Skipped configurations as counts per reason (details stay in ``meta["skipped"]``)."""
    groups: dict[str, list[str]] = {}
    for entry in meta.get("skipped") or []:
        if isinstance(entry, dict):
            reason = _reason_group(str(entry.get("reason", "?")))
            what = f"{entry.get('config', '?')} on {entry.get('dataset', '?')}"
        else:
            reason, what = _cut(str(entry)), ""
        groups.setdefault(reason, []).append(what)
    items = []
    for reason, whats in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        examples = [w for w in whats if w][:2]
        more = f" (e.g. {_cut('; '.join(examples), 100)})" if examples else ""
        items.append(f"skipped: {reason}{more}" if len(whats) == 1 else f"skipped {len(whats)}×: {reason}{more}")
    return items


def _null_note(key: str, missing: list[Row], total: int, k: int) -> str:
    """``nbr R@10`` is — for 12 of 40 rows (routed 8, peer 4)."""
    name = f"`{key}`" if key not in ("task_recall_at_k", "task_mrr_at_k", "neighbor_recall_at_k") \
        else f"`{key}` ({_title(key, k)})"
    if len(missing) == total:
        return f"{name} is {NULL} (not applicable) for every row"
    if len(missing) <= 3:
        labels = ", ".join(sorted({config_label(r) for r in missing}))
        return _cut(f"{name} is {NULL} (not applicable) for {len(missing)} of {total} rows: {labels}",
                    MAX_LINE - 10)
    kinds: dict[str, int] = {}
    for r in missing:
        kinds[str(r.kind or "row")] = kinds.get(str(r.kind or "row"), 0) + 1
    split = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return f"{name} is {NULL} (not applicable) for {len(missing)} of {total} rows ({split})"


def _notes(rows: Sequence[Row], meta: dict[str, Any], plots: dict[str, str | None]) -> list[str]:
    out = ["## Notes: skipped runs and metrics that do not apply", ""]
    items: list[str] = _skipped_notes(meta)
    if items:
        items.append("every skipped configuration with its full reason: `meta.skipped` in results.json")
    errors: dict[str, int] = {}
    for r in rows:
        for key in ("error", "skipped", "skip_reason"):
            if r.get(key):
                group = _reason_group(f"{key}: {r.get(key)}")
                errors[group] = errors.get(group, 0) + 1
    items += [f"{n} row(s) with {reason}" for reason, n in errors.items()]
    k = row_k(rows[0]) if rows else 10
    for key in NOTED_METRICS:
        missing = [r for r in rows if num(r, key) is None]
        if missing:
            items.append(_null_note(key, missing, len(rows), k))
    for name, reason in plots.items():
        if reason is not None:
            items.append(f"plot `{name}` not drawn: {_cut(reason)}")
    out += [f"- {i}" for i in items] if items else ["Nothing was skipped; every metric applies."]
    return out + [""]


def _wrap_command(command: str, width: int = 100) -> list[str]:
    """A long shell command as lines ending in `` \\`` (each well under :data:`MAX_LINE`)."""
    lines: list[str] = []
    current = ""
    for word in command.split(" "):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current + " \\")
            current = "  " + word
        else:
            current = f"{current} {word}" if current else word
    return lines + [current]


def render_report(rows: Sequence[Row], meta: dict[str, Any] | None = None,
                  plots: dict[str, str | None] | None = None) -> str:
    """The Markdown text of a report (without writing plots).

    Parameters
    ----------
    rows : list of Row
        Result rows (:func:`slimvec.planner.rows.load_rows` reads them from a file).
    meta : dict, optional
        Run facts (``command``, ``skipped``...), printed when present.
    plots : dict, optional
        Plot file name -> ``None`` when drawn, or the reason it was not.
    """
    rows = list(rows)
    meta = meta or {}
    plots = plots or {}
    out = ["# slimvec benchmark report", ""]
    if meta.get("command"):
        out += ["Command:", "", "```", *_wrap_command(str(meta["command"])), "```", ""]
    out += [f"{len(rows)} result rows. Null metrics (not applicable) print as {NULL}.", ""]
    for name, group in by_dataset(rows).items():
        from slimvec.benchmarks.filtered import render_filtered
        from slimvec.benchmarks.rescore_tables import render_recipes, render_two_stage

        # filtered and index-recipe rows: their own tables
        plain = [r for r in group if r.selectivity is None and r.kind != "recipe"]
        out += _dataset_section(name, plain) if plain else [f"## Dataset `{name}`", ""]
        out += render_filtered(group) + render_two_stage(group) + render_recipes(group)
    drawn = [name for name, reason in plots.items() if reason is None]
    if drawn:
        out += ["## Plots", ""] + [f"![{Path(n).stem}]({n})" for n in drawn] + [""]
    out += _notes(rows, meta, plots)
    return "\n".join(out)


def write_report(results_path: str | Path, out_dir: str | Path) -> Path:
    """Write ``report.md`` of ``results_path`` into ``out_dir`` (the PNG plots and ``report.html``
    are views in the checkout: ``python -m benchmarks report``).

    Parameters
    ----------
    results_path : path
        ``results.json`` written by the runner.
    out_dir : path
        Folder for ``report.md`` (created if missing).

    Returns
    -------
    Path
        The ``report.md`` written.
    """
    rows, meta = load_rows(results_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report.md"
    report.write_text(render_report(rows, meta), encoding="utf-8")
    log.info("wrote %s (%d rows)", report, len(rows))
    return report
