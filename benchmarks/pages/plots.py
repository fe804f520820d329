"""PNG plots of benchmark rows with matplotlib (Agg, no display, no pyplot global state).

Each plot function returns ``None`` when it drew the file, or the reason it could not (no row
has the metrics it needs); :func:`draw_all` collects them for the report's notes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slimvec.benchmarks.analysis import by_dataset, config_label, num, pareto_front, quality_metric, rescore_suffix, row_k
from slimvec.planner.rows import Row, metric_title

__all__ = ["PLOTS", "draw_all", "plot_pareto", "plot_latency_vs_dim", "plot_quality_vs_dim"]

log = logging.getLogger(__name__)

#: file names of the plots, in report order
PLOTS = ("pareto_task_recall.png", "pareto_neighbor_recall.png", "latency_vs_dim.png",
         "quality_vs_dim.png")


def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8), dpi=110, layout="constrained")
    return fig, fig.add_subplot()


def _family(spec: Any) -> str:
    return str(spec or "?").split(":", 1)[0]


def plot_pareto(rows: Sequence[Row], metric: str, path: Path) -> str | None:
    """``metric`` against bytes per vector (log scale), every row a point, the front a line."""
    usable = [r for r in rows if num(r, metric) is not None and num(r, "bytes_per_vector")]
    if not usable:
        return f"no row has both bytes_per_vector and {metric}"
    fig, ax = _figure()
    for i, (name, group) in enumerate(by_dataset(usable).items()):
        color = f"C{i % 10}"
        ax.scatter([num(r, "bytes_per_vector") for r in group], [num(r, metric) for r in group],
                   s=18, alpha=0.5, color=color, label=f"{name}: all configurations")
        front = pareto_front(group, "bytes_per_vector", metric)
        xs = [num(r, "bytes_per_vector") for r in front]
        ys = [num(r, metric) for r in front]
        ax.step(xs, ys, where="post", color=color, linewidth=1.5, label=f"{name}: Pareto front")
        ax.scatter(xs, ys, s=36, color=color, edgecolor="black", zorder=3)
        for r, x, y in zip(front, xs, ys):
            ax.annotate(config_label(r), (x, y), fontsize=6, xytext=(3, -9), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per vector (allocated on disk / n)")
    title = metric_title(metric, row_k(usable[0]))
    ax.set_ylabel(title)
    ax.set_title(f"{title} against bytes per vector")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path)
    return None


def plot_latency_vs_dim(rows: Sequence[Row], path: Path) -> str | None:
    """Median single-query latency against the stored dimension, one line per store."""
    usable = [r for r in rows if num(r, "latency_p50_ms") is not None and num(r, "dim_out")]
    if not usable:
        return "no row has latency_p50_ms and dim_out"
    fig, ax = _figure()
    stores: dict[str, list[Row]] = {}
    for r in usable:
        label = str(r.store) + rescore_suffix(r)
        stores.setdefault(label, []).append(r)
    for label, group in sorted(stores.items()):
        by_dim: dict[float, list[float]] = {}
        for r in group:
            by_dim.setdefault(num(r, "dim_out") or 0.0, []).append(num(r, "latency_p50_ms") or 0.0)
        dims = sorted(by_dim)
        ax.plot(dims, [sorted(by_dim[d])[len(by_dim[d]) // 2] for d in dims], marker="o", label=label)
    ax.set_xlabel("stored dimension")
    ax.set_ylabel("p50 single-query latency (ms)")
    ax.set_title("Latency against dimension (median over reducers at each dimension)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path)
    return None


def plot_quality_vs_dim(rows: Sequence[Row], path: Path) -> str | None:
    """Quality against the reduced dimension, one line per reducer family (best over stores)."""
    metric = quality_metric(rows)
    usable = [r for r in rows if num(r, metric) is not None and num(r, "dim_out")]
    if not usable:
        return f"no row has {metric} and dim_out"
    fig, ax = _figure()
    families: dict[str, dict[float, float]] = {}
    for r in usable:
        best = families.setdefault(_family(r.reducer), {})
        dim, value = num(r, "dim_out") or 0.0, num(r, metric) or 0.0
        best[dim] = max(best.get(dim, value), value)
    for family, best in sorted(families.items()):
        dims = sorted(best)
        ax.plot(dims, [best[d] for d in dims], marker="o", label=family)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("reduced dimension")
    title = metric_title(metric, row_k(usable[0]))
    ax.set_ylabel(f"{title} (best over stores)")
    ax.set_title(f"{title} against dimension per reducer")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path)
    return None


def draw_all(rows: Sequence[Row], out_dir: Path) -> dict[str, str | None]:
    """Draw every plot into ``out_dir``; returns file name -> ``None`` or the reason it was skipped."""
    rows = list(rows)
    out_dir = Path(out_dir)
    jobs = {
        PLOTS[0]: lambda p: plot_pareto(rows, "task_recall_at_k", p),
        PLOTS[1]: lambda p: plot_pareto(rows, "neighbor_recall_at_k", p),
        PLOTS[2]: lambda p: plot_latency_vs_dim(rows, p),
        PLOTS[3]: lambda p: plot_quality_vs_dim(rows, p),
    }
    result: dict[str, str | None] = {}
    for name, job in jobs.items():
        path = out_dir / name
        result[name] = job(path)
        if result[name] is not None:
            log.info("plot %s skipped: %s", name, result[name])
    return result
