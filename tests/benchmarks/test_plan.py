"""Capacity planning: targets, candidates from bench rows, sizes from real store builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimvec.errors import ConfigError
from slimvec.planner.plan import candidates_from_results, make_plan, parse_bytes
from slimvec.planner.rows import Row


def row(reducer: str, dim_out: int, store: str, task: float | None, dataset: str = "stsb-dev",
        dim_in: int = 384, **extra) -> Row:
    r = {"dataset": dataset, "encoder": "minilm", "dim_in": dim_in, "reducer": reducer, "dim_out": dim_out,
         "store": store, "task_recall_at_k": task, "neighbor_recall_at_k": None,
         "reducer_bytes": 0 if reducer == "none" else dim_out * dim_in * 4, "bytes_per_vector": None}
    r.update(extra)
    return Row(**r)


# quality falls with the dimension; the planner must pick the smallest config meeting the floor
ROWS = [
    row("none", 384, "hnsw", 0.96),
    row("pca:192", 192, "hnsw", 0.95),
    row("pca:96", 96, "hnsw", 0.94),
    row("pca:48", 48, "hnsw", 0.89),
    row("pca:96", 96, "qdrant-edge:/somewhere/idx", 0.935),
    row("pca:96", 96, "qdrant:http://localhost:6333", 0.94),
    row("pca:96", 96, "hnsw", 0.92, dataset="msrp"),   # lower on a second dataset
]


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_parse_bytes() -> None:
    assert parse_bytes("2GiB") == 2 * 2**30
    assert parse_bytes("1.5GB") == 1_500_000_000
    assert parse_bytes("512M") == 512 * 2**20
    assert parse_bytes(1000) == 1000
    for bad in ("lots", "2XB", "-1GiB", "0"):
        with pytest.raises(ConfigError, match="Memory budget"):
            parse_bytes(bad)


def test_candidates_take_lowest_quality_over_datasets() -> None:
    notes: list[str] = []
    cands = {c.label: c for c in candidates_from_results(ROWS, 384, notes=notes)}
    assert cands["pca:96 → hnsw"].quality == pytest.approx(0.92)
    assert sorted(cands["pca:96 → hnsw"].datasets) == ["msrp", "stsb-dev"]
    assert "pca:96 → qdrant-edge" in cands  # the location is dropped for sizing
    assert not any("qdrant:" in label for label in cands)
    assert any("no local size model for qdrant:http://localhost:6333" in n for n in notes)
    only_hnsw = candidates_from_results(ROWS, 384, ["hnsw"])
    assert {c.store for c in only_hnsw} == {"hnsw"}
    with pytest.raises(ConfigError, match=r"encoder dimension\(s\) \[384\], not --dim 768"):
        candidates_from_results(ROWS, 768)
    with pytest.raises(ConfigError, match="No result row uses store"):
        candidates_from_results(ROWS, 384, ["faiss:Flat"])


def test_quality_floor_picks_smallest_config_that_meets_it(tmp_path: Path) -> None:
    plan = make_plan(200_000, 384, ["hnsw"], rows=ROWS, min_quality=0.93, workdir=tmp_path)
    best = plan.recommendations[0]
    # pca:96 is 0.92 on msrp, so the smallest meeting 0.93 everywhere is pca:192
    assert (best.reducer, best.store) == ("pca:192", "hnsw")
    assert all(c.quality is not None and c.quality >= 0.93 for c in plan.recommendations)
    assert [c.reducer for c in plan.recommendations] == ["pca:192", "none"]
    rams = [c.ram_bytes for c in plan.recommendations]
    assert rams == sorted(rams)
    # hnswlib keeps at least the float32 vectors in RAM
    assert best.ram_bytes > 200_000 * 192 * 4
    assert best.disk_bytes >= best.ram_bytes
    assert len(plan.checks) == 1 and abs(plan.checks[0].error) < 0.10
    assert not any(p.exists() for p in tmp_path.iterdir())


def test_memory_budget_picks_best_quality_that_fits(tmp_path: Path) -> None:
    rows = [r for r in ROWS if r["dataset"] == "stsb-dev"]
    plan = make_plan(100_000, 384, ["hnsw"], rows=rows, memory_budget="60MiB", workdir=tmp_path)
    best = plan.recommendations[0]
    assert best.ram_bytes <= 60 * 2**20
    assert best.reducer == "pca:96"  # 384 and 192 dims do not fit, 96 beats 48 on quality
    assert {c.reducer for c in plan.candidates if not c.meets_target} == {"none", "pca:192"}


def test_sizes_only_without_results(tmp_path: Path) -> None:
    plan = make_plan(50_000, 64, ["faiss:Flat"], memory_budget="8MiB", workdir=tmp_path)
    dims = [c.dim_out for c in plan.candidates]
    assert sorted(dims) == [8, 16, 32, 64]
    assert all(c.quality is None for c in plan.candidates)
    assert plan.recommendations[0].ram_bytes <= 8 * 2**20
    assert any("quality not measured" in n for n in plan.notes)
    with pytest.raises(ConfigError, match="needs measured quality"):
        make_plan(1000, 64, ["hnsw"], min_quality=0.9)
    with pytest.raises(ConfigError, match="Give a target"):
        make_plan(1000, 64, ["hnsw"], rows=ROWS)


def test_recipes_are_planned_with_their_depth_and_full_vectors(tmp_path: Path) -> None:
    from slimvec.recipe import parse_recipe

    rows = [row("pca:96", 96, "hnsw", None, neighbor_recall_at_k=0.60),
            row("pca:96", 96, "hnsw", None, neighbor_recall_at_k=0.95, rescore=4),
            row("pca:96", 96, "hnsw", None, neighbor_recall_at_k=0.985, rescore=8),
            row("pca:96", 96, "hnsw", None, neighbor_recall_at_k=0.993, rescore=16),
            row("pca:96", 96, "hnsw", None, neighbor_recall_at_k=0.990, rescore=16, dataset="msrp")]
    recipes = [parse_recipe(t) for t in ("pca:96|hnsw", "pca:96|hnsw|rescore=8,keep_full=float32",
                                         "pca:96|hnsw|rescore=auto,keep_full=float16",
                                         "pca:48|hnsw|rescore=2")]
    plan = make_plan(100_000, 384, rows=rows, recipes=recipes, metric="neighbor_recall_at_k",
                     min_quality=0.99, workdir=tmp_path)
    by = {c.label: c for c in plan.candidates}
    assert set(by) == {str(r) for r in recipes}
    assert by["pca:96|hnsw"].quality == pytest.approx(0.60)
    assert by["pca:96|hnsw|rescore=8,keep_full=float32"].quality == pytest.approx(0.985)
    # auto: the smallest depth reaching 0.99 on each dataset (16 on both), the lowest of them
    auto = by["pca:96|hnsw|rescore=auto,target=0.99"]  # float16: the default precision
    assert auto.quality == pytest.approx(0.990) and sorted(auto.datasets) == ["msrp", "stsb-dev"]
    assert by["pca:48|hnsw|rescore=2"].quality is None
    assert any("pca:48|hnsw|rescore=2: no result row" in n for n in plan.notes)
    assert [c.label for c in plan.recommendations] == [auto.label]
    # the same store and dimension: rescoring adds the full vectors on disk (float32 or float16)
    # and their id lookup in RAM
    plain, fixed = by["pca:96|hnsw"], by["pca:96|hnsw|rescore=8,keep_full=float32"]
    assert fixed.ram_bytes - plain.ram_bytes == pytest.approx(16 * 100_000)
    assert fixed.disk_bytes - plain.disk_bytes == pytest.approx(100_000 * (384 * 4 + 8))
    assert auto.disk_bytes - plain.disk_bytes == pytest.approx(100_000 * (384 * 2 + 8))
    # without results the recipes are sized only, and need no target
    sized = make_plan(100_000, 384, recipes=recipes[:1], workdir=tmp_path)
    assert sized.candidates[0].quality is None and sized.candidates[0].ram_bytes > 100_000 * 96 * 4
    with pytest.raises(ConfigError, match="needs measured quality"):
        make_plan(1000, 384, recipes=recipes[:1], min_quality=0.9, workdir=tmp_path)


@pytest.mark.parametrize("kwargs,says", [
    ({"docs": 0}, "docs must be an integer >= 1, got 0"),
    ({"docs": -5}, "docs must be an integer >= 1, got -5"),
    ({"docs": 1.5}, "docs must be an integer >= 1, got 1.5"),
    ({"dim": 0}, "dim must be an integer >= 1, got 0"),
    ({"min_quality": 1.5}, "min_quality (task_recall_at_k) must be a finite number in [0, 1], got 1.5"),
    ({"min_quality": float("nan")}, "in [0, 1], got nan"),
    ({"min_quality": -1.0}, "in [0, 1], got -1.0"),
    ({"min_quality": -1.5, "metric": "sts_spearman"}, "in [-1, 1], got -1.5"),
    ({"payload_bytes": -1}, "payload_bytes must be an integer >= 0, got -1"),
    ({"memory_budget": "0.1B"}, "at least 1 byte"),
    ({"calibrate_sizes": (1000, 0)}, "calibrate_sizes must be an integer >= 1, got 0"),
])
def test_make_plan_refuses_absurd_numbers_before_any_build(kwargs, says, tmp_path: Path) -> None:
    """Issue 23 item 10: a Python caller gets a ConfigError naming the argument and the range, before
    a size build starts (nothing written to the workdir)."""
    args = {"docs": 1000, "dim": 384, "min_quality": 0.9, "rows": ROWS, "stores": ["hnsw"], **kwargs}
    docs, dim = args.pop("docs"), args.pop("dim")
    with pytest.raises(ConfigError) as info:
        make_plan(docs, dim, workdir=tmp_path, **args)
    assert says in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_plan_metrics_have_one_spelling_and_the_plan_says_its_k(tmp_path: Path) -> None:
    """Issue 24 item 5: a plan metric is the row field (``*_at_k``); the old ``*_at_10`` name is
    refused with the field to use, and the plan carries the k its rows were measured at."""
    with pytest.raises(ConfigError, match="'task_recall_at_10' is the old spelling.*use 'task_recall_at_k'"):
        make_plan(1000, 384, ["hnsw"], rows=ROWS, min_quality=0.9, metric="task_recall_at_10")
    at5 = [Row(**{**r.to_json(), "k": 5, "extra": {}}) for r in ROWS if r.dataset == "stsb-dev"]
    plan = make_plan(1000, 384, ["hnsw"], rows=at5, min_quality=0.93, workdir=tmp_path)
    assert plan.k == 5 and plan.to_json()["k"] == 5
    assert plan.recommendations and plan.recommendations[0].quality == pytest.approx(0.94)
    mixed = at5 + [r for r in ROWS if r.dataset == "msrp"]
    plan = make_plan(1000, 384, ["hnsw"], rows=mixed, min_quality=0.9, workdir=tmp_path)
    assert plan.k is None and any("measured at k = 5, 10" in n for n in plan.notes)


def test_a_second_plan_reuses_the_size_models_of_the_first(tmp_path, monkeypatch):
    """Issue 40 item 5: every `slimvec plan` re-built its size models (minutes; README: seconds)."""
    import slimvec.planner.plan as plan_mod

    cache = tmp_path / "cache"
    first = plan_mod.make_plan(1000, 32, ["hnsw"], memory_budget=2**40, workdir=tmp_path, cache=cache)
    assert len(list(cache.glob("*.json"))) == 1

    def no_build(*args, **kwargs):
        raise AssertionError("a cached size model was re-built")

    monkeypatch.setattr(plan_mod, "calibrate", no_build)
    monkeypatch.setattr(plan_mod, "check_model", no_build)
    second = plan_mod.make_plan(1000, 32, ["hnsw"], memory_budget=2**40, workdir=tmp_path, cache=cache)
    assert any(f"reused from {cache}" in note for note in second.notes), second.notes
    assert second.models["hnsw"].to_json() == first.models["hnsw"].to_json()
    assert [c.ram_bytes for c in second.candidates] == [c.ram_bytes for c in first.candidates]
    assert [(k.n, k.measured) for k in second.checks] == [(k.n, k.measured) for k in first.checks]
