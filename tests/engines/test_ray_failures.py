"""Failures under ``--engine ray``: an encoder actor process killed mid-job (real kill -9)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from slimvec.ids import doc_id
from slimvec.indexer.index import open_index
from slimvec.indexer.pipeline import IngestOptions
from tests.engines.conftest import write_jsonl

ACTOR_TITLE = b"MapBatches(EncodeReduce)"


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


def test_encoder_actor_killed_mid_job_loses_and_duplicates_nothing(ray_runtime, docs_600, tmp_path):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest

    src = write_jsonl(tmp_path / "docs.jsonl", docs_600)
    folder = tmp_path / "idx"
    opts = IngestOptions(reducer="pca:32", fit_sample=200, batch_size=32, progress=False,
                         checkpoint_batches=1)
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["summary"] = ray_ingest(str(src), folder, opts, RayOptions(workers=2))
        except BaseException as exc:  # surfaced by the assertion below
            result["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    killed = None
    deadline = time.monotonic() + 120
    while worker.is_alive() and time.monotonic() < deadline and killed is None:
        if _committed_blocks(folder) >= 1:
            pids = _encoder_actor_pids()
            if pids:
                killed = pids[0]
                os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    worker.join(timeout=180)
    assert killed is not None, "the job ended before an encoder actor could be killed"
    assert "error" not in result, result.get("error")
    summary = result["summary"]
    assert summary.ingested == 600  # every block upserted once by the single writer
    assert summary.rows == 600 and summary.rejected == 0
    with open_index(folder) as idx:
        assert idx.info()["count"] == 600
        found = idx.payloads([doc_id(d["id"]) for d in docs_600])
    assert all(p is not None for p in found)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sum(map(len, manifest["progress"]["committed"].values())) == 19  # ceil(600 / 32)


@pytest.mark.slow
def test_driver_killed_then_same_command_resumes(docs_600, tmp_path):
    """kill -9 of the ``slimvec ingest --engine ray`` process; rerunning it completes the index."""
    import subprocess
    import sys


    pytest.importorskip("ray.data")
    src = write_jsonl(tmp_path / "docs.jsonl", docs_600)
    folder = tmp_path / "idx"
    cmd = [sys.executable, "-m", "slimvec", "ingest", str(src), "--index", str(folder),
           "--engine", "ray", "--workers", "2", "--reducer", "pca:32", "--fit-sample", "200",
           "--batch-size", "32", "--checkpoint-batches", "1", "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 150
    while proc.poll() is None and time.monotonic() < deadline and _committed_blocks(folder) < 3:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    before = _committed_blocks(folder)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray runtime it started
    proc.wait(timeout=30)
    assert 3 <= before < 19
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["resumed_from"] is not None
    assert summary["count"] == 600
    assert summary["ingested"] <= 600 - 32 * before + 32  # committed blocks were skipped
    with open_index(folder) as idx:
        found = idx.payloads([doc_id(d["id"]) for d in docs_600])
    assert all(p is not None for p in found)
