"""The filtered planner's recorded costs (issue 51 item 3): measured once when the writer
finishes an index, kept in the manifest, and used the same way by every process that opens it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.benchmarks import filtered
from slimvec.errors import PersistenceError
from slimvec.index.lifecycle import exact_threshold
from slimvec.index.manifest import Manifest
from slimvec.index.search_costs import SearchCosts, cost_scan_limit
from slimvec.migrate import MigrateOptions, migrate
from slimvec.recipe import DEFAULT_RECIPE


def _suite_fields(n: int) -> dict[str, np.ndarray]:
    """The filtered suite's payload fields (slimvec.benchmarks.filtered), dealt as it deals them."""
    return {filtered.FIELD: filtered.bucket_field(n), filtered.TAG: filtered.tag_field(n, 1),
            "date": filtered.date_field(n, 2), "tier": filtered.tier_field(n, 3)}


@pytest.fixture(scope="module")
def index_dir(minilm_vectors, tmp_path_factory) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    vecs = np.ascontiguousarray(minilm_vectors[:600])
    src = tmp_path_factory.mktemp("src") / "docs.parquet"
    pq.write_table(pa.table({"id": list(range(600)), "vector": [v.tolist() for v in vecs],
                             "sel": (np.arange(600) % 100).tolist(),
                             **{k: v.tolist() for k, v in _suite_fields(600).items()}}), src)
    folder = tmp_path_factory.mktemp("idx") / "idx"
    migrate(str(src), folder, MigrateOptions(progress=False, recipe=DEFAULT_RECIPE))
    with slimvec.open(folder) as idx:
        idx.create_payload_index("sel", "integer")
        for field, kind in filtered.KINDS.items():
            idx.create_payload_index(field, kind)
    return folder


def _plan(folder: Path, flt: dict, queries: np.ndarray) -> dict:
    with slimvec.open(folder) as idx:  # a fresh open each time: nothing carried over in memory
        idx.search(queries, 10, filter=flt)
        return dict(idx.last_filter_plan)


def test_costs_recorded_at_build_give_the_same_plan_in_three_fresh_opens(index_dir, minilm_vectors):
    m = Manifest.read(index_dir)
    costs = m.search_costs
    assert costs is not None and costs.graph_us > 0 and costs.scan_us_per_vector > 0
    assert (costs.n_corpus, costs.k, costs.depth) == (600, 10, m.rescore.depth)
    queries = minilm_vectors[1000:1004]
    for flt in ({"must": [{"key": "sel", "range": {"lt": 10}}]}, {"must": [{"key": "sel", "range": {"lt": 60}}]}):
        plans = [_plan(index_dir, flt, queries) for _ in range(3)]
        timed = [p.pop("actual_us") for p in plans]
        assert all(t > 0 for t in timed)
        assert plans[0] == plans[1] == plans[2], plans
        plan = plans[0]
        limit = exact_threshold(600, 10, m.rescore.depth, costs=costs)
        assert plan["threshold"] == limit == max(cost_scan_limit(costs, 600), 10)
        matches = plan.get("matches", round(600 * plan.get("share", 0)))
        assert plan["estimate_us"] == {"exact scan": round(costs.scan_us(matches), 1),
                                       "graph": round(costs.graph_search_us(matches, 600), 1)}
        assert (plan["path"] == "exact scan") == (matches <= limit)
    with slimvec.open(index_dir) as idx:
        shown = idx.info()["filter_planner"]
    assert shown["planned_by"] == "costs recorded at build" and shown["costs_us"]["graph_us"] == costs.graph_us
    assert shown["exact_scan_up_to_at_k10"] == exact_threshold(600, 10, m.rescore.depth, costs=costs)


def test_every_filter_of_the_filtered_suite_gets_one_plan_in_three_fresh_opens(index_dir, minilm_vectors):
    """Each filter the filtered suite times (every field, selectivity and the AND filters) takes
    the same path, threshold and estimates in three processes' worth of fresh opens: the suite's
    rows do not change plan between runs on one index."""
    queries = minilm_vectors[1000:1003]
    specs = filtered._filters([50, 10, 1, 0.1], _suite_fields(600))[1:]  # the first has no filter
    runs = []
    for _ in range(3):
        with slimvec.open(index_dir) as idx:
            plans = []
            for _sel, _fields, flt, _match in specs:
                idx.search(queries, 10, filter=flt)
                plans.append({k: v for k, v in idx.last_filter_plan.items() if k != "actual_us"})
            runs.append(plans)
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) == 20 and all(p["path"] == "exact scan" for p in runs[0])  # 600 documents


def test_a_manifest_without_costs_loads_and_plans_by_the_matches_rule(index_dir, tmp_path, minilm_vectors):
    import shutil

    folder = shutil.copytree(index_dir, tmp_path / "old")
    raw = json.loads((folder / "manifest.json").read_text())
    del raw["search_costs"]  # as an index built before issue 51 wrote it
    old = Manifest.from_json(raw, folder / "manifest.json")
    assert old.search_costs is None
    old.write(folder)
    plan = _plan(folder, {"must": [{"key": "sel", "range": {"lt": 10}}]}, minilm_vectors[1000:1002])
    assert plan["threshold"] == exact_threshold(600, 10, old.rescore.depth, row_bytes=384 * 2)
    assert plan["estimate_us"] is None and plan["path"] == "exact scan"
    with slimvec.open(folder) as idx:
        assert idx.info()["filter_planner"]["planned_by"] == "the matches rule"


@pytest.mark.parametrize("bad", [-1.0, "fast", None, float("inf")])
def test_a_damaged_cost_is_refused_naming_the_key(index_dir, tmp_path, bad):
    raw = json.loads((index_dir / "manifest.json").read_text())
    raw["search_costs"]["graph_us"] = bad
    with pytest.raises(PersistenceError, match=r"search_costs\.graph_us.*finite number >= 0"):
        Manifest.from_json(raw, tmp_path / "manifest.json")
    raw["search_costs"] = {"graph_us": 1.0}
    with pytest.raises(PersistenceError, match="should be an object with the keys scan_us_fixed"):
        Manifest.from_json(raw, tmp_path / "manifest.json")


def test_the_scan_limit_is_where_the_two_estimates_cross():
    costs = SearchCosts(scan_us_fixed=20.0, scan_us_per_vector=0.2, graph_us=400.0, graph_exponent=1.0,
                        k=10, depth=3, n_corpus=100_000)
    for n in (1_000, 20_000, 300_000):
        m = cost_scan_limit(costs, n)
        assert costs.scan_us(m) <= costs.graph_search_us(m, n)
        assert m == n or costs.scan_us(m + 1) > costs.graph_search_us(m + 1, n)
    assert cost_scan_limit(costs, 20_000) < cost_scan_limit(costs, 300_000)
