"""`slimvec bench --suite FILE` and the planner's quick sweep as in-process harness calls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slimvec.benchmarks.suite import load_suite
from slimvec.benchmarks.sweep import quick_sweep
from slimvec.errors import ConfigError
from slimvec.planner.rows import Row, load_rows

REPO = Path(__file__).resolve().parents[2]


def _vectors(path: Path, n: int = 400, dim: int = 32) -> Path:
    """Clustered float32 vectors (so a reducer keeps some and loses some neighbours)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(12, dim))
    x = centres[rng.integers(0, 12, n)] + 0.4 * rng.normal(size=(n, dim))
    np.save(path, x.astype(np.float32), allow_pickle=False)
    return path


def _suite(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(body, encoding="utf-8")
    return path


TINY = """
description = "tiny suite for the tests"
out = "out"
[data]
vectors = "{vectors}"
max_queries = 40
[run]
reducers = ["pca:8"]
stores = ["faiss:Flat", "faiss:PQ4np"]
baselines = false
rescore = [4]
k = 5
latency_queries = 5
latency_repeats = 1
"""


def test_suite_runs_through_the_cli(tmp_path: Path) -> None:
    vectors = _vectors(tmp_path / "vecs.npy")
    suite = _suite(tmp_path, TINY.format(vectors=vectors))
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n", encoding="utf-8")  # the suite's root
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "slimvec", "bench", "--suite", str(suite)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows, meta = load_rows(tmp_path / "out" / "results.json")
    assert meta["suite"] == str(suite) and meta["suite_description"] == "tiny suite for the tests"
    assert "--suite" in meta["command"]
    labels = {(r.reducer, r.store, r.rescore) for r in rows}
    assert {("none", "faiss:Flat", None), ("pca:8", "faiss:Flat", None), ("pca:8", "faiss:Flat", 4)} <= labels
    full = next(r for r in rows if r.reducer == "none" and r.store == "faiss:Flat")
    pca = next(r for r in rows if r.reducer == "pca:8" and r.store == "faiss:Flat" and r.rescore is None)
    rescored = next(r for r in rows if r.store == "faiss:Flat" and r.rescore == 4)
    # bytes split: a PQ codebook (4 sub-quantizers × 256 centroids × 8 dims × 4 B) is fixed, not per vector
    pq = next(r for r in rows if r.reducer == "none" and r.store == "faiss:PQ4np")
    assert pq.fixed_bytes >= 4 * 256 * 8 * 4
    assert pq.per_vector_bytes < pq.bytes_per_vector
    assert pca.fixed_bytes >= pca.reducer_bytes > 0  # the reducer's matrix counts as fixed too
    assert all(r.k == 5 for r in rows)
    assert full.neighbor_recall_at_k == pytest.approx(1.0)  # exact store, full dimension
    assert pca.neighbor_recall_at_k < 1.0 and rescored.neighbor_recall_at_k >= pca.neighbor_recall_at_k
    raw = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["rows"][0]
    assert "neighbor_recall_at_10" not in raw  # k = 5: no key claims @10
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "nbr R@5" in report


def test_suite_errors_name_the_file_and_the_key(tmp_path: Path) -> None:
    vectors = _vectors(tmp_path / "vecs.npy", n=50)
    typo = _suite(tmp_path, TINY.format(vectors=vectors).replace("rescore = [4]", "rescor = [4]"))
    with pytest.raises(ConfigError, match=r"unknown key\(s\) rescor in \[run\]; known: .*rescore"):
        load_suite(typo)
    wrong = _suite(tmp_path, TINY.format(vectors=vectors).replace("k = 5", 'k = "five"'))
    with pytest.raises(ConfigError, match="key 'k' expects an integer"):
        load_suite(wrong)
    bad_spec = _suite(tmp_path, TINY.format(vectors=vectors).replace('"pca:8"', '"pcaa:8"'))
    with pytest.raises(ConfigError, match="pcaa"):
        load_suite(bad_spec)
    nothing = _suite(tmp_path, "[run]\nreducers = ['pca:8']\n")
    with pytest.raises(ConfigError, match="Nothing to bench"):
        load_suite(nothing)


def test_checked_in_suites_parse() -> None:
    suites = sorted((REPO / "benchmarks" / "suites").glob("*.toml"))
    assert suites, "no suite in benchmarks/suites"
    for path in suites:
        suite = load_suite(path)
        assert suite.out is not None and suite.description, path


def test_quick_sweep_runs_the_harness_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_subprocess(*args, **kwargs):  # the sweep must not shell out to `python -m slimvec bench`
        raise AssertionError(f"quick_sweep started a process: {args[:1]}")

    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    vectors = _vectors(tmp_path / "vecs.npy", n=600)
    rows = quick_sweep(tmp_path / "sweep", vectors=vectors, reducers=["pca:8"], stores=["faiss:Flat"],
                       sample=300, latency_queries=5, baselines=False)
    assert all(isinstance(r, Row) for r in rows)
    assert {r.reducer for r in rows} == {"none", "pca:8"}
    assert all(r.n_corpus == 300 for r in rows)  # the sample, not the whole file
    _, meta = load_rows(tmp_path / "sweep" / "results.json")
    assert meta["command"].startswith("slimvec bench --out OUT --vectors")
    with pytest.raises(ConfigError, match="pcaa"):
        quick_sweep(tmp_path / "bad", vectors=vectors, reducers=["pcaa:8"])
    assert not (tmp_path / "bad").exists()  # validated before anything was written


def test_fit_on_train_fits_reducers_on_the_training_vectors_only(tmp_path: Path) -> None:
    from slimvec.benchmarks.datasets import from_vectors
    from slimvec.benchmarks.runner import BenchConfig, run_bench

    ds = from_vectors(_vectors(tmp_path / "vecs.npy", n=400), max_queries=40)
    cfg = dict(reducers=["pca:4"], stores=["faiss:Flat"], baselines=False, latency_queries=5, latency_repeats=1)
    rows, meta = run_bench([ds], BenchConfig(work_dir=tmp_path / "w1", fit_on="train", **cfg))
    assert [r.reducer for r in rows] == ["none"]  # no training sentences: pca skipped, with the reason
    assert "needs training sentences" in meta["skipped"][0]["reason"]
    # training vectors from another distribution: a PCA fitted there keeps fewer true neighbours
    ds.train_vectors = np.random.default_rng(1).normal(size=(300, ds.dim)).astype(np.float32)
    on_corpus, _ = run_bench([ds], BenchConfig(work_dir=tmp_path / "w2", **cfg))
    on_train, meta = run_bench([ds], BenchConfig(work_dir=tmp_path / "w3", fit_on="train", **cfg))
    assert meta["config"]["fit_on"] == "train"
    recall = {name: next(r for r in rows if r.reducer == "pca:4").neighbor_recall_at_k
              for name, rows in (("corpus", on_corpus), ("train", on_train))}
    assert recall["train"] < recall["corpus"]


def test_benchmarks_md_is_short_and_names_existing_suites() -> None:
    text = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    # 540 = scripts/assemble_benchmarks.py MAX_LINES: generated tables come per footing (issue 28), one
    # row per lifecycle page (issues 25, 26), the equal-footing headline and the quiet ingest table
    assert len(lines) <= 540, "BENCHMARKS.md grew: move detail into <!-- details --> blocks of docs/benchmarks"
    assert max(len(line) for line in lines) <= 300
    assert "<!-- include:" not in text  # reports are linked, not embedded
    pages = [text] + [p.read_text(encoding="utf-8") for p in (REPO / "docs" / "benchmarks").glob("*.md")]
    named = {m for page in pages for m in re.findall(r"--suite (benchmarks/suites/[\w.-]+\.toml)", page)}
    assert named, "no figure names its suite"
    for suite in named:
        assert (REPO / suite).is_file(), suite


def test_scale_suites_measure_the_same_rows_at_every_size() -> None:
    runs = {name: load_suite(REPO / "benchmarks" / "suites" / f"scale-{name}.toml").run
            for name in ("100k", "300k", "1m")}
    assert runs["100k"] == runs["300k"] == runs["1m"]


def test_realtext_suites_are_the_scale_rows_plus_the_default_store_and_rabitq() -> None:
    runs = {name: load_suite(REPO / "benchmarks" / "suites" / f"realtext-{name}.toml").run
            for name in ("100k", "300k")}
    for key in ("reducers", "stores", "peers", "index_recipes"):  # 300k: the equal-footing subset
        assert set(runs["300k"][key]) <= set(runs["100k"][key]), key
    assert runs["300k"]["rescore"] == runs["100k"]["rescore"] and runs["300k"]["rescore_peers"]
    scale = load_suite(REPO / "benchmarks" / "suites" / "scale-100k.toml").run
    real = runs["100k"]
    assert set(scale["stores"]) < set(real["stores"]) and "qdrant-edge" in real["stores"]
    assert set(scale["peers"]) < set(real["peers"])
    assert any("RaBitQ" in p for p in real["peers"]) and real["rescore_peers"]


def test_synthetic_fair_suite_is_a_subset_of_the_scale_rows() -> None:
    fair = load_suite(REPO / "benchmarks" / "suites" / "scale-100k-fair.toml").run
    scale = load_suite(REPO / "benchmarks" / "suites" / "scale-100k.toml").run
    for key in ("reducers", "stores", "peers"):
        assert set(fair[key]) <= set(scale[key]), key
    assert fair["rescore"] == scale["rescore"] and fair["rescore_peers"] and fair["measure_rss"]


def test_chosen_peers_rescored_and_memory_measured(tmp_path: Path) -> None:
    """``peers`` picks built-in and custom peer specs, ``rescore_peers`` re-ranks the FAISS ones
    from the full vectors, ``measure_rss`` fills the build and serving memory of every store row."""
    from slimvec.benchmarks.datasets import from_vectors
    from slimvec.benchmarks.runner import BenchConfig, run_bench

    ds = from_vectors(_vectors(tmp_path / "vecs.npy", n=3000, dim=32), max_queries=40)
    cfg = BenchConfig(reducers=["pca:8"], stores=["faiss:Flat"], work_dir=tmp_path / "work",
                      peers=["faiss:PQ4np", "faiss:IVF16,PQ8,nprobe=4", "st:binary"], rescore_peers=True,
                      measure_rss=True, rescore=[8], k=5, latency_queries=5, latency_repeats=1)
    rows, meta = run_bench([ds], cfg)
    peers = [r for r in rows if r.kind == "peer"]
    # PQ4np is the built-in PQ peer at this dimension; the IVF one is a custom spec; only st:binary
    # of the sentence-transformers peers (twice: without and with its own rescoring)
    assert sorted({r.store for r in peers}) == ["faiss:IVF16,PQ8,nprobe=4", "faiss:PQ4np", "st:binary"]
    ivf = {r.rescore: r for r in peers if r.store.startswith("faiss:IVF")}
    assert set(ivf) == {None, 8}
    assert ivf[8].neighbor_recall_at_k > ivf[None].neighbor_recall_at_k  # refine from disk helps PQ
    built = [r for r in rows if r.kind == "reducer" or r.store.startswith("faiss:")]
    assert all(r.serve_rss_bytes is not None and r.serve_rss_bytes > 0 for r in built)
    assert all(r.build_rss_bytes is not None and r.build_rss_bytes >= 0 for r in built)
    assert meta["config"]["peers"] == cfg.peers and meta["config"]["build_threads"] >= 1
    with pytest.raises(ConfigError, match="st:int4"):
        BenchConfig(reducers=[], stores=["faiss:Flat"], work_dir=tmp_path, peers=["st:int4"]).validate()
    with pytest.raises(ConfigError, match="build_threads"):
        BenchConfig(reducers=[], stores=["faiss:Flat"], work_dir=tmp_path, build_threads=-1).validate()


def test_bench_takes_recipes_into_its_grid(tmp_path: Path) -> None:
    """``slimvec bench --recipe`` measures a recipe's reducer, store and depth (auto: the ladder)."""
    from slimvec.recipe import AUTO_LADDER, recipe_grid

    reducers, stores, rescore = recipe_grid(["pca:8|faiss:Flat|rescore=4", "pca:8|faiss:PQ4np|rescore=auto"],
                                            [], ["faiss:Flat"], [2])
    assert reducers == ["pca:8"] and stores == ["faiss:Flat", "faiss:PQ4np"]
    assert rescore == [2, 4] + [r for r in AUTO_LADDER if r not in (2, 4)]
    with pytest.raises(ConfigError, match="pcaa"):
        recipe_grid(["pcaa:8|faiss:Flat"], [], [], [])
    vectors = _vectors(tmp_path / "vecs.npy", n=300)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "slimvec", "bench", "--out", str(tmp_path / "out"),
                           "--vectors", str(vectors), "--recipe", "pca:8|faiss:Flat|rescore=4",
                           "--no-baselines", "--max-queries", "20", "--latency-queries", "3"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows, _ = load_rows(tmp_path / "out" / "results.json")
    assert {(r.reducer, r.store, r.rescore) for r in rows} == {
        ("none", "faiss:Flat", None), ("pca:8", "faiss:Flat", None), ("pca:8", "faiss:Flat", 4)}
