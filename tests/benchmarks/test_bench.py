"""`slimvec bench` end to end on small real data: real encoder, real stores, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slimvec.benchmarks.datasets import from_vectors
from slimvec.benchmarks.runner import ROW_KEYS, BenchConfig, run_bench

DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data"


def _head(src: Path, n: int, dest: Path) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()[: n + 1]  # header + n rows
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def _bench(args: list[str], env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "slimvec", "bench", *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    dev = _head(DATA / "stsb-dev.tsv", 150, tmp / "stsb-dev.tsv")
    train = _head(DATA / "stsb-train.tsv", 300, tmp / "stsb-train.tsv")
    out, cache = tmp / "out", tmp / "cache"
    args = ["--pairs", str(dev), "--train-pairs", str(train), "--reducer", "pca:32",
            "--reducer", "mcr2:16,clusters=4,epochs=2,batch_size=64", "--store", "hnsw", "--store", "faiss",
            "--store", "qdrant-edge", "--rescore", "4", "--kmeans", "4", "--no-baselines",
            "--latency-queries", "10", "--cache", str(cache), "--out", str(out)]
    proc = _bench(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    return {"tmp": tmp, "out": out, "cache": cache, "args": args, "rows": data["rows"],
            "meta": data["meta"], "proc": proc}


def _row(rows, reducer, store, rescore=None):
    found = [r for r in rows if r["reducer"] == reducer and r["store"] == store and r["rescore"] == rescore]
    assert len(found) == 1, (reducer, store, rescore, [(r["reducer"], r["store"], r["rescore"]) for r in rows])
    return found[0]


def test_rows_carry_every_key_and_outputs_exist(bench_run):
    rows = bench_run["rows"]
    for row in rows:
        assert set(ROW_KEYS) <= set(row)
    assert (bench_run["out"] / "report.md").is_file()
    # views live in the checkout (issue 35 item 4): the wheel's bench writes no page, no plot
    assert not (bench_run["out"] / "report.html").exists() and not list(bench_run["out"].glob("*.png"))
    report = (bench_run["out"] / "report.md").read_text()
    assert "pca:32" in report and "slimvec bench" in report
    assert bench_run["meta"]["skipped"] == []


def test_full_dimension_rows_find_the_exact_neighbours(bench_run):
    for store in ("hnsw", "faiss", "qdrant-edge"):
        row = _row(bench_run["rows"], "none", store)
        assert row["dim_out"] == row["dim_in"] == 384
        assert row["neighbor_recall_at_k"] >= 0.95
        assert 0 < row["task_recall_at_k"] <= 1 and 0 < row["task_mrr_at_k"] <= row["task_recall_at_k"]
        assert row["index_bytes"] > 0 and row["latency_p50_ms"] > 0 and row["qps"] > 0
        assert row["latency_p50_ms"] <= row["latency_p95_ms"] <= row["latency_p99_ms"]
        assert row["sts_spearman"] > 0.5
        assert row["cluster_accuracy"] is None  # null, not 0: none does not cluster


def test_reduced_rows_are_smaller_and_rescoring_recovers_recall(bench_run):
    rows = bench_run["rows"]
    for store in ("hnsw", "faiss", "qdrant-edge"):
        full = _row(rows, "none", store)
        pca = _row(rows, "pca:32", store)
        rescored = _row(rows, "pca:32", store, rescore=4)
        assert pca["dim_out"] == 32 and pca["bytes_per_vector"] < full["bytes_per_vector"]
        assert pca["neighbor_recall_at_k"] < full["neighbor_recall_at_k"]
        assert rescored["neighbor_recall_at_k"] >= pca["neighbor_recall_at_k"]
        assert rescored["full_bytes_per_vector"] == 384 * 4
        assert pca["reducer_bytes"] > 0 and pca["fit_s"] >= 0 and pca["transform_s_per_10k"] > 0


def test_cluster_rows(bench_run):
    rows = bench_run["rows"]
    mcr2 = _row(rows, "mcr2:16,clusters=4,epochs=2,batch_size=64", "hnsw")
    assert 0 <= mcr2["cluster_accuracy"] <= 1  # the reducer's own clusters
    routed = [r for r in rows if r["kind"] == "routed"]
    stores = {r["store"] for r in routed}
    assert {"kmeans:4,p=1", "kmeans:4,p=4", "head:4,p=1"} <= stores
    for r in routed:
        assert 0 <= r["routed_recall_at_k"] <= 1 and 0 < r["routed_fraction_scanned"] <= 1
        assert r["index_bytes"] is None  # no store was built for a routed row
    p1 = _row(rows, "none", "kmeans:4,p=1")
    p4 = _row(rows, "none", "kmeans:4,p=4")
    assert p4["routed_fraction_scanned"] > p1["routed_fraction_scanned"]
    assert p4["routed_recall_at_k"] >= p1["routed_recall_at_k"]
    assert p4["routed_fraction_scanned"] == pytest.approx(1.0, abs=0.01)  # all 4 clusters


def test_second_run_reads_the_encoding_cache(bench_run):
    shards = sorted(bench_run["cache"].rglob("*.npy"))
    assert shards
    args = list(bench_run["args"])
    args[args.index("--out") + 1] = str(bench_run["tmp"] / "out2")
    args[args.index("--reducer") + 1] = "pca:16"
    proc = _bench(args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(bench_run["cache"].rglob("*.npy")) == shards  # nothing new was encoded


def test_peer_baselines_in_the_same_run(minilm_vectors, tmp_path):
    np.save(tmp_path / "vecs.npy", minilm_vectors[:600])
    ds = from_vectors(tmp_path / "vecs.npy", max_queries=60)
    cfg = BenchConfig(reducers=["pca:48"], stores=["hnsw"], work_dir=tmp_path / "work",
                      latency_queries=5, latency_repeats=1)
    rows, meta = run_bench([ds], cfg)
    assert meta["skipped"] == []
    labels = {(r["store"], r["rescore"]) for r in rows if r["kind"] == "peer"}
    assert {("faiss:SQ8", None), ("faiss:PQ48np", None), ("faiss:OPQ48,PQ48np", None),
            ("faiss:HNSW32,SQ8", None), ("qdrant-edge:quant=bq1,rescore=false", None),
            ("qdrant-edge:quant=bq1,rescore=true", None), ("st:int8", None), ("st:binary", None),
            ("st:binary", 4)} <= labels

    def peer(store, rescore=None):
        return next(r for r in rows if r["store"] == store and r["rescore"] == rescore)

    assert peer("qdrant-edge:quant=bq1,rescore=true")["neighbor_recall_at_k"] >= \
        peer("qdrant-edge:quant=bq1,rescore=false")["neighbor_recall_at_k"]
    assert peer("st:binary", 4)["neighbor_recall_at_k"] > peer("st:binary")["neighbor_recall_at_k"]
    assert peer("st:binary")["bytes_per_vector"] < peer("st:int8")["bytes_per_vector"]
    for r in rows:
        assert r["task_recall_at_k"] is None and r["sts_spearman"] is None  # no pairs: null


def test_bad_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence1\tsentence2\tscore\nA cat.\tA dog.\t1.0\nonly two\tcolumns\n", encoding="utf-8")
    proc = _bench(["--pairs", str(bad), "--out", str(tmp_path / "o")])
    assert proc.returncode == 2
    assert f"{bad}:3: expected 3 tab-separated columns" in proc.stderr
    assert "--skip-bad-rows" in proc.stderr
    proc = _bench(["--pairs", str(bad), "--reducer", "pcaa:8", "--out", str(tmp_path / "o")])
    assert proc.returncode == 2 and "pcaa" in proc.stderr and "pca" in proc.stderr.replace("pcaa", "")
    proc = _bench(["--pairs", str(bad), "--store", "milvus", "--out", str(tmp_path / "o")])
    assert proc.returncode == 2 and "qdrant-edge" in proc.stderr
    proc = _bench(["--out", str(tmp_path / "o")])
    assert proc.returncode == 2 and "--pairs" in proc.stderr
    assert not (tmp_path / "o" / "results.json").exists()


def test_bench_names_its_report_and_times_the_whole_run(bench_run):
    """Issue 27 item 8: the summary names the report; wall time is the whole run's."""
    err = " ".join(bench_run["proc"].stderr.split())
    assert f"report {bench_run['out'] / 'report.md'}" in err, err[-2000:]
    assert "WARNING clustering" not in bench_run["proc"].stderr
    meta = bench_run["meta"]
    assert meta["measure_s"] <= meta["wall_s"]
    assert f"{meta['wall_s']:,.1f} s wall" in err
