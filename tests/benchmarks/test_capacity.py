"""Issue 52: a capacity plan that holds (one disk figure per recipe, recipes matched canonically,
payload indexes sized, latency carried to the target size, tune's pick checked there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimvec.benchmarks.rows import load_rows
from slimvec.planner.candidates import candidates_for_recipes, candidates_from_results
from slimvec.planner.plan import make_plan
from slimvec.planner.sizing import sizing_spec
from slimvec.recipe import DEFAULT_RECIPE, parse_recipe

RESULTS = Path(__file__).resolve().parents[2] / "bench-results"
#: the default recipe with its store options in the other order (as the 300k run wrote it)
REORDERED = "none|faiss:HNSW16,SQ4,efc=200,ef=128|rescore=auto,keep_full=float16"


@pytest.fixture(scope="module")
def rows_300k():
    return load_rows(RESULTS / "realtext-300k" / "results.json")[0]


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_a_recipe_is_sized_by_its_store_stage_in_any_option_order() -> None:
    assert sizing_spec(REORDERED) == sizing_spec(DEFAULT_RECIPE) == "faiss:HNSW16,SQ4,ef=128,efc=200"


def test_the_default_recipe_finds_its_rows_whatever_their_option_order(rows_300k) -> None:
    notes: list[str] = []
    (cand,) = candidates_for_recipes([parse_recipe(DEFAULT_RECIPE)], 384, rows_300k,
                                     "neighbor_recall_at_k", notes)
    # the recipe's own rows (not the plain faiss:HNSW16,SQ4,efc=200 rows, whose ef differs):
    # rescore=auto picks the smallest depth reaching 0.99, R=2 at 0.9929
    assert cand.quality == pytest.approx(0.9929)
    assert cand.datasets == ["realtext-minilm-300k"]
    assert cand.p50_n == 300000 and cand.p50_ms == pytest.approx(0.9917, abs=1e-3)
    assert cand.keep_full == "float16"
    assert not any("no result row" in n for n in notes), notes


def test_a_recipe_given_as_store_filters_rows_and_rescored_rows_keep_float16(rows_300k) -> None:
    cands = candidates_from_results(rows_300k, 384, [DEFAULT_RECIPE], "neighbor_recall_at_k")
    assert cands and {c.store for c in cands} == {"faiss:HNSW16,SQ4,ef=128,efc=200"}
    assert all(c.buildable for c in cands), [c.why_not for c in cands if not c.buildable]
    assert {c.keep_full for c in cands if c.rescore} == {"float16"}
    auto = next(c for c in cands if c.reducer == "none" and c.depth == 2)
    assert "rescore=2" in (auto.command or "")


def test_one_disk_figure_for_one_recipe(rows_300k, tmp_path: Path) -> None:
    """plan --recipe, plan over the rows and the recipe's float16 full vectors agree."""
    docs, rec = 40_000_000, parse_recipe(DEFAULT_RECIPE)
    by_recipe = make_plan(docs, 384, rows=rows_300k, recipes=[rec], metric="neighbor_recall_at_k",
                          workdir=tmp_path)
    by_rows = make_plan(docs, 384, [DEFAULT_RECIPE], rows=rows_300k, min_quality=0.95,
                        metric="neighbor_recall_at_k", workdir=tmp_path, models=by_recipe.models)
    (one,) = by_recipe.candidates
    same = next(c for c in by_rows.candidates if c.reducer == "none" and c.depth == 2)
    assert same.disk_bytes == pytest.approx(one.disk_bytes, rel=1e-9)
    store = by_recipe.models[one.store].disk_bytes(docs, 384)
    assert one.disk_bytes - store - one.reducer_bytes == pytest.approx(docs * (384 * 2 + 8), rel=1e-9)


def test_payload_bytes_help_says_what_to_count() -> None:
    from typer.testing import CliRunner

    from slimvec.cli import app

    out = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "200"}).output
    assert "source_id" in out and "--payload-index" in out
