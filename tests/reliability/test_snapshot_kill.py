"""Snapshot under fire (issue 25 item 6, "Done when" kill -9 trials): a snapshot taken while
another process commits is one of its commits, and ``slimvec snapshot`` killed with SIGKILL
mid-way leaves no archive at --out and the index untouched."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch
from slimvec.ops.snapshot import _remove_dead_leftovers, restore, snapshot

DIM = 32
BATCH = 10

WRITER = r"""
import sys, time
import numpy as np
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch

folder, start, commits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(1)
with IndexBuilder(folder) as b:
    b.open(IndexSpec(encoder=None), 32)
    print("open", flush=True)
    n = start
    for _ in range(commits):
        ids = np.arange(n, n + 10)
        b.write(VectorBatch(ids, rng.standard_normal((10, 32)).astype(np.float32),
                            [{"text": f"doc {i}"} for i in ids], [], int(ids[-1]) + 1))
        b.commit()
        n += 10
        print(n, flush=True)
"""


def _build(folder: Path, store: str, n: int, dim: int = DIM, keep_full: str | None = "float32"
           ) -> None:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    with IndexBuilder(folder) as b:
        b.open(IndexSpec(reducer="pca:8", store=store, encoder=None, keep_full=keep_full), dim,
               fit=lambda: vecs[:500])
        for lo in range(0, n, 2000):
            ids = np.arange(lo, min(n, lo + 2000))
            b.write(VectorBatch(ids, vecs[ids], [{"text": f"doc {i}"} for i in ids], [],
                                int(ids[-1]) + 1))
            b.commit()
        b.finish()


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.parametrize("store", ["faiss", "hnsw"])
def test_a_snapshot_taken_while_another_process_commits_is_one_of_its_commits(tmp_path, store):
    src = tmp_path / "src"
    _build(src, store, BATCH * 4)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(src), str(BATCH * 4), "400"],
                              stdout=subprocess.PIPE, text=True, env=_env())
    restored = []
    try:
        assert writer.stdout.readline().strip() == "open"
        for i in range(8):
            info = snapshot(src, tmp_path / f"s{i}.tar")
            restore(info.path, tmp_path / f"r{i}")
            restored.append((tmp_path / f"r{i}", info.count))
            if writer.poll() is not None:
                break
    finally:
        writer.kill()
        writer.wait(30)
    counts = set()
    for folder, count in restored:
        with slimvec.open(folder) as index:
            n = int(index.store.count())
            counts.add(n)
            assert n == count == index.manifest.count  # the store is exactly the recorded commit
            assert n % BATCH == 0 and n >= BATCH * 4   # a whole commit, never part of one
            assert index.full_vectors.rows == n        # full vectors of that commit, no more
            assert index.manifest.progress.next_row == n
            assert index.payloads([n - 1, n]) == [{"text": f"doc {n - 1}"}, None]
            rescored = index.search(np.ones((1, DIM), np.float32), k=3, rescore=4)
            assert (rescored.ids >= 0).all() and (rescored.ids < n).all()
    assert len(restored) >= 2 and len(counts) >= 2, counts  # the writer moved between snapshots


def _digests(folder: Path) -> dict[str, str]:
    """SHA-256 of the index's files; SQLite's -wal / -shm companions (created by any reader, as
    store_checksums also ignores them) only have to hold no write: an empty WAL."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.name == ".lock" or p.name.endswith("-shm"):
            continue
        if p.name.endswith("-wal"):
            assert p.stat().st_size == 0, f"{p} holds writes"
            continue
        out[p.relative_to(folder).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_kill_9_of_slimvec_snapshot_leaves_no_archive_and_the_index_untouched(tmp_path):
    src = tmp_path / "src"
    _build(src, "faiss:Flat", 8_000, dim=384)  # 12 MB of full vectors: xz takes seconds
    before = _digests(src)
    out = tmp_path / "out" / "snap.tar.xz"
    out.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "slimvec", "snapshot", "--index", str(src),
                             "--out", str(out), "--no-progress"], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tmp_archive = out.parent / f".{out.name}.{proc.pid}.tmp"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if tmp_archive.exists() and tmp_archive.stat().st_size > 0:
            break  # the archive is being written
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read()  # still running: killed mid-way
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert not out.exists()  # no partial archive under the final name
    assert _digests(src) == before  # the index is untouched
    with slimvec.open(src) as index:
        assert index.store.count() == 8_000
    # the next snapshot to that name first removes the killed one's leftovers (its pid is gone)
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [f".{out.name}.partial-{proc.pid}", tmp_archive.name])
    _remove_dead_leftovers(out)
    assert list(out.parent.iterdir()) == []


def test_a_writer_starting_without_an_input_keeps_the_last_commits_next_row(tmp_path):
    """A writer with no planned input (a script's, the service's) records its running write
    before its first commit; that manifest, which a snapshot may pin, still names the last
    commit's ``next_row`` (it said 0, and a snapshot between the two failed the test above)."""
    from slimvec.index.manifest import Manifest

    _build(tmp_path / "src", "faiss", BATCH * 4)
    with IndexBuilder(tmp_path / "src") as b:
        b.open(IndexSpec(encoder=None), DIM)
        b.begin()
        assert Manifest.read(tmp_path / "src").progress.next_row == BATCH * 4
        assert Manifest.read(tmp_path / "src").progress.state == "running"
