"""Reports of a benchmark run: ``report.md`` with tables, budgets, the Pareto front, and plots.

The runner writes raw rows to ``results.json`` (a JSON list of row objects, or
``{"rows": [...], "meta": {...}}``); everything here is computed from those rows, so a report can be
rebuilt without re-running anything::

    from slimvec.benchmarks.report import write_report
    write_report("out/results.json", "out")      # -> out/report.md, out/*.png

A metric that does not apply is ``null`` in the rows and shows as "—" in the report.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from slimvec.errors import ConfigError, PersistenceError

__all__ = [
    "NULL",
    "load_results",
    "pareto_front",
    "best_per_budget",
    "budget_ladder",
    "config_label",
    "format_value",
    "rescore_suffix",
    "render_report",
    "write_report",
]

log = logging.getLogger(__name__)

#: how a null (not applicable) metric is printed
NULL = "—"

#: (key, column title, decimals) of the per-dataset tables
TABLE_COLUMNS: list[tuple[str, str, int]] = [
    ("reducer", "reducer", 0),
    ("dim_out", "dim", 0),
    ("store", "store", 0),
    ("bytes_per_vector", "bytes/vec", 1),
    ("index_bytes", "index", 0),
    ("task_recall_at_10", "task R@10", 3),
    ("task_mrr_at_10", "MRR@10", 3),
    ("neighbor_recall_at_10", "nbr R@10", 3),
    ("sts_spearman", "STS ρ", 3),
    ("cluster_accuracy", "cluster acc", 3),
    ("latency_p50_ms", "p50 ms", 2),
    ("latency_p95_ms", "p95 ms", 2),
    ("latency_p99_ms", "p99 ms", 2),
    ("qps", "QPS", 0),
    ("fit_s", "fit s", 2),
    ("build_s", "build s", 2),
]

#: metrics whose nulls are counted in the notes
NOTED_METRICS = ["task_recall_at_10", "task_mrr_at_10", "neighbor_recall_at_10", "sts_spearman",
                 "cluster_accuracy", "latency_p50_ms", "qps", "index_bytes", "bytes_per_vector"]


# --------------------------------------------------------------------------- loading
def load_results(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Read ``results.json``: a list of rows, or ``{"rows": [...], "meta": {...}}``.

    Returns
    -------
    rows : list of dict
    meta : dict
        Empty when the file is a bare list.

    Raises
    ------
    PersistenceError
        The file is missing or not JSON.
    ConfigError
        The JSON is neither a list of objects nor an object with a ``rows`` list.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PersistenceError(f"No results file at {p}: run `slimvec bench --out DIR` first "
                               "and pass DIR/results.json.") from exc
    except (OSError, ValueError) as exc:
        raise PersistenceError(f"Could not read results file {p} as JSON: {exc}.") from exc
    meta: dict[str, Any] = {}
    if isinstance(data, dict):
        meta = dict(data.get("meta") or {})
        data = data.get("rows")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ConfigError(f"Results file {p}: expected a JSON list of row objects or "
                          f'{{"rows": [...], "meta": {{...}}}}, got {type(data).__name__}.')
    return [dict(r) for r in data], meta


# --------------------------------------------------------------------------- numbers
def _num(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def format_value(value: Any, decimals: int = 3) -> str:
    """Print a table cell: null/NaN as "—", floats with ``decimals``, byte counts human-readable
    when ``decimals`` is 0 and the value is large."""
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


def config_label(row: dict[str, Any]) -> str:
    """``pca:96 → faiss:HNSW32`` (with ``+rescore`` when the row was rescored)."""
    return f"{row.get('reducer', '?')} → {row.get('store', '?')}{rescore_suffix(row)}"


def rescore_suffix(row: dict[str, Any]) -> str:
    """`` +rescore×R`` for rows re-ranked from ``k × R`` candidates (`` +rescore`` without R)."""
    value = row.get("rescore")
    if not value:
        return ""
    return f" +rescore×{value}" if isinstance(value, int) and not isinstance(value, bool) else " +rescore"


# --------------------------------------------------------------------------- analysis
def pareto_front(rows: Iterable[dict[str, Any]], x: str = "bytes_per_vector",
                 y: str = "task_recall_at_10") -> list[dict[str, Any]]:
    """Rows not dominated by another: no other row has ``x`` <= and ``y`` >= with one strict.

    Smaller ``x`` (bytes) and larger ``y`` (quality) are better; rows where either is null are
    left out. The front is returned sorted by ``x`` ascending (and so ``y`` strictly ascending).
    """
    usable = [r for r in rows if _num(r, x) is not None and _num(r, y) is not None]
    usable.sort(key=lambda r: (_num(r, x), -_num(r, y)))  # type: ignore[operator]
    front: list[dict[str, Any]] = []
    best = -math.inf
    for r in usable:
        value = _num(r, y)
        assert value is not None
        if value > best:
            front.append(r)
            best = value
    return front


def budget_ladder(rows: Sequence[dict[str, Any]], key: str = "bytes_per_vector") -> list[float]:
    """Powers of two spanning the rows' bytes per vector (the budgets of the report)."""
    values = [v for v in (_num(r, key) for r in rows) if v is not None and v > 0]
    if not values:
        return []
    lo = 2 ** math.floor(math.log2(min(values)))
    hi = 2 ** math.ceil(math.log2(max(values)))
    out, b = [], float(lo)
    while b <= hi:
        out.append(b)
        b *= 2
    return out


def best_per_budget(rows: Sequence[dict[str, Any]], budgets: Sequence[float],
                    metric: str = "task_recall_at_10",
                    key: str = "bytes_per_vector") -> list[tuple[float, dict[str, Any] | None]]:
    """For each budget, the row with the highest ``metric`` among rows with ``key`` <= budget.

    Ties go to the smaller ``key``. ``None`` when no row fits the budget (or none has the metric).
    """
    out: list[tuple[float, dict[str, Any] | None]] = []
    for budget in budgets:
        fitting = [r for r in rows if _num(r, key) is not None and _num(r, key) <= budget  # type: ignore[operator]
                   and _num(r, metric) is not None]
        best = max(fitting, key=lambda r: (_num(r, metric), -_num(r, key)), default=None)  # type: ignore[operator]
        out.append((budget, best))
    return out


def quality_metric(rows: Sequence[dict[str, Any]]) -> str:
    """``task_recall_at_10`` when any row has it, else ``neighbor_recall_at_10``."""
    if any(_num(r, "task_recall_at_10") is not None for r in rows):
        return "task_recall_at_10"
    return "neighbor_recall_at_10"


def _by_dataset(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r.get("dataset", "dataset")), []).append(r)
    return groups


# --------------------------------------------------------------------------- markdown
def _table(header: list[str], body: list[list[str]]) -> list[str]:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return lines


def _cell(row: dict[str, Any], key: str, decimals: int) -> str:
    if key == "index_bytes":
        return human_bytes(_num(row, key))
    return format_value(row.get(key), decimals)


def _reducer_costs(rows: list[dict[str, Any]]) -> list[str]:
    """One line per reducer: fit time, transform time per 10k vectors, artifact size."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        seen.setdefault(str(r.get("reducer")), r)
    if all(_num(r, k) is None for r in seen.values()
           for k in ("fit_s", "transform_s_per_10k", "reducer_bytes")):
        return []
    body = [[name, format_value(r.get("dim_out"), 0), format_value(r.get("fit_s"), 2),
             format_value(r.get("transform_s_per_10k"), 3), human_bytes(_num(r, "reducer_bytes"))]
            for name, r in sorted(seen.items(), key=lambda kv: -(_num(kv[1], "dim_out") or 0))]
    return ["### Reducer costs", ""] + _table(
        ["reducer", "dim", "fit s", "transform s / 10k", "artifact"], body) + [""]


def _routed(rows: list[dict[str, Any]]) -> list[str]:
    """Cluster-routed retrieval rows (reducers that cluster and FAISS k-means baselines)."""
    routed = [r for r in rows if _num(r, "routed_recall_at_10") is not None]
    if not routed:
        return []
    body = [[config_label(r), format_value(r.get("cluster_accuracy"), 3),
             format_value(r.get("routed_recall_at_10"), 3), format_value(r.get("routed_fraction_scanned"), 3)]
            for r in routed]
    return ["### Cluster-routed retrieval", ""] + _table(
        ["configuration", "cluster acc", "routed R@10", "fraction scanned"], body) + [""]


def _dataset_section(name: str, rows: list[dict[str, Any]]) -> list[str]:
    first = rows[0]
    out = [f"## Dataset `{name}`", ""]
    facts = [f"{k} {format_value(first.get(k), 0)}" for k in ("n_corpus", "n_queries", "dim_in")
             if first.get(k) is not None]
    if first.get("encoder"):
        facts.insert(0, f"encoder `{first['encoder']}`")
    if facts:
        out += [", ".join(facts) + ".", ""]
    header = [title for _, title, _ in TABLE_COLUMNS]
    ordered = sorted(rows, key=lambda r: (-(_num(r, "bytes_per_vector") or 0), config_label(r)))
    body = []
    for r in ordered:
        cells = [_cell(r, key, dec) for key, _, dec in TABLE_COLUMNS]
        cells[2] += rescore_suffix(r)
        body.append(cells)
    out += _table(header, body) + [""]

    out += _reducer_costs(rows) + _routed(rows)

    metrics = [quality_metric(rows)]
    if metrics[0] != "neighbor_recall_at_10" and any(_num(r, "neighbor_recall_at_10") is not None for r in rows):
        metrics.append("neighbor_recall_at_10")
    for metric in metrics:
        out += [f"### Best configuration per bytes/vector budget ({metric})", ""]
        picks = best_per_budget(rows, budget_ladder(rows), metric)
        out += _table(["budget (bytes/vec)", "best configuration", "bytes/vec", metric],
                      [[format_value(b, 0), config_label(r) if r else NULL,
                        format_value(r.get("bytes_per_vector"), 1) if r else NULL,
                        format_value(r.get(metric), 3) if r else NULL] for b, r in picks]) + [""]

        out += [f"### Pareto front: {metric} against bytes per vector", ""]
        front = pareto_front(rows, "bytes_per_vector", metric)
        if front:
            out += _table(["configuration", "bytes/vec", metric, "p50 ms"],
                          [[config_label(r), format_value(r.get("bytes_per_vector"), 1),
                            format_value(r.get(metric), 3), format_value(r.get("latency_p50_ms"), 2)]
                           for r in front]) + [""]
        else:
            out += [f"No row has both bytes_per_vector and {metric}.", ""]
    return out


def _notes(rows: Sequence[dict[str, Any]], meta: dict[str, Any], plots: dict[str, str | None]) -> list[str]:
    out = ["## Notes: skipped runs and metrics that do not apply", ""]
    items: list[str] = []
    for entry in meta.get("skipped") or []:
        items.append(f"skipped: {entry if isinstance(entry, str) else json.dumps(entry, sort_keys=True)}")
    for r in rows:
        for key in ("error", "skipped", "skip_reason"):
            if r.get(key):
                items.append(f"{r.get('dataset')} / {config_label(r)}: {key} — {r[key]}")
    for key in NOTED_METRICS:
        missing = [r for r in rows if _num(r, key) is None]
        if missing and len(missing) < len(rows):
            labels = ", ".join(sorted({config_label(r) for r in missing}))
            items.append(f"`{key}` is {NULL} (not applicable) for {len(missing)} of {len(rows)} rows: {labels}")
        elif missing:
            items.append(f"`{key}` is {NULL} (not applicable) for every row")
    for name, reason in plots.items():
        if reason is not None:
            items.append(f"plot `{name}` not drawn: {reason}")
    out += [f"- {i}" for i in items] if items else ["Nothing was skipped; every metric applies."]
    return out + [""]


def render_report(rows: Sequence[dict[str, Any]], meta: dict[str, Any] | None = None,
                  plots: dict[str, str | None] | None = None) -> str:
    """The Markdown text of a report (without writing plots).

    Parameters
    ----------
    rows : list of dict
        Result rows.
    meta : dict, optional
        Run facts (``command``, ``skipped``...), printed when present.
    plots : dict, optional
        Plot file name -> ``None`` when drawn, or the reason it was not.
    """
    meta = meta or {}
    plots = plots or {}
    out = ["# slimvec benchmark report", ""]
    if meta.get("command"):
        out += ["Command:", "", "```", str(meta["command"]), "```", ""]
    out += [f"{len(rows)} result rows. Null metrics (not applicable) print as {NULL}.", ""]
    for name, group in _by_dataset(rows).items():
        out += _dataset_section(name, group)
    drawn = [name for name, reason in plots.items() if reason is None]
    if drawn:
        out += ["## Plots", ""] + [f"![{Path(n).stem}]({n})" for n in drawn] + [""]
    out += _notes(rows, meta, plots)
    return "\n".join(out)


def write_report(results_path: str | Path, out_dir: str | Path) -> Path:
    """Write ``report.md`` and the PNG plots of ``results_path`` into ``out_dir``.

    Parameters
    ----------
    results_path : path
        ``results.json`` written by the runner.
    out_dir : path
        Folder for ``report.md`` and the plots (created if missing).

    Returns
    -------
    Path
        The ``report.md`` written.
    """
    from slimvec.benchmarks.plots import draw_all

    rows, meta = load_results(results_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = draw_all(rows, out)
    report = out / "report.md"
    report.write_text(render_report(rows, meta, plots), encoding="utf-8")
    log.info("wrote %s (%d rows, %d plots)", report, len(rows), sum(v is None for v in plots.values()))
    return report
