"""Ray engine overhead and scaling on one machine: the same N documents ingested by
``slimvec ingest`` in one process, with ``--engine ray --workers 2`` and ``--workers 1``.

    PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/scaleout_bench.py --docs 20000 --out out/scaleout

Each run is a fresh ``python -m slimvec ingest ... --json`` subprocess into a new index folder;
the table reports the summary's docs/s (ingested documents / run seconds, model loading excluded
for the single process; Ray start-up and actor model loading included for the Ray engine) and the
command's wall time. The single process runs with torch's default threads (all cores), each Ray
actor with one thread and one CPU. Writes ``results.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"


def corpus(n: int, path: Path) -> Path:
    """The first ``n`` unique sentences of the bundled pair files, as JSONL with ids."""
    seen: dict[str, None] = {}
    for name in ("stsb-train.tsv", "sick-train.tsv", "msrp-train.tsv", "stsb-dev.tsv", "stsb-test.tsv"):
        with open(DATA / name, encoding="utf-8") as fh:
            next(fh)
            for line in fh:
                for s in line.rstrip("\n").split("\t")[:2]:
                    if s.strip():
                        seen.setdefault(s.strip())
    with open(DATA / "sentences.jsonl", encoding="utf-8") as fh:
        for line in fh:
            seen.setdefault(json.loads(line)["text"])
    texts = list(seen)
    if len(texts) < n:
        raise SystemExit(f"only {len(texts)} unique bundled sentences, asked {n}")
    with open(path, "w", encoding="utf-8") as out:
        for i, t in enumerate(texts[:n]):
            out.write(json.dumps({"id": f"doc{i}", "text": t}) + "\n")
    return path


def run(args: list[str], threads: int | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "slimvec", "ingest", *args, "--json"],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    out = json.loads(proc.stdout)
    out["wall_seconds"] = round(wall, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--out", default="out/scaleout")
    ap.add_argument("--runs", default="local,ray2,ray1")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    src = corpus(a.docs, out / "corpus.jsonl")
    rows = []
    for name in a.runs.split(","):
        index = out / f"idx-{name}"
        extra = [] if name == "local" else ["--engine", "ray", "--workers", name[3:]]
        # one process: torch's default threads (all cores); Ray actors: 1 thread each
        res = run([str(src), "--index", str(index), "--rebuild", *extra], None if name == "local" else 1)
        row = {"run": name, "docs": res["ingested"], "docs_per_s": res["docs_per_s"],
               "total_seconds": round(res["total_seconds"], 1), "fit_seconds": round(res["fit_seconds"], 2),
               "stream_seconds": round(res["seconds"], 1), "wall_seconds": res["wall_seconds"],
               "load1": round(os.getloadavg()[0], 2)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    (out / "results.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
