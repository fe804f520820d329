"""Failures under ``--engine ray``: an encoder actor killed, the driver killed (real kill -9).

Kept cheap: a tiny corpus in blocks of 4 rows, a random-projection reducer, a commit after every
block, and the session's Ray runtime (the driver-kill test's subprocess joins it with
``--ray-address`` rather than starting its own).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from slimvec.ids import doc_id
from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions
from tests.engines.conftest import write_jsonl

ACTOR_TITLE = b"MapBatches(EncodeReduce)"
N_DOCS, BLOCK = 120, 4
BLOCKS = N_DOCS // BLOCK  # 30


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - out
        out |= frontier
    return out


def _encoder_actor_pids() -> list[int]:
    pids = []
    for pid in _descendants(os.getpid()):
        try:
            if ACTOR_TITLE in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except OSError:
            continue
    return sorted(pids)


def _committed_blocks(folder: Path) -> int:
    try:
        progress = json.loads((folder / "manifest.json").read_text()).get("progress") or {}
    except (OSError, ValueError):
        return 0
    if progress.get("state") != "running":
        return 0
    return sum(map(len, (progress.get("committed") or {}).values()))


def _all_found(folder: Path, docs: list[dict]) -> bool:
    with open_index(folder) as idx:
        found = idx.payloads([doc_id(d["id"]) for d in docs])
    return all(p is not None for p in found)


def test_encoder_actor_killed_mid_job_loses_and_duplicates_nothing(ray_runtime, docs_200, tmp_path):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest

    docs = docs_200[:N_DOCS]
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    folder = tmp_path / "idx"
    opts = IngestOptions(reducer="rp:32", fit_sample=32, batch_size=BLOCK, progress=False,
                         checkpoint_batches=1)
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["summary"] = ray_ingest(str(src), folder, opts, RayOptions(workers=1))
        except BaseException as exc:  # surfaced by the assertion below
            result["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    killed = None
    deadline = time.monotonic() + 90
    while worker.is_alive() and time.monotonic() < deadline and killed is None:
        if _committed_blocks(folder) >= 1:
            pids = _encoder_actor_pids()
            if pids:
                killed = pids[0]
                os.kill(killed, signal.SIGKILL)
        time.sleep(0.02)
    worker.join(timeout=120)
    assert killed is not None, "the job ended before an encoder actor could be killed"
    assert "error" not in result, result.get("error")
    summary = result["summary"]
    assert summary.ingested == N_DOCS  # every block upserted once by the single writer
    assert summary.rows == N_DOCS and summary.rejected == 0
    with open_index(folder) as idx:
        assert idx.info()["count"] == N_DOCS
    assert _all_found(folder, docs)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sum(map(len, manifest["progress"]["committed"].values())) == BLOCKS


def test_driver_killed_then_same_command_resumes(ray_runtime, docs_200, tmp_path):
    """kill -9 of the ``slimvec ingest --engine ray`` process; rerunning it completes the index."""
    docs = docs_200[:N_DOCS]
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    folder = tmp_path / "idx"
    address = ray_runtime.get_runtime_context().gcs_address
    cmd = [sys.executable, "-m", "slimvec", "ingest", str(src), "--index", str(folder),
           "--engine", "ray", "--ray-address", address, "--workers", "1", "--reducer", "rp:32",
           "--fit-sample", "32", "--batch-size", str(BLOCK), "--checkpoint-batches", "1",
           "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while proc.poll() is None and time.monotonic() < deadline and _committed_blocks(folder) < 3:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed: " + \
        proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)  # the driver only; its actors die with its job
    proc.wait(timeout=30)
    before = _committed_blocks(folder)
    assert 3 <= before < BLOCKS
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["resumed_from"] is not None
    assert summary["count"] == N_DOCS
    assert summary["ingested"] == N_DOCS - BLOCK * before  # exactly the uncommitted blocks
    assert _all_found(folder, docs)
