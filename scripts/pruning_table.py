"""Render the JSON of scripts/bench_pruning.py as the Markdown table of docs/benchmarks/pruning.md.

Usage: python scripts/pruning_table.py bench-results/pruning/pruning.json

The reference for every delta is the sparsity-0 row *before* rewinding, i.e. the packaged MiniLM
as shipped. The goal line checks issue 8's target: >= 1.25x encoder throughput with <= 1 point
STS-B Spearman loss, for either the pruned-only or the rewound model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def render(result: dict[str, Any]) -> str:
    """Return the Markdown table and the derived goal check for one bench_pruning result."""
    rows = result["rows"]
    base = next(r for r in rows if r["sparsity"] == 0.0)
    ref_sts = base["pruned"]["sts_spearman"]
    head = ("| sparsity | heads kept | FFN neurons kept | parameter MB | safetensors MB | "
            "sentences/s | speed-up | STS pruned | STS rewound | ΔSTS pruned | ΔSTS rewound | "
            "R@10 pruned | R@10 rewound |")
    lines = [head, "|" + "|".join(["---"] * 13) + "|"]
    for r in rows:
        rw = r.get("rewound", {})
        d_pr = r["pruned"]["sts_spearman"] - ref_sts
        d_rw = rw["sts_spearman"] - ref_sts if rw else None
        lines.append(
            f"| {r['sparsity']:.0%} | {r['heads']}/72 | {r['ffn_neurons']}/9216 | "
            f"{_mb(r['parameter_bytes'])} | {_mb(r['safetensors_bytes'])} | "
            f"{r['sentences_per_s']:.1f} | {r['speedup']:.2f}x | {r['pruned']['sts_spearman']:.2f} | "
            f"{rw.get('sts_spearman', float('nan')):.2f} | {d_pr:+.2f} | "
            f"{'' if d_rw is None else f'{d_rw:+.2f}'} | {r['pruned']['recall_at_10']:.4f} | "
            f"{rw.get('recall_at_10', float('nan')):.4f} |")
    met = [(r["sparsity"], kind) for r in rows for kind in ("pruned", "rewound")
           if kind in r and r["speedup"] >= 1.25
           and round(r[kind]["sts_spearman"] - ref_sts, 2) >= -1.0]
    goal = ("Goal (>= 1.25x throughput, <= 1 point STS loss): "
            + ("met by " + ", ".join(f"{s:.0%} {k}" for s, k in met) if met else "not met"))
    return "\n".join(lines) + "\n\n" + goal + "\n"


def main() -> None:
    result = json.loads(Path(sys.argv[1]).read_text())
    sys.stdout.write(render(result))


if __name__ == "__main__":
    main()
