"""Issue 27 item 8: FAISS's C++ clustering warnings are counted, not printed; the planner's size
builds show progress; slimvec bench --index times Index.search end to end."""

from __future__ import annotations

import numpy as np

from slimvec.connectors import make_store


def test_faiss_training_warnings_are_counted_not_printed(tmp_path, capfd):
    from slimvec.ui import faiss_warning_count

    before = faiss_warning_count()
    store = make_store("faiss:IVF16,Flat", tmp_path / "s").create(8)
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((100, 8)).astype(np.float32)  # 100 < 16 x 39 points: FAISS warns
    store.upsert(np.arange(1, 101), vecs, None)
    store.finalize()
    store.flush()
    assert store.count() == 100
    store.close()
    err = capfd.readouterr().err
    assert "WARNING clustering" not in err, err
    assert faiss_warning_count() == before + 1


def test_other_stderr_output_during_training_is_kept(capfd):
    import os

    from slimvec.ui import quiet_faiss

    with quiet_faiss():
        os.write(2, b"WARNING clustering 5 points to 4 centroids: please provide more\n")
        os.write(2, b"something else the user must see\n")
    err = capfd.readouterr().err
    assert err == "something else the user must see\n"


def test_planner_size_builds_show_progress(tmp_path, capsys, monkeypatch):
    from slimvec.planner.plan import make_plan

    monkeypatch.setenv("SLIMVEC_PROGRESS_SECONDS", "0")
    make_plan(1000, 32, ["hnsw"], memory_budget=2**40, workdir=tmp_path, progress=True)
    err = capsys.readouterr().err
    assert "size model of hnsw (real builds)" in err, err
    assert "1/1" in err, err


def test_bench_index_times_index_search_end_to_end(tmp_path):
    """slimvec bench --index (the demo's figure; was scripts/latency.py) times Index.search,
    labelled, not the bare store."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from slimvec.indexer.pipeline import IngestOptions, ingest
    from tests.conftest import bundled_sentences

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                            for i, t in enumerate(bundled_sentences(120))))
    ingest(docs, tmp_path / "idx", IngestOptions(recipe="pca:16|hnsw|rescore=4,keep_full=float16",
                                                 progress=False))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "slimvec", "bench", "--index", str(tmp_path / "idx"),
                           "--out", str(tmp_path / "out"), "--latency-queries", "50"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                               "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "Index.search, k=10, rescoring x4, over 50 single queries:" in out, out
    assert "end to end from text (encode + reduce + store + re-rank): p50" in out, out
    assert "recipe pca:16|hnsw|rescore=4:" in out, out
    written = json.loads((tmp_path / "out" / "index-latency.json").read_text())
    assert written["rescore_depth"] == 4 and written["from_vectors"]["latency_p50_ms"] > 0


def test_demo_uses_the_default_recipe_and_hides_setup_chatter():
    """The demo runs what the README describes (no --reducer/--store) and keeps pip's output in a
    log shown only on failure; its latency figure comes from slimvec bench --index (tested above)."""
    from pathlib import Path

    demo = (Path(__file__).resolve().parents[2] / "scripts" / "demo.sh").read_text()
    ingest = [ln for ln in demo.splitlines() if ln.startswith("slimvec ingest")]
    assert len(ingest) == 1 and "--reducer" not in ingest[0] and "--store" not in ingest[0]
    assert 'bash scripts/setup.sh >"$SETUP_LOG" 2>&1' in demo
    assert 'slimvec bench --index "$INDEX"' in demo


def test_ingest_threads_default_leaves_a_core_and_is_restored(tmp_path):
    """ingest --threads: the encoder ran 3x slower on two busy threads than on one, and 1.6x faster
    on two idle ones; the default is the cores the load leaves free, set for the run and restored
    after."""
    import json
    import os

    import torch

    from slimvec.encoder import default_encoder_threads
    from slimvec.indexer.pipeline import IngestOptions, ingest
    from tests.conftest import bundled_sentences

    # the cores other work leaves free, at least one and at most the machine's
    assert default_encoder_threads(load=0.1, cpus=2) == 2 and default_encoder_threads(load=0.9, cpus=2) == 1
    assert default_encoder_threads(load=8.5, cpus=2) == 1 and default_encoder_threads(load=1.2, cpus=8) == 7
    assert 1 <= default_encoder_threads() <= (os.cpu_count() or 1)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                            for i, t in enumerate(bundled_sentences(60))))
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        seen: list[int] = []
        ingest(docs, tmp_path / "a", IngestOptions(reducer="rp:8", store="hnsw", progress=False,
                                                   batch_size=20),
               on_batch=lambda _row: seen.append(torch.get_num_threads()))
        assert seen and len(set(seen)) == 1 and 1 <= seen[0] <= (os.cpu_count() or 1), seen
        assert torch.get_num_threads() == 3  # restored
        seen.clear()
        ingest(docs, tmp_path / "b", IngestOptions(reducer="rp:8", store="hnsw", progress=False,
                                                   batch_size=20, threads=2),
               on_batch=lambda _row: seen.append(torch.get_num_threads()))
        assert set(seen) == {2}, seen
    finally:
        torch.set_num_threads(before)
