"""slimvec tune on a tiny real sample: the winner meets the constraints and is the cheapest that
does among the measured candidates; a budget nothing fits is a clear error; the CLI writes a
recipe that loads back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from slimvec.errors import ConfigError
from slimvec.planner.tune import default_grid, tune
from slimvec.recipe import DEFAULT_RECIPE, Recipe, load_recipe, parse_recipe


@pytest.fixture(autouse=True)
def _faiss_one_thread():
    """FAISS's OpenMP threads spin when the machine is oversubscribed (CI runs several processes):
    one thread keeps these small builds fast and the timing of the suite predictable."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


GRID = [Recipe("none", "hnsw"), Recipe("pca:48", "hnsw"), Recipe("pca:48", "hnsw", 4),
        Recipe("pca:48", "hnsw", 16), Recipe("pca:96", "faiss:HNSW32,SQ8", 4)]


def test_winner_meets_the_floor_at_least_ram(minilm_vectors, tmp_path):
    res = tune(minilm_vectors[:2000], docs=1_000_000, min_recall=0.95, grid=GRID, rungs=(500, 1500),
               n_queries=100, latency_queries=5, workdir=tmp_path)
    best = res.best
    assert best is not None and best.meets and best.recall >= 0.95
    final = [c for c in res.candidates if c.rung == 2 and c.meets]
    assert best.ram_bytes == min(c.ram_bytes for c in final)
    assert str(best.recipe) != "none|hnsw"  # full 384-d HNSW costs more RAM than a reduced one
    recipe = res.recipe()
    assert recipe.measured["neighbor_recall_at_k"] == pytest.approx(best.recall, abs=1e-4)
    assert recipe.measured["k"] == 10 and "neighbor_recall_at_10" not in recipe.measured
    if best.recipe.rescore is not None:  # the depth is calibrated on the real corpus at build time
        assert recipe.auto_rescore and recipe.target_recall == 0.95
        assert recipe.measured["rescore_at_sample"] == best.recipe.rescore
    assert len(recipe.runners_up) == len(GRID) - 1


def test_budget_nothing_fits(minilm_vectors, tmp_path):
    res = tune(minilm_vectors[:1000], docs=10_000_000, ram_budget=1 << 20, grid=GRID[:2],
               rungs=(500,), n_queries=100, workdir=tmp_path)
    assert res.best is None and all("over the RAM budget" in c.note for c in res.candidates)
    with pytest.raises(ConfigError, match="ram-budget"):
        res.recipe()
    with pytest.raises(ConfigError, match="target"):
        tune(minilm_vectors[:1000], docs=10)


def test_cli_writes_a_loadable_recipe(minilm_vectors, tmp_path):
    np.save(tmp_path / "v.npy", minilm_vectors[:1500])
    out = tmp_path / "tuned.json"
    proc = subprocess.run([sys.executable, "-m", "slimvec", "tune", "--vectors", str(tmp_path / "v.npy"),
                           "--docs", "100000", "--ram-budget", "1GiB", "--sample", "1200",
                           "--queries", "100", "--reducer", "pca:48", "--store", "hnsw", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    recipe = load_recipe(out)
    data = json.loads(out.read_text())
    assert data["recipe"] == str(recipe) and data["measured"]["ram_bytes"] <= 1 << 30
    # issue 27 item 1: the winner comes with the one command that builds it
    assert f"build it: slimvec ingest DOCS.jsonl --index INDEX --recipe {out}" in " ".join(proc.stderr.split())
    # issue 40 items 5 and 8: the rule is printed and recorded as used; every build shows progress
    rule = "highest neighbor_recall_at_10 within the RAM budget of 1,024.0 MiB"
    assert f"ranking: {rule}" in proc.stderr and data["measured"]["ranked_by"].startswith(rule)
    # issue 52 item 4: the default recipe's build is in the grid with --store given too
    assert "progress: size models of 2 store kind(s)" in proc.stderr
    assert "progress: rung 1: pca:48 -> hnsw" in proc.stderr and "builds/s" in proc.stderr
    bad = subprocess.run([sys.executable, "-m", "slimvec", "tune", "--docs", "10", "--min-recall", "0.9"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--vectors" in bad.stderr and "Traceback" not in bad.stderr


def test_grid_leaves_out_what_a_store_cannot_hold(minilm_vectors, tmp_path):
    # FAISS PQ16 needs a dimension divisible by 16: after pca:40 it cannot be built, after pca:32 it can
    grid = [Recipe("pca:40", "faiss:IVF16,PQ16"), Recipe("pca:32", "faiss:IVF16,PQ16", 4)]
    res = tune(minilm_vectors[:1200], docs=100_000, ram_budget=1 << 30, grid=grid, rungs=(900,),
               n_queries=100, latency_queries=5, workdir=tmp_path)
    assert [str(c.recipe) for c in res.candidates] == ["pca:32|faiss:IVF16,PQ16|rescore=4"]
    assert any("left out pca:40 → faiss:IVF16,PQ16" in n and "40-d" in n for n in res.notes)
    with pytest.raises(ConfigError, match="No reducer × store combination"):
        tune(minilm_vectors[:1200], docs=100_000, ram_budget=1 << 30, grid=grid[:1], rungs=(900,),
             n_queries=100, workdir=tmp_path)


def test_exhaustive_table_cli(minilm_vectors, tmp_path):
    np.save(tmp_path / "v.npy", minilm_vectors[:1200])
    table = tmp_path / "table.json"
    proc = subprocess.run([sys.executable, "-m", "slimvec", "tune", "--vectors", str(tmp_path / "v.npy"),
                           "--docs", "100000", "--ram-budget", "1GiB", "--sample", "1000", "--search", "exhaustive",
                           "--queries", "100", "--reducer", "pca:48", "--reducer", "pca:24",
                           "--store", "hnsw", "--table", str(table), "--out", str(tmp_path / "t.json")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(table.read_text())
    # every candidate (2 reducers x no rescoring and R = 2..32, and the default recipe's build at
    # its 6 depths: issue 52 item 4) measured once, on the whole sample
    assert len(rows) == 18 and {r["rung"] for r in rows} == {1}
    assert {r["n_sample"] for r in rows} == {1000}
    assert all(r["neighbor_recall_at_k"] is not None and r["k"] == 10 for r in rows)


def test_halving_keeps_whole_builds():
    """Half the builds (reducer × store) go on, each with all its depths: the builds cost, the
    depths are nearly free; the best build by recall goes on even when the objective ranks it low."""
    from slimvec.planner.tune import TuneCandidate, _objective, _survivors

    def cand(red, store, R, recall, ram):
        c = TuneCandidate(Recipe(red, store, R), 48, ram_bytes=ram, recall=recall)
        c.meets = recall >= 0.9
        return c

    alive = [cand("pca:48", "hnsw", None, 0.70, 1), cand("pca:48", "hnsw", 8, 0.93, 2),
             cand("pca:96", "hnsw", None, 0.80, 3), cand("pca:96", "hnsw", 8, 0.91, 4),
             cand("pca:192", "hnsw", 4, 0.95, 9), cand("none", "hnsw", None, 0.99, 20),
             cand("pca:24", "hnsw", 16, 0.60, 1)]
    alive.sort(key=lambda c: _objective(c, 0.9))
    kept = _survivors(alive, 0.9)
    builds = {c.recipe.reducer for c in kept}
    # 5 builds: the 3 best by the objective (smallest RAM meeting 0.9) and the best by recall
    assert builds == {"pca:48", "pca:96", "pca:192", "none"}
    assert len([c for c in kept if c.recipe.reducer == "pca:48"]) == 2  # every depth of a kept build


def test_halving_keeps_near_ties_within_the_noise():
    from slimvec.planner.tune import TuneCandidate, _objective, _survivors

    recalls = (0.96, 0.958, 0.957, 0.956, 0.955, 0.90, 0.85, 0.80)
    alive = [TuneCandidate(Recipe(f"pca:{8 * (i + 1)}", "hnsw", 4), 8 * (i + 1), ram_bytes=1, recall=rec)
             for i, rec in enumerate(recalls)]
    for c in alive:
        c.meets = True
    alive.sort(key=lambda c: _objective(c, None))  # best recall first
    top4 = {"pca:8", "pca:16", "pca:24", "pca:32"}
    assert {c.recipe.reducer for c in _survivors(alive, None)} == top4  # the better half
    # 200 queries x 10 checks: two standard errors at 0.96 are 0.0088, so 0.955 is a tie and goes on
    assert {c.recipe.reducer for c in _survivors(alive, None, n_scored=2000)} == top4 | {"pca:40"}
    # measured 100 times more precisely it is not
    assert {c.recipe.reducer for c in _survivors(alive, None, n_scored=200_000)} == top4


def test_auto_search_measures_trained_stores_exhaustively(minilm_vectors, tmp_path):
    # IVF training costs the same on every rung: auto measures such a grid once, on the whole sample
    grid = [Recipe("pca:32", "faiss:IVF16,PQ8", 4), Recipe("pca:16", "faiss:IVF16,PQ8", 4)]
    res = tune(minilm_vectors[:1300], docs=100_000, ram_budget=1 << 30, grid=grid, rungs=(300, 1000),
               n_queries=100, latency_queries=3, workdir=tmp_path, search="auto")
    assert {c.n_sample for c in res.candidates} == {1000} and {c.rung for c in res.candidates} == {1}
    assert any("search: exhaustive (2 of 2 builds" in n for n in res.notes)
    hnsw = tune(minilm_vectors[:1300], docs=100_000, ram_budget=1 << 30, grid=[Recipe("pca:32", "hnsw", 4)],
                rungs=(300, 1000), n_queries=100, latency_queries=3, workdir=tmp_path, search="auto")
    assert hnsw.candidates[0].rung == 2 and any("search: halving" in n for n in hnsw.notes)
    with pytest.raises(ConfigError, match="search must be"):
        tune(minilm_vectors[:1300], docs=10, ram_budget=1 << 30, grid=grid, search="greedy")


@pytest.mark.parametrize("kwargs,says", [
    ({"min_recall": 1.5}, "min_recall (--min-recall) must be a finite number in [0, 1], got 1.5"),
    ({"min_recall": float("nan")}, "in [0, 1], got nan"),
    ({"min_recall": -1.0}, "in [0, 1], got -1.0"),
    ({"max_p50_ms": 0.0}, "max_p50_ms (--max-p50-ms) must be a finite number > 0, got 0.0"),
    ({"docs": 0}, "docs (--docs) must be an integer >= 1, got 0"),
    ({"ram_budget": 0}, "ram_budget (--ram-budget, bytes) must be an integer >= 1, got 0"),
    ({"rungs": (500, -1)}, "rungs (sample sizes) must be an integer >= 1, got -1"),
    ({"n_queries": 0}, "n_queries (--queries) must be an integer >= 1, got 0"),
    ({"seed": -1}, "seed (--seed) must be an integer >= 0, got -1"),
    ({"k": 0}, "k must be an integer >= 1, got 0"),
    ({"latency_queries": 0}, "latency_queries must be an integer >= 1, got 0"),
])
def test_tune_refuses_absurd_numbers_before_any_work(kwargs, says, tmp_path):
    """Issue 23 item 10: ``min_recall=1.5`` used to run the whole search before failing; every bad
    number is now a ConfigError before the size builds (the workdir stays empty)."""
    X = np.random.default_rng(0).standard_normal((400, 32)).astype(np.float32)
    args = {"docs": 1000, "min_recall": 0.9, "grid": [Recipe("pca:8", "hnsw")], "rungs": (300,),
            "n_queries": 50, **kwargs}
    with pytest.raises(ConfigError) as info:
        tune(X, workdir=tmp_path, **args)
    assert says in str(info.value)
    assert list(tmp_path.iterdir()) == []  # refused before any build wrote to its workdir


def test_default_grid_holds_the_default_recipe_and_keeps_its_precision():
    """Issue 40 item 8: tune could not answer "should I keep the default?" (HNSW16,SQ4 was not in
    its grid) and priced every kept full vector at float32 while the default keeps float16."""
    default = parse_recipe(DEFAULT_RECIPE)
    grid = default_grid(384)
    mine = [r for r in grid if (r.reducer, r.store) == (default.reducer, default.store)
            and r.rescore is not None]
    assert len(mine) >= 5 and all(r.keep_full == default.keep_full == "float16" for r in mine)
    assert all(r.keep_full == "float16" for r in grid if r.rescore is not None)
    assert all(r.keep_full is None for r in grid if r.rescore is None)


def test_the_pick_is_compared_with_the_default_recipe(minilm_vectors, tmp_path):
    default = parse_recipe(DEFAULT_RECIPE)
    grid = [Recipe("pca:48", "hnsw"), Recipe("pca:48", "hnsw", 4, "float16"), Recipe("none", "hnsw")]
    grid += [Recipe(default.reducer, default.store, r, "float16") for r in (2, 4, 8)]
    res = tune(minilm_vectors[:2000], docs=100_000, min_recall=0.9, grid=grid, rungs=(500, 1500),
               n_queries=100, latency_queries=5, workdir=tmp_path)
    assert res.default is not None and res.default.rung == 2  # kept to the last rung
    assert res.default.recipe.store == default.store and res.default.recall is not None
    line = res.versus_default()
    assert line is not None and line.startswith(f"default recipe {DEFAULT_RECIPE}: recall@10")
    recipe = res.recipe()
    assert recipe.measured["ranked_by"].startswith(
        "smallest predicted RAM at N among candidates with neighbor_recall_at_10 >= 0.9")
    assert recipe.measured["default_recipe"]["recipe"] == DEFAULT_RECIPE
    # the pick is the first by the printed rule among the last rung's candidates that meet it
    final = [c for c in res.candidates if c.rung == 2 and c.meets]
    assert res.best is not None and res.best.ram_bytes == min(c.ram_bytes for c in final)
    full = next(c for c in res.candidates if c.recipe.store == default.store)
    assert full.disk_bytes < 100_000 * (384 * 4)  # float16 full vectors, not float32
