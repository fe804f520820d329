"""kill -9 during a real ``slimvec rebuild`` subprocess, then the same command again.

Killed mid-build (at a random moment after the new index's first commit), right before the swap
and right after it: at every kill the index folder opens and holds every document (the old recipe
or the new one, never a mix), and the rerun converges: 0 lost, 0 duplicated, identical payloads,
nothing left beside the index.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.index.manifest import Manifest
from slimvec.migrate import MigrateOptions, migrate

N = 1500
NEW = "pca:24|faiss:HNSW16|rescore=4"
ENV = dict(os.environ, OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def parquet(tmp_path_factory, minilm_vectors):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path_factory.mktemp("src") / "vectors.parquet"
    ids = [f"doc-{i}" for i in range(N)]
    pq.write_table(pa.table({"id": ids, "vector": [v.tolist() for v in minilm_vectors[:N]],
                             "name": ids}), path)
    return path


def _old(tmp_path: Path, parquet: Path, recipe: str) -> tuple[Path, list]:
    """The index to rebuild, and its (canonical recipe, ids and payloads)."""
    index = tmp_path / "idx"
    migrate(f"parquet:{parquet},id=id,vector=vector", index,
            MigrateOptions(recipe=recipe, progress=False, batch_size=256, fit_sample=500))
    return index, _state(index)


def _state(index: Path) -> tuple[str, list]:
    """(recipe, sorted (id, payload) of every document kept)."""
    m = Manifest.read(index)
    assert m.count == N
    if m.full.dir:
        raw = np.fromfile(index / m.full.dir / "ids.i64", dtype=np.int64)
        ids = np.unique(raw[:json.loads((index / m.full.dir / "state.json").read_text())["rows"]])
    else:
        ids = np.array(sorted(set(_scroll_ids(index))), dtype=np.int64)
    assert len(ids) == N  # no id lost, none twice
    with slimvec.open(index) as idx:
        assert idx.store.count() == N
        payloads = idx.payloads(ids.tolist())
        recipe = idx.manifest.recipe
    return recipe, sorted(zip(ids.tolist(), [json.dumps(p, sort_keys=True) for p in payloads]))


def _scroll_ids(index: Path) -> list[int]:
    from slimvec.migrate.sources import open_source

    with open_source(f"qdrant-edge:{index / 'store'},vector=full") as src:
        out, offset = [], None
        while True:
            page, offset = src._scroll(offset, 1000, False)
            out += [int(p.id) for p in page]
            if offset is None or not page:
                return out


def _cli(index: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "slimvec", "rebuild", "--index", str(index), "--recipe", NEW,
            "--sample", "500", "--batch-size", "64", "--checkpoint-seconds", "0", *extra]


def _converged(tmp_path: Path, index: Path, before: list) -> None:
    done = subprocess.run(_cli(index, "--json"), capture_output=True, text=True, env=ENV,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["documents"] == N
    recipe, after = _state(index)
    # NEW names no keep_full: the rebuilt index keeps the old one's precision (issue 40 item 6)
    assert recipe in (NEW, f"{NEW},keep_full=float32") and after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


@pytest.mark.parametrize("old_recipe", ["pca:32|hnsw|rescore=4,keep_full=float16",
                                        "pca:32|qdrant-edge|rescore=4,keep_full=float32"])
def test_sigkill_mid_build_then_rerun_converges(tmp_path, parquet, old_recipe):
    index, (old_recipe, before) = _old(tmp_path, parquet, old_recipe)
    new_manifest = tmp_path / ".idx.rebuild-new" / "manifest.json"
    proc = subprocess.Popen(_cli(index), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=ENV)
    deadline = time.monotonic() + 120
    while not new_manifest.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(random.Random(7).uniform(0.0, 0.5))
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert killed, f"the rebuild ended before the kill: {proc.stderr.read().decode()[-500:]}"
    recipe, mid = _state(index)  # the old index is complete and searchable
    assert recipe == old_recipe and mid == before
    _converged(tmp_path, index, before)


_KILL_AT = textwrap.dedent("""
    import os, signal, sys
    from slimvec.ops.rebuild import rebuild

    def phase(name, rows):
        if name == sys.argv[3]:
            os.kill(os.getpid(), signal.SIGKILL)

    rebuild(sys.argv[1], sys.argv[2], sample=500, batch_size=512, on_phase=phase)
""")


@pytest.mark.parametrize("phase,recipe_after_kill", [("swapping", "old"), ("swapped", "new")])
def test_sigkill_around_the_swap_leaves_one_complete_index(tmp_path, parquet, phase,
                                                           recipe_after_kill):
    index, (old_recipe, before) = _old(tmp_path, parquet, "pca:32|hnsw|rescore=4,keep_full=float16")
    proc = subprocess.run([sys.executable, "-c", _KILL_AT, str(index), NEW, phase],
                          capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    recipe, mid = _state(index)  # killed around the swap: one complete index in place
    assert recipe == (old_recipe if recipe_after_kill == "old" else NEW) and mid == before
    _converged(tmp_path, index, before)


def test_cli_prints_the_summary_and_refuses_without_full_vectors(tmp_path, parquet):
    index, (_, before) = _old(tmp_path, parquet, "pca:32|hnsw|rescore=4,keep_full=float16")
    done = subprocess.run(_cli(index), capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    err = " ".join(done.stderr.split())
    assert f"{N:,} documents" in err and f"-> {NEW}" in err and "no text re-encoded" in err
    assert _state(index) == (NEW, before)
    plain = tmp_path / "plain"
    migrate(f"parquet:{parquet},id=id,vector=vector", plain,
            MigrateOptions(reducer="pca:16", store="hnsw", progress=False, fit_sample=300))
    refused = subprocess.run(_cli(plain), capture_output=True, text=True, env=ENV, timeout=120)
    assert refused.returncode == 2
    assert "keeps no full vectors" in refused.stderr and "--keep-full" in refused.stderr
