"""Issue 12 E19 and the CLI parts of D17, through real ``python -m slimvec`` subprocesses whose
stderr goes to a file (as in a log, CI or a service job)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import bundled_sentences

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def slimvec(args: list[str], tmp: Path, name: str, env: dict | None = None,
            timeout: float = 300) -> tuple[int, str, str]:
    """Run ``python -m slimvec ARGS`` with stderr to a file; (exit code, stdout, stderr)."""
    err = tmp / f"{name}.stderr"
    with open(err, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "slimvec", *args], stdout=subprocess.PIPE,
                              stderr=fh, text=True, timeout=timeout, env={**ENV, **(env or {})})
    return proc.returncode, proc.stdout, err.read_text()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, text in enumerate(bundled_sentences(300)):
            fh.write(json.dumps({"id": i, "text": text}) + "\n")
    return path


@pytest.fixture(scope="module")
def ingested(corpus, tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("ingest")
    rc, _, err = slimvec(["ingest", str(corpus), "--index", str(tmp / "idx"), "--reducer", "pca:8",
                          "--store", "hnsw", "--batch-size", "64"], tmp, "ingest",
                         env={"SLIMVEC_PROGRESS_SECONDS": "0"})
    assert rc == 0, err
    return tmp / "idx", err


def test_ingest_into_a_log_prints_plain_progress_lines_and_no_loading_bars(ingested):
    _, err = ingested
    lines = [ln for ln in err.splitlines() if ln.startswith("progress: ")]
    assert any(ln.startswith("progress: fitting pca:8") for ln in lines), err
    ingesting = [ln for ln in lines if ln.startswith("progress: ingesting docs.jsonl")]
    assert len(ingesting) >= 3, err  # start, some batches (interval 0), done
    assert "/300 docs" in ingesting[-1] and "done" in ingesting[-1] and "docs/s" in ingesting[-1]
    assert any("ETA" in ln for ln in ingesting), err
    assert "Loading weights" not in err and "\r" not in err and "━" not in err, err


def test_a_parquet_ingest_shows_its_total_and_eta_from_the_metadata(tmp_path):
    """Issue 52: no fit sample counts the rows here (no reducer to fit), yet the progress has a
    total, a percentage and an ETA: a Parquet file's row groups give the count up front."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = bundled_sentences(120)
    src = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts}), src,
                   row_group_size=50)
    rc, _, err = slimvec(["ingest", str(src), "--index", str(tmp_path / "idx"), "--recipe",
                          "none|hnsw", "--batch-size", "16"], tmp_path, "parquet",
                         env={"SLIMVEC_PROGRESS_SECONDS": "0"})
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("progress: ingesting docs.parquet")]
    assert lines and all("/120 docs (" in ln for ln in lines), err
    assert "done" in lines[-1] and any("ETA" in ln for ln in lines), err


def test_plain_progress_is_rate_bounded():
    from slimvec.ui import PlainProgress

    class Sink:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def write(self, text: str) -> None:
            self.lines.append(text)

        def flush(self) -> None:
            pass

    sink = Sink()
    with PlainProgress("docs", stream=sink, interval=3600) as bar:
        task = bar.add_task("ingesting x", total=100_000)
        for _ in range(1000):
            bar.advance(task, 100)
    # one line at the start and one when done, not one per advance
    assert len(sink.lines) == 2, sink.lines
    assert "100,000/100,000 docs (100.0%)" in sink.lines[-1] and "done" in sink.lines[-1]


def test_plain_progress_is_not_silent_during_a_long_step():
    """Issue 40 item 5: a step that runs for minutes without advancing (a FAISS OPQ build, a size
    model) printed nothing; a line now comes every interval, with the step's own elapsed time."""
    import time

    from slimvec.ui import PlainProgress

    lines: list[str] = []
    sink = type("Sink", (), {"write": lambda self, t: lines.append(t), "flush": lambda self: None})()
    with PlainProgress("steps", stream=sink, interval=0.3) as bar:
        task = bar.add_task("bench", total=3)
        bar.advance(task)
        bar.update(task, description="bench: peer faiss:OPQ48,PQ48np")
        time.sleep(1.6)
    beats = [line for line in lines if "peer faiss:OPQ48" in line]
    assert len(beats) >= 3, lines
    assert "1/3 steps" in beats[-1] and "ETA" in beats[-1] and "this step 0:00:01" in beats[-1]


def test_search_reports_search_time_apart_from_model_loading(ingested, tmp_path):
    index, _ = ingested
    rc, out, err = slimvec(["search", "a man is playing a guitar", "--index", str(index), "-k", "3"],
                           tmp_path, "search")
    assert rc == 0, err
    assert "model loading" in err and "not included" in err and " ms for 1 query" in err, err


def test_search_queries_file_searches_every_line_with_one_model_load(ingested, tmp_path):
    """Issue 40 item 2: repeated searches from the shell reloaded the model each time; --queries
    FILE searches them all in one run (the lazily loaded PCA reducer included)."""
    index, _ = ingested
    (tmp_path / "q.txt").write_text("a man is playing a guitar\n\nthe stock market fell\n")
    rc, out, err = slimvec(["search", "--queries", str(tmp_path / "q.txt"), "--index", str(index),
                            "-k", "2", "--json"], tmp_path, "queries")
    assert rc == 0, err
    res = json.loads(out)
    assert [r["query"] for r in res] == ["a man is playing a guitar", "the stock market fell"]
    assert all(len(r["hits"]) == 2 for r in res) and res[0]["timings_ms"]["queries"] == 2


@pytest.mark.parametrize("args, needle", [
    (["-k", "0"], "-k must be a positive integer, got 0"),
    (["-k", "-1"], "-k must be a positive integer, got -1"),
    (["--rescore", "-1"], "--rescore must be 0 (no re-ranking) or a positive depth R"),
])
def test_bad_k_and_rescore_are_one_line_errors(ingested, tmp_path, args, needle):
    index, _ = ingested
    rc, _, err = slimvec(["search", "guitar", "--index", str(index), *args], tmp_path, "bad")
    assert rc == 2, err
    assert needle in err and "Traceback" not in err, err


def test_bench_vectors_hdf5_points_to_dataset(tmp_path):
    h5 = tmp_path / "glove-25-angular.hdf5"
    h5.write_bytes(b"\x89HDF\r\n\x1a\n")
    rc, _, err = slimvec(["bench", "--vectors", str(h5), "--out", str(tmp_path / "out")],
                         tmp_path, "bench")
    assert rc == 2, err
    assert f"--dataset {h5}" in err and "Traceback" not in err, err


def test_ctrl_c_during_the_fit_exits_130_with_what_to_do(corpus, tmp_path):
    index = tmp_path / "idx"
    err_path = tmp_path / "fit.stderr"
    with open(err_path, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "slimvec", "ingest", str(corpus), "--index", str(index),
             "--reducer", "embedtextnet:8,epochs=100000,width=4", "--store", "hnsw"],
            stdout=subprocess.DEVNULL, stderr=fh, env=ENV,
            # a test run started in the background inherits SIGINT ignored, and so would the
            # child: give it the default disposition, as a terminal's Ctrl-C finds it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 240
            while "progress: fitting" not in err_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
                time.sleep(0.2)
            time.sleep(1.0)  # inside the training loop
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = err_path.read_text()
    assert rc == 130, err
    assert "interrupted" in err and "before the first commit" in err and "Start over" in err, err
    assert "Traceback" not in err, err


def test_migrate_and_prune_into_a_log_print_plain_progress_lines(corpus, tmp_path):
    import numpy as np

    vectors = np.random.default_rng(0).normal(size=(500, 32)).astype(np.float32)
    np.save(tmp_path / "v.npy", vectors, allow_pickle=False)
    rc, _, err = slimvec(["migrate", "--from", str(tmp_path / "v.npy"), "--index",
                          str(tmp_path / "m"), "--reducer", "pca:8", "--store", "hnsw"],
                         tmp_path, "migrate")
    assert rc == 0, err
    done = [ln for ln in err.splitlines() if ln.startswith("progress: migrating")]
    assert done and "500/500 vectors (100.0%)" in done[-1] and "done" in done[-1], err

    rc, _, err = slimvec(["prune", "--corpus", str(corpus), "--sparsity", "0.1",
                          "--score-sentences", "16", "--batch-size", "8", "--max-sentences", "32",
                          "--threads", "1", "--out", str(tmp_path / "pruned")], tmp_path, "prune")
    assert rc == 0, err
    scoring = [ln for ln in err.splitlines() if ln.startswith("progress: scoring heads")]
    assert scoring and "16/16 sentences (100.0%)" in scoring[-1], err
    assert "Loading weights" not in err and "\r" not in err, err
