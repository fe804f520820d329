"""The two-stage-search tables of docs/benchmarks/rescore.md, rendered into ``report.md``.

Two tables, both from rows of the one schema (no script of their own):

- :func:`render_two_stage` (was ``scripts/rescore_table.py``): every reducer and peer row of a
  dataset with its bytes/vector and p50 as ratios to the full-dimension hnswlib row of the same
  run, its neighbour and task recall, and whether it meets issue 7's goal (recall >= 0.99, bytes
  <= 1/4, p50 <= 1). The reference is the full-dimension row of the run's first store (hnswlib
  in ``rescore.toml``); written when the run re-ranked (``rescore``).
- :func:`render_recipes` (was ``scripts/bench_rescore.py --render``): the index recipes built and
  searched through ``Index.search`` (:mod:`slimvec.benchmarks.recipes`), bytes split into the
  searchable index, the full vectors and the folder, ratios to the first full-dimension recipe.
"""

from __future__ import annotations

from collections.abc import Sequence

from slimvec.planner.rows import Row

__all__ = ["render_two_stage", "render_recipes"]


def _f(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def render_two_stage(group: Sequence[Row]) -> list[str]:
    """Markdown lines of the two-stage table of one dataset's rows (empty when not applicable)."""
    rows = [r for r in group if r.kind in ("reducer", "peer")]
    # the reference: the full-dimension row of the run's first store (rows come in run order;
    # hnswlib in rescore.toml), never re-ranked
    base = next((r for r in rows if r.kind == "reducer" and r.reducer == "none" and not r.rescore), None)
    if base is None or not any(r.rescore for r in rows):
        return []
    k = base.k
    out = [f"### Two-stage search against full-dimension {base.store}", "",
           f"Reference: full-dimension {base.store}, {_f(base.bytes_per_vector, ',.0f')} B/vector, "
           f"p50 {_f(base.latency_p50_ms, '.3f')} ms, neighbour recall@{k} "
           f"{_f(base.neighbor_recall_at_k, '.3f')}.", "",
           f"| configuration | R | bytes/vec | × full HNSW bytes | nbr R@{k} | task R@{k} | p50 ms | "
           "× full HNSW p50 | goal |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (str(r.kind), r.reducer != "none", -(r.dim_out or 0), str(r.store),
                                         r.rescore or 0)):
        b = _ratio(r.bytes_per_vector, base.bytes_per_vector)
        t = _ratio(r.latency_p50_ms, base.latency_p50_ms)
        goal = (r.neighbor_recall_at_k or 0) >= 0.99 and b is not None and b <= 0.25 and t is not None and t <= 1
        out.append(f"| {r.reducer} → {r.store} | {r.rescore or 1} | {_f(r.bytes_per_vector, ',.0f')} | "
                   f"{_f(b, '.2f')} | {_f(r.neighbor_recall_at_k, '.3f')} | {_f(r.task_recall_at_k, '.3f')} | "
                   f"{_f(r.latency_p50_ms, '.3f')} | {_f(t, '.2f')} | {'**yes**' if goal else ''} |")
    return out + [""]


def render_recipes(group: Sequence[Row]) -> list[str]:
    """Markdown lines of the index-recipe table of one dataset's rows (empty without recipe rows)."""
    rows = [r for r in group if r.kind == "recipe"]
    if not rows:
        return []
    base = next((r for r in rows if r.reducer == "none"), rows[0])  # the first full-dimension recipe
    k = rows[0].k
    out = ["### Index recipes (built by migrate, searched with Index.search)", "",
           f"| recipe | R | neighbour recall@{k} | task recall@{k} | p50 ms | p99 ms | searchable B/vec | "
           "vs first none | full B/vec | disk B/vec |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        depth = "-" if not r.rescore else str(r.rescore)
        if r.extra.get("calibrated_depth") == r.rescore and r.rescore:
            depth += " (auto)"
        out.append(f"| {r.store} | {depth} | {_f(r.neighbor_recall_at_k, '.4f')} | "
                   f"{_f(r.task_recall_at_k, '.3f')} | {_f(r.latency_p50_ms, '.3f')} | "
                   f"{_f(r.latency_p99_ms, '.3f')} | {_f(r.bytes_per_vector, ',.0f')} | "
                   f"{_f(_ratio(r.bytes_per_vector, base.bytes_per_vector), '.2f')} | "
                   f"{_f(r.full_bytes_per_vector or 0.0, ',.0f')} | "
                   f"{_f(r.extra.get('disk_bytes_per_vector'), ',.0f')} |")
    return out + [""]
