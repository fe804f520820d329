"""Issue 17's scale tables from the scale suites' results (``python -m benchmarks table scale [DIR]``).

Reads ``DIR/scale-{100k,300k,1m}/results.json`` (the sizes present, default DIR ``bench-results``;
run the suites first: ``slimvec bench --suite benchmarks/suites/scale-1m.toml``) and renders
docs/benchmarks/scale-runs.md:

- the largest size's rows: neighbour recall@10, p50/p99 single-query latency, QPS, build time,
  measured build and serving RSS, disk and RAM bytes per vector;
- growth: build seconds and serving RSS per 1,000 vectors at each size (flat = linear);
- size models: RAM and disk predicted at every size by models fitted at <= 4,000 vectors
  (:func:`slimvec.planner.sizing.calibrate`), against what was measured; the fitted models are
  kept in ``DIR/scale-size-models.json`` (fitted and written when absent), so the page re-renders
  the same (small builds of Qdrant Edge do not measure byte-identical twice);
- the issue's goals, each with the best row that meets it or the reason none does;
- the front: best recall at each budget of serving RAM per vector.

"RAM" is the measured serving RSS of the store (a fresh process that opened it and answered the
queries) divided by the corpus size; full vectors used for rescoring stay on disk and are not in it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from slimvec.benchmarks.analysis import config_label, human_bytes
from slimvec.errors import ConfigError
from slimvec.planner.rows import Row, load_rows

__all__ = ["render_scale", "SIZES"]

SIZES = ("100k", "300k", "1m")
BUDGETS = (384, 192, 96, 48, 24, 12)
#: the goals' reference configuration as a results.json labels it: full-precision HNSW (hnswlib)
REFERENCE_STORE = "hnsw"
log = logging.getLogger(__name__)


#: RAM per vector a rescored search adds: the full vectors' sorted id -> row lookup (two int64
#: arrays, slimvec.connectors.fullvectors); the vectors themselves stay on disk, memory-mapped
RESCORE_LOOKUP_BYTES = 16


def _ram(r: Row) -> float | None:
    """Serving RAM per vector: the store's measured RSS, plus the rescoring lookup when rescored."""
    if not r.serve_rss_bytes or not r.n_corpus:
        return None
    return r.serve_rss_bytes / r.n_corpus + (RESCORE_LOOKUP_BYTES if r.rescore else 0)


def _f(v: float | None, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def _mb(v: float | None) -> str:
    return "–" if v is None else f"{v / 2**20:,.0f}"


def _is_recipe(r: Row) -> bool:
    """A slimvec recipe reduces or rescores from the full vectors on disk (or both); everything
    else (a store on the full vectors, Qdrant's own rescoring, sentence-transformers') is a peer."""
    return not (r.store or "").startswith("st:") and (r.reducer != "none" or bool(r.rescore))


def _label(r: Row) -> str:
    return config_label(r) + ("" if _is_recipe(r) else " (peer)")


def _reference(rows: list[Row]) -> Row | None:
    """hnswlib on the full vectors, no rescoring: the full-precision HNSW of the goals."""
    return next((r for r in rows if r.reducer == "none" and r.store == REFERENCE_STORE and not r.rescore), None)


def _rows_table(rows: list[Row]) -> list[str]:
    out = ["| configuration | recall@10 | p50 ms | p99 ms | QPS | build s | build RSS MB | serve RSS MB | "
           "RAM B/vec | disk B/vec |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (_ram(r) or 1e18, -(r.neighbor_recall_at_k or 0))):
        out.append(f"| {_label(r)} | {_f(r.neighbor_recall_at_k, '.3f')} | {_f(r.latency_p50_ms, '.2f')} | "
                   f"{_f(r.latency_p99_ms, '.2f')} | {_f(r.qps, ',.0f')} | {_f(r.build_s, ',.0f')} | "
                   f"{_mb(r.build_rss_bytes)} | {_mb(r.serve_rss_bytes)} | {_f(_ram(r), ',.0f')} | "
                   f"{_f(r.bytes_per_vector, ',.0f')} |")
    return out


def _growth(by_size: dict[str, list[Row]]) -> list[str]:
    sizes = list(by_size)
    head = " | ".join(f"{s} build s/1k | {s} RSS MB/1k" for s in sizes)
    out = [f"| store build (reducer → store) | {head} |", "|---|" + "---|" * (2 * len(sizes))]
    seen: dict[tuple[str, str], dict[str, Row]] = {}
    for size, rows in by_size.items():
        for r in rows:
            if not r.rescore and r.build_s is not None:
                seen.setdefault((r.reducer or "", r.store or ""), {}).setdefault(size, r)  # the size's own run first
    for (reducer, store), per in sorted(seen.items()):
        cells = []
        for s in sizes:
            got = per.get(s)
            k = got.n_corpus / 1000 if got and got.n_corpus else None
            cells += [_f(got.build_s / k if got and k and got.build_s is not None else None, ".3f"),
                      _f(got.serve_rss_bytes / 2**20 / k if got and k and got.serve_rss_bytes else None, ".3f")]
        out.append(f"| {reducer} → {store} | " + " | ".join(cells) + " |")
    return out


def _models(by_size: dict[str, list[Row]], saved: Path) -> list[str]:
    from slimvec.errors import SlimvecError
    from slimvec.planner.sizing import SizeModel, calibrate

    out = ["| store | dim | size | disk predicted | disk measured | error | RAM predicted | RAM measured | "
           "error |", "|---|---|---|---|---|---|---|---|---|"]
    kept: dict[str, Any] = json.loads(saved.read_text(encoding="utf-8")) if saved.is_file() else {}
    models: dict[str, Any] = {spec: None if m is None else SizeModel.from_json(m) for spec, m in kept.items()}
    for size, rows in by_size.items():
        for r in rows:
            if r.rescore or r.kind == "routed" or not r.store or r.store.startswith("st:"):
                continue
            spec = r.store.split(",rescore=")[0]  # qdrant-edge search variants share one build
            if spec not in models:
                fitted: SizeModel | None = None
                try:
                    fitted = calibrate(spec, sizes=(2000, 4000), dims=(32, 128))[0]
                except (SlimvecError, RuntimeError) as exc:
                    log.warning("no size model for %s: %s", spec, exc)
                models[spec], kept[spec] = fitted, None if fitted is None else fitted.to_json()
                saved.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in kept.items())
                                 + "\n}\n", encoding="utf-8")  # one spec a line
            model = models[spec]
            if model is None:
                continue
            disk = model.disk_bytes(r.n_corpus, r.dim_out)
            ram = model.ram_bytes(r.n_corpus, r.dim_out)
            err_d = (disk - r.index_bytes) / r.index_bytes if r.index_bytes else None
            err_r = (ram - r.serve_rss_bytes) / r.serve_rss_bytes if r.serve_rss_bytes else None
            out.append(f"| {spec} | {r.dim_out} | {size} | {human_bytes(disk)} | {human_bytes(r.index_bytes)} | "
                       f"{_f(err_d, '+.1%')} | {human_bytes(ram)} | {human_bytes(r.serve_rss_bytes)} | "
                       f"{_f(err_r, '+.1%')} |")
    return list(dict.fromkeys(out))  # a store measured once per reducer row group


def _goals(rows: list[Row]) -> list[str]:
    ref = _reference(rows)
    full_ram = _ram(ref) if ref is not None else None
    if ref is None or full_ram is None:
        return ["No full hnswlib reference row with measured RAM: goals not evaluated."]
    full_p50 = ref.latency_p50_ms
    out = [f"Reference: hnswlib M=16 on the full vectors, {_f(full_ram, ',.0f')} B/vector serving RAM, "
           f"p50 {_f(full_p50, '.2f')} ms, recall@10 {_f(ref.neighbor_recall_at_k, '.3f')}.", ""]
    goals = [("recall ≥ 0.99, RAM ≤ 1/6, p50 ≤ reference", 0.99, full_ram / 6, full_p50),
             ("recall ≥ 0.95, RAM ≤ 1/20", 0.95, full_ram / 20, None)]
    for name, floor, budget, p50 in goals:
        fits = [r for r in rows if (_ram(r) or float("inf")) <= budget
                and (p50 is None or (r.latency_p50_ms or 1e9) <= p50)]
        met = [r for r in fits if (r.neighbor_recall_at_k or 0) >= floor]
        if met:
            best = min(met, key=lambda r: (_ram(r), r.latency_p50_ms or 0))
            out.append(f"- **{name}: met** by {_label(best)}: recall {best.neighbor_recall_at_k:.3f}, "
                       f"{_ram(best):,.0f} B/vector, p50 {best.latency_p50_ms:.2f} ms.")
        else:
            near = max(fits, key=lambda r: r.neighbor_recall_at_k or 0, default=None)
            out.append(f"- **{name}: not met.** " + (
                f"Best within the budget: {_label(near)}, recall {near.neighbor_recall_at_k:.3f}."
                if near else "No row fits the budget."))
    return out


def _front(rows: list[Row]) -> list[str]:
    out = ["| RAM budget B/vec | best slimvec recipe | recall@10 | best peer | recall@10 |", "|---|---|---|---|---|"]
    for b in BUDGETS:
        cells = []
        for recipe in (True, False):
            fits = [r for r in rows if _is_recipe(r) == recipe and (_ram(r) or float("inf")) <= b]
            best = max(fits, key=lambda r: (r.neighbor_recall_at_k or 0, -(_ram(r) or 0)), default=None)
            cells += [_label(best), _f(best.neighbor_recall_at_k, ".3f")] if best else ["none fits", "–"]
        out.append(f"| {b} | " + " | ".join(cells) + " |")
    return out


def _load(results: Path) -> tuple[dict[str, list[Row]], dict[str, dict[str, Any]]]:
    by_size: dict[str, list[Row]] = {}
    meta_of: dict[str, dict[str, Any]] = {}
    for size in SIZES:
        path = results / f"scale-{size}" / "results.json"
        if path.is_file():
            by_size[size], meta_of[size] = load_rows(path)
            # extra peer runs on the same data (e.g. scale-1m-qdrant-cold) join their size's rows
            for extra in sorted(results.glob(f"scale-{size}-*/results.json")):
                rows, meta = load_rows(extra)
                by_size[size] += rows
                meta_of[size]["command"] = (meta_of[size].get("command", "") + "` and `"
                                            + meta.get("command", str(extra)))
    if not by_size:
        raise ConfigError(f"No scale results under {results} (expected scale-100k/, scale-300k/ or "
                          "scale-1m/ with a results.json): run the scale suites first.")
    return by_size, meta_of


def render_scale(results: Path, root: Path, models: bool = True) -> str:
    """The scale-runs page from the folder holding ``scale-SIZE/results.json``.

    ``models`` adds the size-model check (it builds small stores: seconds to minutes).
    """
    by_size, meta_of = _load(results)
    last = list(by_size)[-1]
    rows = [r for r in by_size[last] if r.kind != "routed"]
    n = rows[0].n_corpus if rows else 0
    res = results.resolve()
    rel = res.relative_to(root).as_posix() if res.is_relative_to(root) else str(results)
    lines = [f"# Scale runs (issue 17): {', '.join(by_size)} vectors", "",
             f"Generated by `python -m benchmarks table scale {rel}` from "
             + ", ".join(f"`{rel}/scale-{s}/results.json` "
                         f"(`{meta_of[s].get('command', 'slimvec bench --suite benchmarks/suites/scale-' + s + '.toml')}`)"
                         for s in by_size) + ".",
             "", "SYNTHETIC 384-d vectors from a Gaussian mixture fitted to MiniLM vectors of the bundled "
             "sentences (see the suite files); one machine, 2 cores; builds on both cores, searches on one "
             "thread; RAM = measured serving RSS of a fresh process that opened the store and answered "
             "1,000 queries, divided by the corpus size, plus 16 B/vector for rescored rows (the id -> row "
             "lookup of the full vectors, which stay on disk, memory-mapped).", "",
             f"## All rows at {last} ({n:,} vectors)", "", *_rows_table(rows), "",
             "## Goals", "", *_goals(rows), "",
             f"## Best recall per serving-RAM budget at {last}", "", *_front(rows), "",
             "## Growth (per 1,000 vectors; flat across sizes = linear)", "", *_growth(by_size), ""]
    if models:
        lines += ["## Size models fitted at ≤ 4,000 vectors, checked at scale", "",
                  f"The models: `{rel}/scale-size-models.json`.", "", *_models(by_size, results / "scale-size-models.json"), ""]
    return "\n".join(lines)
