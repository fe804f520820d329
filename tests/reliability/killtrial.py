"""One kill -9 / resume trial of a real ``slimvec ingest`` subprocess (used by
tests/reliability/test_kill_resume.py), and the migrated index the delete and compact kill trials
start from."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from slimvec.index.folder import open_index

DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data" / "sentences.jsonl"


def make_corpus(path: Path, n: int = 1500) -> list[dict]:
    """Write the first ``n`` rows of the bundled sentences as JSONL; return the rows."""
    rows = []
    with open(DATA, encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) == n:
                break
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def ingest_cmd(corpus: Path, index: Path, store: str) -> list[str]:
    return [sys.executable, "-m", "slimvec", "ingest", str(corpus), "--index", str(index),
            "--reducer", "pca:16", "--store", store, "--fit-sample", "300",
            "--batch-size", "32", "--checkpoint-batches", "1", "--json"]


def run_trial(corpus: Path, rows: list[dict], index: Path, store: str, seed: int,
              sample: int = 20) -> dict:
    """SIGKILL an ingest at a seeded random moment, resume it, check the invariants.

    Returns a dict with ``killed`` (whether the kill landed before the run ended), ``lost``
    (unique documents missing), ``duplicates`` (stored points beyond the unique count) and
    ``unsearchable`` (sampled documents whose exact text was not found).
    """
    rng = random.Random(seed)
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    cmd = ingest_cmd(corpus, index, store)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    # wait until the index folder exists (model loaded, writing started), then a random delay
    deadline = time.monotonic() + 120
    while not index.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 2.5))
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    resumed = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if resumed.returncode != 0:
        raise AssertionError(f"resume failed ({resumed.returncode}): {resumed.stderr[-2000:]}")
    unique = {r["id"]: r["text"] for r in rows}
    with open_index(index) as idx:
        count = idx.store.count()
        picks = rng.sample(list(unique.items()), sample)
        res = idx.search([t for _, t in picks], k=5)
        unsearchable = 0
        for qi, (_, text) in enumerate(picks):
            ids = [int(i) for i in res.ids[qi] if i >= 0]
            texts = [(p or {}).get("text") for p in idx.payloads(ids)]
            unsearchable += text not in texts
    return {"store": store, "seed": seed, "killed": killed, "count": count,
            "lost": max(0, len(unique) - count), "duplicates": max(0, count - len(unique)),
            "unsearchable": unsearchable}


def migrated_index(vectors, folder_factory, recipe: str, n: int):
    """An index of ``n`` real vectors migrated with ``recipe`` (ids ``doc-i``, payload ``g`` =
    i % 5); returns its folder, the vectors and the store id of each document."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import slimvec
    from slimvec.migrate import MigrateOptions, migrate

    src = folder_factory.mktemp("src") / "s.parquet"
    vecs = np.ascontiguousarray(vectors[:n])
    pq.write_table(pa.table({"id": [f"doc-{i}" for i in range(n)], "vector": [v.tolist() for v in vecs],
                            "g": [i % 5 for i in range(n)]}), src)
    folder = folder_factory.mktemp("idx") / "idx"
    migrate(str(src), folder, MigrateOptions(progress=False, recipe=recipe))
    with slimvec.open(folder) as idx:
        sids = np.array([r["store_id"] for r in idx.get([f"doc-{i}" for i in range(n)])])
    return folder, vecs, sids
