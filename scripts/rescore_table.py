"""Render the two-stage-search table of docs/benchmarks/rescore.md from a bench results.json.

For each dataset (encoder): every reduced row and every peer row with its bytes/vector and p50
latency as ratios to the full-dimension hnswlib row of the same run (measured side by side), its
neighbour recall@10, and whether it meets issue 7's goal (recall >= 0.99, bytes <= 1/4, p50 <= 1).

Usage: python scripts/rescore_table.py bench-results/rescore/results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: str) -> None:
    rows = json.loads(Path(path).read_text())["rows"]
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        group = [r for r in rows if r["dataset"] == dataset and r["kind"] in ("reducer", "peer")]
        base = next(r for r in group if r["reducer"] == "none" and r["store"] == "hnsw" and not r["rescore"])
        print(f"### {dataset} (encoder {base['encoder']}, {base['dim_in']}-d)\n")
        print(f"Reference: full-dimension hnswlib, {base['bytes_per_vector']:,.0f} B/vector, "
              f"p50 {base['latency_p50_ms']:.3f} ms, neighbour recall@10 {base['neighbor_recall_at_10']:.3f}.\n")
        print("| configuration | R | bytes/vec | × full HNSW bytes | nbr R@10 | task R@10 | p50 ms | × full HNSW p50 | goal |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in sorted(group, key=lambda r: (r["kind"], r["reducer"] != "none", -r["dim_out"], r["store"],
                                              r["rescore"] or 0)):
            b = r["bytes_per_vector"] / base["bytes_per_vector"]
            t = r["latency_p50_ms"] / base["latency_p50_ms"]
            goal = r["neighbor_recall_at_10"] >= 0.99 and b <= 0.25 and t <= 1.0
            print(f"| {r['reducer']} → {r['store']} | {r['rescore'] or 1} | {r['bytes_per_vector']:,.0f} | "
                  f"{b:.2f} | {r['neighbor_recall_at_10']:.3f} | {r['task_recall_at_10']:.3f} | "
                  f"{r['latency_p50_ms']:.3f} | {t:.2f} | {'**yes**' if goal else ''} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
