"""Render the reducer D-sweep tables of docs/benchmarks/reducers.md from bench results.

Reads one or more ``results.json`` of ``slimvec bench`` (the sweep with ``faiss:Flat`` and the
development run), keeps one row per (reducer, D) — the exact-search store when present, never a
rescored row — and prints Markdown: a task-recall table (reducers × D), the same for neighbour
recall and STS Spearman, and a cost table. Nothing is typed in: every cell comes from the rows.

Usage: python scripts/sweep_table.py bench-results/sweep/results.json bench-results/dev/results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PREFERRED_STORES = ("faiss:Flat", "hnsw")


def _family(spec: str) -> str:
    name, _, rest = spec.partition(":")
    opts = ",".join(p for p in rest.split(",")[1:])
    return f"{name}" + (f" ({opts})" if opts else "")


def load(paths: list[str]) -> tuple[dict[tuple[str, int], dict], dict | None]:
    best: dict[tuple[str, int], dict] = {}
    full = None
    for path in paths:
        rows = json.loads(Path(path).read_text())["rows"]
        for r in rows:
            if r.get("kind") != "reducer" or r.get("rescore") or r["store"] not in PREFERRED_STORES:
                continue
            if r["reducer"] == "none":
                if full is None or r["store"] == "faiss:Flat":
                    full = r
                continue
            key = (_family(r["reducer"]), int(r["dim_out"]))
            if key not in best or (r["store"] == "faiss:Flat" and best[key]["store"] != "faiss:Flat"):
                best[key] = r
    return best, full


def fmt(v, d=3):
    return "—" if v is None else f"{v:.{d}f}"


def table(best, full, metric: str, title: str) -> list[str]:
    dims = sorted({d for _, d in best}, reverse=True)
    fams = sorted({f for f, _ in best}, key=lambda f: (not f.startswith("pca"), f))
    out = [f"### {title}", "", "| reducer | " + " | ".join(f"D={d}" for d in dims) + " |",
           "|---|" + "---|" * len(dims)]
    if full is not None:
        out.append(f"| none (384-d) | {fmt(full.get(metric))} " + "| " * (len(dims) - 1) + "|")
    pca = {d: best.get(("pca", d), {}).get(metric) for d in dims}
    for fam in fams:
        cells = []
        for d in dims:
            r = best.get((fam, d))
            v = None if r is None else r.get(metric)
            mark = ""
            if v is not None and pca.get(d) is not None and not fam.startswith("pca") and v < pca[d] - 0.005:
                mark = " ↓"
            cells.append(fmt(v) + mark)
        out.append(f"| {fam} | " + " | ".join(cells) + " |")
    return out + [""]


def costs(best) -> list[str]:
    out = ["### Cost: fit seconds / transform seconds per 10k vectors / artifact bytes", "",
           "| reducer | D | fit s | transform s / 10k | artifact bytes |", "|---|---|---|---|---|"]
    for (fam, d), r in sorted(best.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        size = r.get("reducer_bytes")
        out.append(f"| {fam} | {d} | {fmt(r.get('fit_s'), 1)} | {fmt(r.get('transform_s_per_10k'), 3)} | "
                   f"{'— (no safe artifact)' if size is None else f'{size:,}'} |")
    return out + [""]


def main() -> None:
    best, full = load(sys.argv[1:])
    lines = table(best, full, "task_recall_at_10", "Task recall@10 (↓: more than 0.005 below PCA at the same D)")
    lines += table(best, full, "neighbor_recall_at_10", "Neighbour recall@10 against exact 384-d search")
    lines += table(best, full, "sts_spearman", "STS-B test Spearman of the reduced vectors")
    lines += costs(best)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
