"""A nightly-style re-sync against a full re-ingest (issue 25 item 4), on real sentences.

v1 is the first N sentences of the real-text corpus (``python scripts/make_real_corpus.py``;
default ``~/.cache/slimvec-corpus/corpus.jsonl``). v2 changes 1 % of the texts (each replaced by
another corpus sentence), removes 1 % of the rows and adds 1 % new ones. The index is built from v1
with ``--sync``, then the wall time of ``slimvec ingest v2 --index A --sync`` is measured against
``slimvec ingest v2 --index B`` into a new folder (a full re-ingest: what keeping an index equal to
its source cost without ``--sync``). Both are whole CLI processes (Python start and model loading
included), one after the other, with the load average printed: the machine is shared.

    python scripts/bench_sync.py --n 5000 --out bench-results/sync.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rows(path: Path, n: int) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) == n:
                break
    return out


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def _run(args: list[str]) -> tuple[float, dict]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "slimvec", *args, "--json"], capture_output=True,
                          text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path,
                    default=Path.home() / ".cache" / "slimvec-corpus" / "corpus.jsonl")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--recipe", default=None, help="default: the ingest default recipe")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    step = 100  # 1 %
    pool = _rows(args.corpus, args.n + 2 * (args.n // step) + 10)
    v1 = pool[:args.n]
    fresh = iter(pool[args.n:])
    v2 = []
    for i, r in enumerate(v1):
        if i % step == 50:  # removed
            continue
        v2.append({**r, "text": next(fresh)["text"]} if i % step == 0 else r)  # changed
        if i % step == 25:
            v2.append(next(fresh))  # added
    recipe = ["--recipe", args.recipe] if args.recipe else []
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
        t = Path(tmp)
        src = t / "corpus.jsonl"
        _write(src, v1)
        build_s, built = _run(["ingest", str(src), "--index", str(t / "A"), "--sync", *recipe])
        _write(src, v2)
        load_before = os.getloadavg()
        sync_s, synced = _run(["ingest", str(src), "--index", str(t / "A"), "--sync"])
        full_s, full = _run(["ingest", str(src), "--index", str(t / "B"), *recipe])
        load_after = os.getloadavg()
    out = {"n": args.n, "v2_rows": len(v2), "recipe": built.get("recipe"),
           "first_build_s": round(build_s, 1), "sync_s": round(sync_s, 1),
           "full_reingest_s": round(full_s, 1), "speedup": round(full_s / sync_s, 1),
           "sync": {k: synced[k] for k in ("added", "updated", "unchanged", "deleted", "rejected",
                                           "recorded", "count", "encode_seconds")},
           "full": {k: full[k] for k in ("ingested", "rejected", "count", "encode_seconds")},
           "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in load_after], "cpus": os.cpu_count(),
           "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": "python scripts/bench_sync.py " + " ".join(sys.argv[1:])}
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
