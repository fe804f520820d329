"""Issue 27 item 1: one ranking rule for report.md, report.html's planner, plan and tune; a metric
that cannot discriminate is flagged and not used; nothing is recommended that `slimvec ingest`
cannot build, and the command that builds it is printed next to it.

``data/stsb_dev_results.json`` is a real run on the bundled data, kept as it came out:
``slimvec bench --pairs slimvec/data/stsb-dev.tsv --out OUT`` (16 rows, 2,910 sentences, 522
queries; task recall@10 is 1.000 on 15 of 16 rows, 0.998 on the last)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from slimvec.benchmarks.analysis import best_per_budget, budget_ladder, quality_metric
from slimvec.benchmarks.report import render_report
from slimvec.planner.ranking import buildable, check_metric, ingest_command, rank_key, ranking_metric
from slimvec.planner.rows import Row, load_rows

DEV = Path(__file__).parent / "data" / "stsb_dev_results.json"


@pytest.fixture(scope="module")
def dev():
    return load_rows(DEV)


def test_task_recall_on_the_dev_pairs_is_flagged_saturated_and_not_ranked_by(dev):
    rows, _ = dev
    check = check_metric(rows, "task_recall_at_k")
    assert not check.usable and check.reason.startswith("saturated: 16 of 16 rows >= 0.99")
    assert check_metric(rows, "neighbor_recall_at_k").usable
    metric, flagged = ranking_metric(rows, "task_recall_at_k")
    assert metric == "neighbor_recall_at_k" and [c.metric for c in flagged] == ["task_recall_at_k"]
    assert quality_metric(rows) == "neighbor_recall_at_k"


def test_too_few_positives_and_within_noise_are_flagged():
    few = [Row(reducer="none", store="hnsw", n_queries=12, task_recall_at_k=v, k=10) for v in (0.5, 0.7, 0.9)]
    assert check_metric(few, "task_recall_at_k").reason.startswith("too few positives: 12 queries")
    close = [Row(reducer="none", store="hnsw", n_queries=200, k=10, neighbor_recall_at_k=v)
             for v in (0.951, 0.950, 0.949, 0.80)]
    assert "within one standard error" in check_metric(close, "neighbor_recall_at_k").reason
    spread = [Row(reducer="none", store="hnsw", n_queries=200, k=10, neighbor_recall_at_k=v)
              for v in (0.95, 0.90, 0.85, 0.80)]
    assert check_metric(spread, "neighbor_recall_at_k").usable


def test_peers_routed_and_unsaveable_reducers_are_not_buildable(dev):
    rows, _ = dev
    binary = next(r for r in rows if r.store == "st:binary")
    ok, why = buildable(binary)
    assert not ok and "st:binary" in why
    assert not buildable({"reducer": "umap:48", "store": "hnsw"})[0]
    assert not buildable({"reducer": "pca:96", "store": "kmeans:128,p=4", "kind": "routed"})[0]
    sq8 = next(r for r in rows if r.store == "faiss:SQ8")
    assert buildable(sq8) == (True, "")
    assert ingest_command(sq8) == "slimvec ingest DOCS.jsonl --index INDEX --recipe 'none|faiss:SQ8'"
    assert ingest_command({"reducer": "pca:96", "store": "hnsw", "rescore": 8}).endswith(
        "--recipe 'pca:96|hnsw|rescore=8'")


def test_report_recommends_only_buildable_configurations_with_their_command(dev):
    """Before: 'none → st:binary' was the best configuration at every budget (task recall 1.000
    everywhere), a configuration slimvec ingest cannot build."""
    rows, meta = dev
    picks = best_per_budget(rows, budget_ladder(rows), "task_recall_at_k")
    assert all(r is None or buildable(r)[0] for _, r in picks)
    assert dict(picks)[64.0] is None  # only st:binary (49 B) fits: not recommended
    text = render_report(rows, meta)
    assert "**task R@10 is not used for ranking**: saturated: 16 of 16 rows >= 0.99" in text
    # per footing (issue 28): the rows that were not re-ranked, then the re-ranked ones
    plain = text.split("### Best configuration per bytes/vector budget (nbr R@10), not re-ranked rows")[1]
    budget_lines = [line for line in plain.split("###")[0].splitlines() if line.startswith("| 512 |")]
    assert len(budget_lines) == 1 and "none → faiss:SQ8" in budget_lines[0] \
        and "--recipe 'none\\|faiss:SQ8'" in budget_lines[0]
    # st:binary is a peer beside the pick, never the recommended configuration (column 2)
    picks_column = [line.split(" | ")[1] for line in text.splitlines()
                    if line.startswith("| ") and "`slimvec ingest" in line]
    assert picks_column and not any("st:binary" in c for c in picks_column)
    assert "Not recommended (slimvec ingest cannot build them" in text


def test_rank_key_is_one_rule_for_a_floor_and_a_budget():
    small_ok = rank_key(True, 0.96, 100.0, floor=0.95)
    big_better = rank_key(True, 0.99, 900.0, floor=0.95)
    assert small_ok < big_better  # under a floor: the smallest meeting it
    assert rank_key(True, 0.99, 900.0) < rank_key(True, 0.96, 100.0)  # a budget alone: the best
    assert rank_key(True, 0.5, 1.0, buildable=False) > rank_key(False, 0.1, 1e9)  # unbuildable last
    assert rank_key(False, 0.94, 50.0, floor=0.95) < rank_key(False, 0.90, 10.0, floor=0.95)


def test_plan_on_a_saturated_target_ranks_by_a_metric_that_discriminates(tmp_path):
    """Before: `plan --min-task-recall 0.95` ranked by the saturated task recall, so the smallest
    row meeting it won whatever its neighbour recall. Now the floor still filters, the ranking is
    by neighbour recall, the flag is printed, and the winner comes with the command that builds it."""
    import json

    from typer.testing import CliRunner

    from slimvec.cli import app

    res = CliRunner().invoke(app, ["plan", "--docs", "100000", "--dim", "384", "--results", str(DEV),
                                   "--min-task-recall", "0.95", "--store", "faiss:SQ8",
                                   "--store", "faiss:PQ48np", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["ranked_by"] == "neighbor_recall_at_k"
    assert plan["flagged_metrics"][0]["reason"].startswith("saturated: 16 of 16 rows")
    best = plan["recommendation"]
    # PQ48np is smaller and meets task recall 0.95 (0.998), but its neighbour recall is 0.808
    assert best["store"] == "faiss:SQ8" and best["neighbor_recall_at_k"] > 0.99
    assert best["command"] == "slimvec ingest DOCS.jsonl --index INDEX --recipe 'none|faiss:SQ8'"
    assert any("task_recall_at_k is not used for ranking: saturated" in n for n in plan["notes"])
    # the text form prints 'build it: ...' under the recommendation: test_latency.py checks it


def test_tune_orders_its_candidates_by_the_same_rule():
    """tune's objective is rank_key: under a floor the smallest RAM meeting it (not the best
    recall), p50 only breaking ties; a candidate missing the floor ranks by its recall."""
    from slimvec.planner.tune import TuneCandidate, _objective
    from slimvec.recipe import Recipe

    small = TuneCandidate(Recipe("pca:48", "hnsw"), 48, ram_bytes=100.0, recall=0.96, p50_ms=0.5, meets=True)
    big = TuneCandidate(Recipe("none", "hnsw"), 384, ram_bytes=900.0, recall=0.999, p50_ms=0.1, meets=True)
    near = TuneCandidate(Recipe("pca:96", "hnsw"), 96, ram_bytes=50.0, recall=0.94, meets=False)
    far = TuneCandidate(Recipe("pca:24", "hnsw"), 24, ram_bytes=10.0, recall=0.80, meets=False)
    ranked = sorted([far, big, near, small], key=lambda c: _objective(c, 0.95))
    assert ranked == [small, big, near, far]
    for c in ranked:
        assert _objective(c, 0.95) == rank_key(c.meets, c.recall, c.ram_bytes, floor=0.95, tiebreak=c.p50_ms)
    assert sorted([small, big], key=lambda c: _objective(c, None)) == [big, small]  # a budget alone


def test_report_html_planner_ranks_like_plan_and_shows_what_rescoring_costs(dev, tmp_path):
    """report.html's planner data says which metric each target ranks by (task recall is flagged
    on the dev pairs), carries the command of each candidate, and every rescored row carries the
    RAM (id lookup) and disk (full vectors read) its rescoring adds beyond its plain twin."""
    from benchmarks.pages.html.data import planner_data, row_facets
    from slimvec.planner.candidates import candidates_from_results
    from slimvec.planner.sizing import rescore_bytes_per_vector

    rows, _ = dev
    some = [r for r in rows if r.store in ("faiss:SQ8", "faiss:PQ48np", "st:binary")]
    data = planner_data(some, workdir=tmp_path)
    block = data["dims"]["384"]
    assert block["ranked_by"]["task_recall_at_k"] == "neighbor_recall_at_k"
    assert block["flagged"]["task_recall_at_k"][0]["reason"].startswith("saturated")
    sq8 = next(c for c in block["candidates"] if c["store"] == "faiss:SQ8")
    assert sq8["buildable"] and sq8["command"].endswith("--recipe 'none|faiss:SQ8'")
    rescored = next(r for r in rows if r.store == "st:binary" and r.rescore)
    facets = row_facets(rescored)
    # sized as the plan sizes that row's candidate: the float16 full vectors the recipe keeps
    hnsw = dataclasses.replace(next(r for r in rows if r.store == "faiss:SQ8"), rescore=4)
    cand = next(c for c in candidates_from_results([hnsw], 384) if c.rescore)
    assert (row_facets(hnsw)["rescore_ram_per_vector"], row_facets(hnsw)["rescore_disk_per_vector"]) == \
        cand.rescore_bytes_per_vector(384) == rescore_bytes_per_vector(384, "float16") == (facets[
            "rescore_ram_per_vector"], 384 * 2 + 8)
    assert facets["rescore_ram_per_vector"] > 0 and facets["build"] is None and "st:binary" in facets["why_not"]
    plain = row_facets(next(r for r in rows if r.store == "faiss:SQ8"))
    assert plain["rescore_ram_per_vector"] == 0 and plain["build"].startswith("slimvec ingest")
