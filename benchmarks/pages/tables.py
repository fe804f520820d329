"""Docs pages and tables rendered from runs' results (``python -m benchmarks table KIND RESULTS...``).

Nothing is typed: every cell comes from a ``results.json`` of ``slimvec bench`` or a record of a
``python -m benchmarks KIND`` measurement. :data:`TABLES` maps each kind to its renderer; every renderer
takes the result paths and the checkout root (paths on the page are shown relative to it) and
returns the Markdown text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError
from slimvec.planner.rows import load_rows

__all__ = ["TABLES", "NOTES", "hand_notes", "render_table", "render_sweep", "render_pruning", "render_filtered_page",
           "sweep_load"]

#: stores whose rows the D-sweep tables take, preferred first (exact search)
SWEEP_STORES = ("faiss:Flat", "hnsw")


def _family(spec: str) -> str:
    name, _, rest = spec.partition(":")
    opts = ",".join(rest.split(",")[1:])
    return name + (f" ({opts})" if opts else "")


def sweep_load(paths: list[Path]) -> tuple[dict[tuple[str, int], Any], Any]:
    """One row per (reducer family, D) — the exact-search store when present, never rescored."""
    best: dict[tuple[str, int], Any] = {}
    full = None
    for path in paths:
        for r in load_rows(path)[0]:  # typed rows: one spelling per metric, any k
            if r.get("kind") != "reducer" or r.get("rescore") or r["store"] not in SWEEP_STORES:
                continue
            if r["reducer"] == "none":
                if full is None or r["store"] == SWEEP_STORES[0]:
                    full = r
                continue
            key = (_family(r["reducer"]), int(r["dim_out"]))
            if key not in best or (r["store"] == SWEEP_STORES[0] and best[key]["store"] != SWEEP_STORES[0]):
                best[key] = r
    return best, full


def _fmt(v: float | None, d: int = 3) -> str:
    return "—" if v is None else f"{v:.{d}f}"


def _sweep_table(best: dict, full: Any, metric: str, title: str) -> list[str]:
    dims = sorted({d for _, d in best}, reverse=True)
    fams = sorted({f for f, _ in best}, key=lambda f: (not f.startswith("pca"), f))
    out = [f"### {title}", "", "| reducer | " + " | ".join(f"D={d}" for d in dims) + " |",
           "|---|" + "---|" * len(dims)]
    if full is not None:
        out.append(f"| none (384-d) | {_fmt(full.get(metric))} " + "| " * (len(dims) - 1) + "|")
    pca = {d: best.get(("pca", d), {}).get(metric) for d in dims}
    for fam in fams:
        cells = []
        for d in dims:
            r = best.get((fam, d))
            v = None if r is None else r.get(metric)
            low = v is not None and pca.get(d) is not None and not fam.startswith("pca") and v < pca[d] - 0.005
            cells.append(_fmt(v) + (" ↓" if low else ""))
        out.append(f"| {fam} | " + " | ".join(cells) + " |")
    return out + [""]


def render_sweep(paths: list[Path], root: Path) -> str:
    """The reducer D-sweep tables of docs/benchmarks/reducers.md."""
    best, full = sweep_load(paths)
    lines = _sweep_table(best, full, "task_recall_at_k", "Task recall@10 (↓: more than 0.005 below PCA at the same D)")
    lines += _sweep_table(best, full, "neighbor_recall_at_k", "Neighbour recall@10 against exact 384-d search")
    lines += _sweep_table(best, full, "sts_spearman", "STS-B test Spearman of the reduced vectors")
    lines += ["### Cost: fit seconds / transform seconds per 10k vectors / artifact bytes", "",
              "| reducer | D | fit s | transform s / 10k | artifact bytes |", "|---|---|---|---|---|"]
    for (fam, d), r in sorted(best.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        size = r.get("reducer_bytes")
        lines.append(f"| {fam} | {d} | {_fmt(r.get('fit_s'), 1)} | {_fmt(r.get('transform_s_per_10k'), 3)} | "
                     f"{'— (no safe artifact)' if size is None else f'{size:,}'} |")
    return "\n".join(lines + [""])


def render_pruning(paths: list[Path], root: Path) -> str:
    """docs/benchmarks/pruning.md's table from a ``python -m benchmarks pruning`` record.

    The reference for every delta is the sparsity-0 row *before* rewinding (MiniLM as shipped).
    The goal line checks issue 8's target: >= 1.25x throughput with <= 1 point STS-B loss.
    """
    from slimvec.benchmarks.record import load_record

    result = load_record(paths[0])
    rows = result["rows"]
    base = next((r for r in rows if r["sparsity"] == 0.0), None)
    if base is None:
        raise ConfigError(f"{paths[0]} has no sparsity-0 row, the reference of every delta: run "
                          "`python -m benchmarks pruning` with 0 among --sparsities.")
    ref_sts = base["pruned"]["sts_spearman"]
    lines = ["| sparsity | heads kept | FFN neurons kept | parameter MB | safetensors MB | sentences/s | speed-up | "
             "STS pruned | STS rewound | ΔSTS pruned | ΔSTS rewound | R@10 pruned | R@10 rewound |",
             "|" + "|".join(["---"] * 13) + "|"]
    for r in rows:
        rw = r.get("rewound", {})
        d_pr = r["pruned"]["sts_spearman"] - ref_sts
        d_rw = f"{rw['sts_spearman'] - ref_sts:+.2f}" if rw else ""
        lines.append(
            f"| {r['sparsity']:.0%} | {r['heads']}/72 | {r['ffn_neurons']}/9216 | {r['parameter_bytes'] / 1e6:.1f} | "
            f"{r['safetensors_bytes'] / 1e6:.1f} | {r['sentences_per_s']:.1f} | {r['speedup']:.2f}x | "
            f"{r['pruned']['sts_spearman']:.2f} | {rw.get('sts_spearman', float('nan')):.2f} | {d_pr:+.2f} | "
            f"{d_rw} | {r['pruned']['recall_at_10']:.4f} | {rw.get('recall_at_10', float('nan')):.4f} |")
    met = [(r["sparsity"], kind) for r in rows for kind in ("pruned", "rewound")
           if kind in r and r["speedup"] >= 1.25 and round(r[kind]["sts_spearman"] - ref_sts, 2) >= -1.0]
    goal = ("Goal (>= 1.25x throughput, <= 1 point STS loss): "
            + ("met by " + ", ".join(f"{s:.0%} {k}" for s, k in met) if met else "not met"))
    return "\n".join(lines) + "\n\n" + goal + "\n"


def render_filtered_page(paths: list[Path], root: Path) -> str:
    """docs/benchmarks/filtered.md from a filtered-suite run's results.json."""
    from benchmarks.pages.filtered_text import filtered_intro, quiet_note
    from slimvec.benchmarks.filtered import render_filtered
    from slimvec.planner.rows import load_rows

    results = paths[0]
    rows, meta = load_rows(results)
    filtered = [r for r in rows if r.selectivity is not None]
    if not filtered:
        raise ConfigError(f"{results} has no filtered-search rows: run a suite with filtered = [...] "
                          "(benchmarks/suites/filtered.toml).")
    first = filtered[0]
    ds = (meta.get("datasets") or [{}])[0]
    command = meta.get("command") or "slimvec bench --suite benchmarks/suites/filtered.toml"
    paragraph, suffix = quiet_note(meta.get("machine") or {})
    res = results.resolve()
    rel = res.relative_to(root).as_posix() if res.is_relative_to(root) else str(results)
    notes = ds.get("notes")  # held-out queries leave no note; corpus-row queries say so
    own = notes is None or any("excluded from its own results" in str(n) for n in notes)
    return "\n".join([
        "# Filtered search (issue 25, issue 28 item 6, issue 37)", "",
        f"Generated by `python -m benchmarks table filtered {rel}`; nothing typed by hand. "
        f"Corpus {first.n_corpus:,} MiniLM sentence vectors ({ds.get('name', first.dataset)}), "
        f"{first.n_queries:,} queries ({'corpus rows, each excluded from its own results' if own else 'held-out sentences, not in the corpus'}), "
        f"k = {first.k}.", "",
        *filtered_intro(paragraph, realtext=not own), "Command:", "", "```", str(command), "```", "",
        *render_filtered(filtered, note=suffix),
    ]) + "\n"


def _fair_peers(paths: list[Path], root: Path) -> str:
    from benchmarks.pages.table_peers import render_fair_peers

    return render_fair_peers([p.resolve() for p in paths], root)


def _realtext(paths: list[Path], root: Path) -> str:
    from benchmarks.pages.table_peers import render_realtext

    return render_realtext([p.resolve() for p in paths], root)


def _scale(paths: list[Path], root: Path) -> str:
    from benchmarks.pages.table_scale import render_scale

    return render_scale(paths[0], root, models=True)


def _headline(paths: list[Path], root: Path) -> str:
    from benchmarks.pages.table_front import render_headline

    return render_headline([p.resolve() for p in paths], root)


def _ingest_ceiling(paths: list[Path], root: Path) -> str:
    from benchmarks.kinds.ingest import ceiling_markdown
    from slimvec.benchmarks.record import load_record

    return ceiling_markdown(load_record(paths[0]))


def _sizing(paths: list[Path], root: Path) -> str:
    from benchmarks.kinds.sizing_page import sizing_markdown, sizing_record

    path = paths[0].resolve()
    return sizing_markdown(*sizing_record(path), path.relative_to(root).as_posix() if path.is_relative_to(root)
                           else str(paths[0]))


def _default_recipe(paths: list[Path], root: Path) -> str:
    from benchmarks.kinds.recipe_choice import render_choice_runs

    return render_choice_runs(paths, root)


#: kind -> (renderer, default results relative to the checkout, default page or None: print)
TABLES: dict[str, tuple[Callable[[list[Path], Path], str], list[str], str | None]] = {
    "sweep": (render_sweep, ["bench-results/sweep/results.json",
                             "bench-results/sweep-96-48/results.json"], None),
    "pruning": (render_pruning, ["bench-results/pruning/pruning.json"], None),
    "filtered": (render_filtered_page, ["bench-results/filtered/results.json"], "docs/benchmarks/filtered.md"),
    "fair-peers": (_fair_peers, ["bench-results/fair-peers/results.json"], "docs/benchmarks/fair-peers.md"),
    "realtext": (_realtext, ["bench-results/realtext-300k/results.json", "bench-results/realtext-100k/results.json"],
                 "docs/benchmarks/realtext.md"),
    "scale": (_scale, ["bench-results"], "docs/benchmarks/scale-runs.md"),
    "sizing": (_sizing, ["docs/benchmarks/sizing.json"], "docs/benchmarks/sizing.md"),
    "default-recipe": (_default_recipe, ["docs/benchmarks/default-recipe.json",
                                         "docs/benchmarks/default-recipe-beam128.json",
                                         "docs/benchmarks/default-recipe-efc.json"],
                       "docs/benchmarks/default-recipe-runs.md"),
    "ingest-ceiling": (_ingest_ceiling, ["docs/benchmarks/ingest-ceiling-20k.json"],
                       "docs/benchmarks/ingest-ceiling-20k.md"),
    # the runs with every peer re-ranked and serving RAM measured: real text (300k, 100k), then synthetic
    "headline": (_headline, ["bench-results/realtext-300k/results.json", "bench-results/realtext-100k/results.json",
                             "bench-results/scale-100k-fair/results.json"],
                 "docs/benchmarks/headline.md"),
}


#: a page's hand-written notes start at this line (after a blank one): ``table`` keeps them below what it renders
NOTES = "\n<!-- hand-written notes below: not generated, kept when the page is re-rendered -->"


def hand_notes(page: Path) -> str:
    """The hand-written notes that end ``page`` (from the :data:`NOTES` line on), or ""."""
    old = page.read_text(encoding="utf-8") if page.is_file() else ""
    return old[old.find(NOTES):] if NOTES in old else ""


def render_table(kind: str, paths: list[Path], root: Path) -> str:
    """Render table ``kind`` from ``paths`` (its defaults under ``root`` when empty)."""
    if kind not in TABLES:
        raise ConfigError(f"Unknown table kind {kind!r}: expected one of {', '.join(TABLES)}.")
    render, defaults, _ = TABLES[kind]
    paths = list(paths) or [root / d for d in defaults]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(f"No results at {', '.join(missing)} for table {kind!r}: pass the results the run "
                          "wrote (its --out folder's results.json, or the record of `python -m benchmarks KIND --out`).")
    text: str = render(paths, root)
    return text
