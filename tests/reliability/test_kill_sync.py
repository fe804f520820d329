"""kill -9 during a real ``slimvec ingest SRC --sync`` subprocess (issue 25 item 4, 'Done when'):
once while it adds / updates, once while it deletes; the rerun of the same command converges on
the source: 0 documents lost, 0 duplicated, 0 deleted ones back, every text the source's."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slimvec.ids import doc_id
from slimvec.index.folder import open_index

DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data" / "sentences.jsonl"
ENV = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")


def _corpora(tmp_path: Path) -> tuple[Path, list[dict], list[dict]]:
    """v1: 240 bundled sentences; v2: every 8th text changed, every 6th row removed, 40 new rows
    (spread over the file, so the sync encodes and commits throughout its pass)."""
    rows = []
    with open(DATA, encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) == 280:
                break
    v1, extra = rows[:240], rows[240:]
    v2 = []
    for i, r in enumerate(v1):
        if i % 6 == 5:
            continue
        v2.append({**r, "text": f"{r['text']} (revised)"} if i % 8 == 0 else r)
        if i % 6 == 0 and extra:
            v2.append(extra.pop())
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in v1), encoding="utf-8")
    return src, v1, v2


def _cmd(src: Path, index: Path, store: str, batch: int = 8) -> list[str]:
    return [sys.executable, "-m", "slimvec", "ingest", str(src), "--index", str(index), "--sync",
            "--recipe", f"pca:16|{store}", "--fit-sample", "100", "--batch-size", str(batch),
            "--checkpoint-batches", "1", "--json"]


def _stored(index: Path, rows: list[dict]) -> tuple[int, dict[str, str | None]]:
    with open_index(index) as idx:
        count = int(idx.store.count())
        payloads = idx.payloads([doc_id(r["id"]) for r in rows])
    return count, {r["id"]: (p or {}).get("text") for r, p in zip(rows, payloads, strict=True)}


def _committed_sync_rows(index: Path) -> int:
    try:
        progress = json.loads((index / "manifest.json").read_text())["progress"]
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    running = progress.get("state") == "running" and progress.get("columns", {}).get("sync")
    return int(progress["next_row"]) if running else 0


def _manifest_count(index: Path) -> int:
    try:
        return int(json.loads((index / "manifest.json").read_text())["count"])
    except (OSError, ValueError, KeyError, TypeError):
        return 1 << 62


def _kill_when(proc: subprocess.Popen, ready, limit: float = 180.0) -> bool:
    deadline = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.01)
    alive = proc.poll() is None
    if alive:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return alive


def _check_converged(index: Path, v1: list[dict], v2: list[dict]) -> dict:
    count, texts = _stored(index, v2)
    gone = [r for r in v1 if r["id"] not in {x["id"] for x in v2}]
    _, back = _stored(index, gone)
    out = {"count": count, "expected": len(v2),
           "lost": sum(t is None for t in texts.values()),
           "wrong_text": sum(t is not None and t != r["text"] for r, t in zip(v2, texts.values(), strict=True)),
           "duplicates": max(0, count - len(v2)),
           "deleted_back": sum(t is not None for t in back.values())}
    return out


@pytest.mark.parametrize("store", ["qdrant-edge", "hnsw"])
def test_sync_killed_while_adding_converges_on_rerun(tmp_path, store):
    src, v1, v2 = _corpora(tmp_path)
    index = tmp_path / "idx"
    subprocess.run(_cmd(src, index, store), check=True, capture_output=True, env=ENV, timeout=300)
    src.write_text("".join(json.dumps(r) + "\n" for r in v2), encoding="utf-8")
    proc = subprocess.Popen(_cmd(src, index, store), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV)
    killed = _kill_when(proc, lambda: _committed_sync_rows(index) > 0)
    assert killed, "the sync ended before the kill: nothing was tested"
    # killed in the add phase: no document that left the source was deleted yet
    gone = [r for r in v1 if r["id"] not in {x["id"] for x in v2}]
    assert all(t is not None for t in _stored(index, gone)[1].values())
    rerun = subprocess.run(_cmd(src, index, store), capture_output=True, text=True, env=ENV,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    out = _check_converged(index, v1, v2)
    print(json.dumps({"store": store, "phase": "add", **out}))
    assert out == {"count": len(v2), "expected": len(v2), "lost": 0, "wrong_text": 0,
                   "duplicates": 0, "deleted_back": 0}, out
    assert summary["deleted"] == len(gone) and summary["unchanged"] > 0, summary


@pytest.mark.parametrize("store", ["qdrant-edge", "qdrant", "faiss", "hnsw"])
def test_sync_killed_while_deleting_converges_on_rerun(tmp_path, store):
    src, v1, v2 = _corpora(tmp_path)
    index = tmp_path / "idx"
    subprocess.run(_cmd(src, index, store), check=True, capture_output=True, env=ENV, timeout=300)
    src.write_text("".join(json.dumps(r) + "\n" for r in v2), encoding="utf-8")
    # two documents per delete chunk and a commit each: the kill lands among the deletes
    proc = subprocess.Popen(_cmd(src, index, store, batch=2), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # the notice comes right before the first delete chunk
        line = proc.stderr.readline()
        if not line or line.startswith("deleting"):
            break
    gone = [r for r in v1 if r["id"] not in {x["id"] for x in v2}]
    before = len(v2) + len(gone)
    # killed once a delete chunk was committed (the manifest's count dropped), between chunks
    killed = _kill_when(proc, lambda: _manifest_count(index) < before)
    proc.stderr.close()
    assert killed, "the sync ended before the kill: nothing was tested"
    count, texts = _stored(index, v2)
    assert not any(t is None for t in texts.values())  # everything new was durable before
    assert all(t == r["text"] for r, t in zip(v2, texts.values(), strict=True))
    rerun = subprocess.run(_cmd(src, index, store), capture_output=True, text=True, env=ENV,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    out = _check_converged(index, v1, v2)
    print(json.dumps({"store": store, "phase": "delete", "left_by_kill": count - len(v2), **out}))
    assert out == {"count": len(v2), "expected": len(v2), "lost": 0, "wrong_text": 0,
                   "duplicates": 0, "deleted_back": 0}, out
    assert (summary["added"], summary["updated"]) == (0, 0), summary
    assert summary["deleted"] == count - len(v2) < len(gone), summary  # some were deleted
