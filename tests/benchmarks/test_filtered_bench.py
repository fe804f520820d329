"""The filtered-search suite of ``slimvec bench`` (issue 25 "Done when", issue 28 item 6) on 1,000
real MiniLM vectors: rows per recipe × selectivity with recall against EXACT filtered truth, the
path taken, and the Qdrant Edge native-filter reference row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slimvec.benchmarks.datasets import from_vectors
from slimvec.benchmarks.filtered import (
    REFERENCE_LABEL,
    REFERENCES,
    bucket_field,
    date_field,
    filtered_recall,
    filtered_truth,
    tag_field,
    tier_field,
)
from slimvec.benchmarks.report import render_report
from slimvec.benchmarks.runner import BenchConfig, run_bench
from slimvec.errors import ConfigError
from slimvec.planner.rows import Row
from slimvec.recipe import DEFAULT_RECIPE

N = 1000
SELECTIVITIES = [50, 10, 1, 0.1]
#: a recipe keeping no full vectors: the planner has nothing to scan, every row is the store's filter
PLAIN = "none|hnsw"


@pytest.fixture(scope="module")
def dataset(minilm_vectors, tmp_path_factory):
    path = tmp_path_factory.mktemp("vecs") / "minilm1k.npy"
    np.save(path, np.ascontiguousarray(minilm_vectors[:N], dtype=np.float32))
    return from_vectors(path, max_queries=12, seed=3)


@pytest.fixture(scope="module")
def filtered_rows(dataset, tmp_path_factory) -> list[Row]:
    cfg = BenchConfig(reducers=[], stores=["hnsw"], work_dir=tmp_path_factory.mktemp("work"), baselines=False,
                      filtered=SELECTIVITIES, filter_recipes=[DEFAULT_RECIPE, PLAIN], latency_queries=4,
                      latency_repeats=1)
    rows, meta = run_bench([dataset], cfg)
    assert not [s for s in meta["skipped"] if "filtered" in s["config"]], meta["skipped"]
    assert meta["config"]["filtered"] == SELECTIVITIES
    return [r for r in rows if r.kind == "filtered"]


def test_bucket_field_matches_exact_shares():
    buckets = bucket_field(N, seed=1)
    assert [int((buckets < round(s * 10)).sum()) for s in SELECTIVITIES] == [500, 100, 10, 1]


def test_truth_is_restricted_to_the_matching_rows(dataset):
    match = np.flatnonzero(bucket_field(N) < 10)  # 1 %
    truth = filtered_truth(dataset.corpus, dataset.queries, match, 10, dataset.query_rows, dataset.metric)
    assert all(set(t.tolist()) <= set(match.tolist()) and len(t) == 10 for t in truth)
    # the unfiltered nearest neighbours are not the filtered ones: a truth ignoring the filter
    # would score the exact filtered answer far below 1
    unfiltered = filtered_truth(dataset.corpus, dataset.queries, np.arange(N), 10, dataset.query_rows,
                                dataset.metric)
    assert filtered_recall(np.stack(truth), unfiltered, 10) < 0.3
    assert filtered_recall(np.stack(truth), truth, 10) == 1.0


FIELDS = ("bucket", "date", "tier", "bucket AND tag", "date AND tag")


def _expected_matches(fields: str, s: float) -> int:
    """Counted from the suite's fields independently of its filters (cfg.seed 0: seeds 0..3)."""
    tags = tag_field(N, seed=1) == "a"
    if fields in ("date", "tier"):  # dealt to exact shares (s % of 1,000 is whole)
        return round(N * s / 100)
    if fields == "date AND tag":
        first = np.argsort(date_field(N, seed=2))[:round(N * 2 * s / 100)]
        return int(tags[first].sum())
    lim = round(s * 10) if fields == "bucket" else round(s * 20)
    return int(((bucket_field(N) < lim) & (tags | (fields == "bucket"))).sum())


def test_rows_carry_selectivity_path_and_reference(filtered_rows):
    got = {(r.store, r.selectivity, r.filter_fields) for r in filtered_rows}
    stores = (*REFERENCES, DEFAULT_RECIPE, PLAIN)
    assert len(set(date_field(N, seed=2))) == N and set(tier_field(N, seed=3)) == {"t0.1", "t1", "t10", "t50", "t100"}
    assert got == {(s, float(p), f) for s in stores for p in SELECTIVITIES for f in FIELDS} | {
        (s, 100.0, "(none)") for s in stores}
    for r in filtered_rows:
        want = N if r.filter_fields == "(none)" else _expected_matches(r.filter_fields, r.selectivity)
        assert r.filter_matches == want, (r.filter_fields, r.selectivity)
        assert r.latency_p50_ms is not None and r.latency_p50_ms > 0
        assert r.to_json()["selectivity"] == r.selectivity and r.to_json()["filter_path"] == r.filter_path
    ref = [r for r in filtered_rows if r.store in REFERENCES]
    assert {r.filter_path for r in ref} == {"native"} and {r.reducer for r in ref} == {"none"}
    product = {(r.selectivity, r.filter_fields): r for r in filtered_rows if r.store == DEFAULT_RECIPE}
    assert {r.filter_path for r in product.values()} == {"exact scan", "unfiltered"}
    # 500 matches of 384 float16 dimensions are under the 1 MiB scan threshold (issue 37)
    assert product[50.0, "bucket"].filter_path == product[50.0, "date"].filter_path == "exact scan"
    plain = {(r.selectivity, r.filter_fields): r.filter_path for r in filtered_rows if r.store == PLAIN}
    # nothing to scan: a broad filter is post-filtered, a narrow one the store's filtered search
    assert plain == {(float(s), f): "post filter" if s == 50 else "store filter"
                     for s in SELECTIVITIES for f in FIELDS} | {(100.0, "(none)"): "unfiltered"}


def test_recall_is_against_filtered_truth(filtered_rows):
    """An exact scan over the matches' full vectors IS the filtered truth: recall 1.0 exactly. A
    truth that ignored the filter would put these rows near 0.1 (1 %) and 0 (0.1 %)."""
    for r in filtered_rows:
        if r.filter_path == "exact scan":
            assert r.neighbor_recall_at_k == 1.0, (r.store, r.selectivity)
        assert r.neighbor_recall_at_k is not None and r.neighbor_recall_at_k >= 0.5, (r.store, r.selectivity)


def test_report_shows_the_filtered_table(filtered_rows):
    text = render_report(filtered_rows, {})
    assert "### Filtered search" in text
    assert f"| {REFERENCE_LABEL} | bucket | 0.1 % | 1 | native |" in text
    assert "| exact scan |" in text and "| store filter |" in text and "| post filter |" in text
    escaped = DEFAULT_RECIPE.replace("|", "\\|")  # a recipe's own '|' must not split the cell
    assert f"| {escaped} | bucket | 0.1 % | 1 | exact scan |" in text
    assert f"| {escaped} | bucket AND tag | 50 % | 500 | exact scan |" in text


def test_suite_declares_the_filtered_options(tmp_path: Path):
    from slimvec.benchmarks.suite import load_suite

    (tmp_path / "pyproject.toml").write_text("")
    suite = tmp_path / "f.toml"
    suite.write_text('[data]\nvectors = "v.npy"\n[run]\nreducers = []\nfiltered = [50, 0.1]\n'
                     f'filter_recipes = ["{DEFAULT_RECIPE}"]\n')
    np.save(tmp_path / "v.npy", np.ones((4, 8), np.float32))
    cfg = load_suite(suite).config(tmp_path / "w")
    assert cfg.filtered == [50, 0.1] and cfg.filter_recipes == [DEFAULT_RECIPE]


@pytest.mark.parametrize("bad", [0, 150, "10"])
def test_selectivity_out_of_range_is_refused(tmp_path: Path, bad):
    with pytest.raises(ConfigError, match="selectivities in percent"):
        BenchConfig(reducers=[], stores=["hnsw"], work_dir=tmp_path, filtered=[bad]).validate()
