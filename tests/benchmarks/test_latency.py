"""Issue 27 item 2: latency measured on a small sample is carried to the planned N by each store's
growth (a scan linearly, a graph not at all beyond what was measured), always saying where it was
measured. The dev rows are a real run on the bundled STS-B dev pairs (2,910 vectors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimvec.connectors import parse_store_spec, store_class
from slimvec.planner.latency import latency_at

DEV = Path(__file__).parent / "data" / "stsb_dev_results.json"


@pytest.mark.parametrize("spec,growth", [("faiss:SQ8", "linear"), ("faiss:Flat", "linear"),
                                         ("faiss:IVF256,PQ16", "linear"), ("faiss:PQ48np", "linear"),
                                         ("faiss:HNSW32,SQ8", "graph"), ("hnsw", "graph"),
                                         ("qdrant-edge:quant=sq8", "graph")])
def test_each_store_says_how_its_search_grows(spec, growth):
    parsed = parse_store_spec(spec)
    assert store_class(parsed).search_growth(parsed.arg, dict(parsed.options or {})) == growth


def test_a_scan_scales_linearly_and_a_graph_is_refused_beyond_what_was_measured():
    p50, note = latency_at("faiss:SQ8", 0.069, 2910, 10_000_000)
    assert p50 == pytest.approx(0.069 * 10_000_000 / 2910) and "measured at n = 2,910" in note
    assert latency_at("faiss:SQ8", 0.069, 2910, 1000) == (0.069, "measured at n = 2,910")
    p50, note = latency_at("hnsw", 0.05, 2910, 10_000_000)
    assert p50 is None and note.startswith("measured at n = 2,910") and "not extrapolated" in note
    assert latency_at("hnsw", 0.05, 2910, 5000)[0] == 0.05


def test_plan_quotes_latency_at_its_n_with_where_it_was_measured():
    """Before: the planner quoted 'p50 0.069 ms' for a flat faiss:SQ8 scan of 10M documents,
    measured on 2,910 vectors."""
    from typer.testing import CliRunner

    from slimvec.cli import app

    args = ["plan", "--docs", "10000000", "--dim", "384", "--results", str(DEV), "--memory-budget", "64GiB",
            "--store", "faiss:SQ8", "--store", "hnsw"]
    res = CliRunner().invoke(app, args + ["--json"])
    assert res.exit_code == 0, res.output
    cands = {c["store"]: c for c in json.loads(res.stdout)["candidates"]}
    sq8, hnsw = cands["faiss:SQ8"], cands["hnsw"]
    assert sq8["p50_measured_at_n"] == 2910 and hnsw["p50_measured_at_n"] == 2910
    assert sq8["p50_ms_at_docs"] == pytest.approx(sq8["p50_ms_measured"] * 10_000_000 / 2910)
    assert sq8["p50_ms_at_docs"] > 100 * sq8["p50_ms_measured"]
    assert hnsw["p50_ms_at_docs"] is None and "not extrapolated" in hnsw["p50_note"]
    text = CliRunner().invoke(app, args)
    said = " ".join(text.output.split())
    assert "p50 at 10,000,000: " in said and "measured at n = 2,910" in said
    # issue 27 item 1: the recommendation comes with the one command that builds it
    assert "build it: slimvec ingest DOCS.jsonl --index INDEX --recipe 'none|hnsw'" in said


def test_report_html_planner_carries_where_latency_was_measured(tmp_path):
    from benchmarks.pages.html.data import planner_data
    from slimvec.planner.rows import load_rows

    rows, _ = load_rows(DEV)
    data = planner_data([r for r in rows if r.store in ("faiss:SQ8", "hnsw")], workdir=tmp_path)
    cands = {c["store"]: c for c in data["dims"]["384"]["candidates"]}
    assert cands["faiss:SQ8"]["growth"] == "linear" and cands["hnsw"]["growth"] == "graph"
    assert cands["faiss:SQ8"]["p50_n"] == 2910 and cands["hnsw"]["p50_n"] == 2910


def test_plan_and_plan_engine_say_why_they_differ_on_a_row():
    """Issue 27 item 2: `plan` said a configuration fits the memory budget, `plan --engine ray` that
    it needs 2 nodes, with nothing connecting the two. The engine part now says why."""
    from typer.testing import CliRunner

    from slimvec.cli import app

    res = CliRunner().invoke(app, ["plan", "--docs", "10000000", "--dim", "384", "--results", str(DEV),
                                   "--memory-budget", "64GiB", "--store", "hnsw", "--engine", "ray",
                                   "--cpu-rate", "100", "--node-ram", "16GiB", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    best = data["recommendation"]
    row = next(r for r in data["engine"]["rows"] if r["label"].startswith("none → hnsw"))
    assert best["meets_target"] and row["nodes"] > 1
    why = [line for line in data["engine"]["inputs"] if line.startswith("why they differ")]
    assert why and f"needs {row['shards']} shards" in why[0] and "--node-ram" in why[0]
