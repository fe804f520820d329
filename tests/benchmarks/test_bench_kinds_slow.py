"""Tiny runs of every ``python -m benchmarks KIND`` measurement (issue 24 item 3): each loads MiniLM,
builds stores or starts ``slimvec`` processes and a loopback server, so this module is in the slow
tier. Each asserts the record's machine facts and the figures' shape, not their values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.cli import app

RUNNER = CliRunner()


def _run(*args: str):
    return RUNNER.invoke(app, list(args))


def _record(path: Path, kind: str) -> dict:
    rec = json.loads(path.read_text())
    assert rec["kind"] == kind and rec["command"].startswith("slimvec ")
    machine = rec["machine"]
    assert machine["cpus"] >= 1 and len(machine["load_average_start"]) == 3
    assert len(machine["load_average_end"]) == 3 and isinstance(machine["quiet"], bool)
    return rec["result"]


def _tiny_corpus(path: Path, n: int) -> Path:
    from benchmarks.corpora.sentences import pair_sentences, write_jsonl

    return write_jsonl(path, [{"id": f"d{i}", "text": t} for i, t in enumerate(pair_sentences(n))])


def test_ingest_kind_on_a_tiny_corpus(tmp_path):
    corpus = _tiny_corpus(tmp_path / "c.jsonl", 40)
    res = _run("ingest", "--corpus", str(corpus), "--store", "hnsw", "--reducer", "pca:8",
               "--out", str(tmp_path / "ingest.json"), "--markdown", str(tmp_path / "ingest.md"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "ingest.json", "ingest")
    (row,) = result["rows"]
    assert result["documents"] == 40 and row["store"] == "hnsw"
    assert row["ingest_docs_per_s"] > 0 and row["bytes_full"] > row["bytes_reduced"] > 0
    assert "| hnsw |" in (tmp_path / "ingest.md").read_text()


def test_ingest_ceiling_kind_on_a_tiny_corpus(tmp_path):
    res = _run("ingest-ceiling", "--docs", "40", "--store", "hnsw", "--reducer", "pca:8",
               "--out", str(tmp_path / "c.json"), "--markdown", str(tmp_path / "c.md"))
    assert res.exit_code == 0, res.output
    (row,) = _record(tmp_path / "c.json", "ingest-ceiling")["rows"]
    import os

    threads = sorted({1, os.cpu_count() or 1})
    assert set(row["encoder_docs_per_s"]) == {f"b{b}/t{t}" for b in (32, 128) for t in threads}
    assert 1 <= row["ingest_threads"] <= (os.cpu_count() or 1)
    assert row["ceiling_docs_per_s"] == max(row["encoder_docs_per_s"].values())
    assert row["ratio"] == pytest.approx(row["ingest_docs_per_s"] / row["ceiling_docs_per_s"], rel=0.05)  # rates are rounded


def test_pipeline_kind_takes_the_recipe_of_the_default_store(tmp_path):
    corpus = _tiny_corpus(tmp_path / "c.jsonl", 300)
    recipe = "none|faiss:HNSW16,SQ4,ef=128,efc=64|rescore=auto,keep_full=float16"
    res = _run("ingest-ceiling", "--no-encoder", "--corpus", str(corpus), "--docs", "300", "--store", "default",
               "--threads", "1", "--recipe", recipe, "--out", str(tmp_path / "p.json"),
               "--markdown", str(tmp_path / "p.md"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "p.json", "ingest-pipeline")
    (row,) = result["rows"]
    assert result["recipe"] == recipe and result["documents"] == 300
    assert row["store"] == "default" and row["threads"] == 1 and row["docs_per_s"] > 0
    assert recipe in (tmp_path / "p.md").read_text()


def test_sizing_kind_fits_and_checks_a_store_at_tiny_sizes(tmp_path):
    res = _run("sizing", "--store", "hnsw:threads=1", "--size", "200", "--size", "400", "--dim", "8",
               "--dim", "16", "--big", "1000", "--no-ram", "--out", str(tmp_path / "s.json"),
               "--markdown", str(tmp_path / "s.md"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "s.json", "sizing")
    assert set(result["models"]) == {"hnsw:threads=1 payload=0", "hnsw:threads=1 payload=120"}
    assert len(result["tables"]["checks"]) == 3  # two held-out sizes without payload, one with
    page = (tmp_path / "s.md").read_text()
    assert "Largest disk error at a size not fitted on" in page and "Command:" in page
    again = _run("table", "sizing", str(tmp_path / "s.json"), "--out", str(tmp_path / "again.md"))
    assert again.exit_code == 0 and (tmp_path / "again.md").read_text() == page  # the page re-renders


def test_rebuild_kind_times_three_whole_commands(tmp_path):
    docs = _tiny_corpus(tmp_path / "d.jsonl", 40)
    res = _run("rebuild", "--docs", str(docs), "--old", "pca:8|hnsw|keep_full=float16",
               "--new", "pca:4|faiss:Flat|keep_full=float16", "--out", str(tmp_path / "r.json"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "r.json", "rebuild")
    assert result["documents"] == 40 and result["rebuild_seconds"] > 0
    assert result["reingest_over_rebuild"] == pytest.approx(result["reingest_seconds"] / result["rebuild_seconds"],
                                                            rel=0.05)


def test_sync_kind_changes_removes_and_adds_one_percent(tmp_path):
    from benchmarks.kinds.lifecycle import sync_versions

    pool = [{"id": f"d{i}", "text": f"text {i}"} for i in range(220)]
    v1, v2 = sync_versions(pool, 200)
    assert len(v1) == 200 and len(v2) == 200  # 2 removed, 2 added
    assert sum(1 for r in v2 if r["id"] in {x["id"] for x in v1} and r not in v1) == 2  # 2 changed
    corpus = _tiny_corpus(tmp_path / "c.jsonl", 120)
    res = _run("sync", "--corpus", str(corpus), "--n", "100", "--recipe", "pca:8|hnsw",
               "--out", str(tmp_path / "s.json"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "s.json", "sync")
    assert result["sync"]["added"] == 1 and result["sync"]["updated"] == 1 and result["sync"]["deleted"] == 1
    assert result["full"]["count"] == result["sync"]["count"] == 100
    short = _run("sync", "--corpus", str(corpus), "--n", "200")
    assert "holds 120 rows" in str(short.exception)


def test_scaleout_kind_runs_one_process_and_refuses_an_unknown_run(tmp_path):
    res = _run("scaleout", "--docs", "150", "--work", str(tmp_path / "w"), "--run", "local",
               "--out", str(tmp_path / "s.json"))
    assert res.exit_code == 0, res.output
    (row,) = _record(tmp_path / "s.json", "scaleout")["rows"]
    assert row["run"] == "local" and row["docs"] == 150 and row["wall_seconds"] >= row["total_seconds"]
    bad = _run("scaleout", "--docs", "10", "--work", str(tmp_path / "w2"), "--run", "spark4")
    assert "Unknown scale-out run 'spark4'" in str(bad.exception)
    assert not (tmp_path / "w2").exists()  # refused before any work


def test_service_kind_bounded_load_on_loopback(tmp_path):
    res = _run("service", "--docs", "20", "--fit", "30", "--batch", "10", "--clients", "1",
               "--seconds", "0.2", "--big", "200", "--reducer", "pca:8", "--out", str(tmp_path / "l.json"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "l.json", "service")
    assert [r["clients"] for r in result["search_http_batched"]] == [1, 4, 16]
    loads = result["search_http_batched"] + result["search_http_unbatched"]
    assert all(r["errors"] == 0 and r["requests"] >= r["clients"] for r in loads), loads
    assert result["big_count"] == 200 and result["idle_rss_big_mb"] > 0
    assert result["ingest_http"]["docs_per_s"] > 0 and result["ingest_ratio_http_vs_cli"] > 0


def test_qdrant_compat_kind_loads_and_queries_through_qdrant_client(tmp_path):
    res = _run("qdrant-compat", "--n", "100", "--queries", "10", "--out", str(tmp_path / "q.json"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "q.json", "qdrant-compat")
    assert result["slimvec_serve"]["points"] == 100 and result["slimvec_serve"]["p50_ms"] > 0
    assert result["qdrant_client_memory_reference"]["p50_ms"] > 0


def test_pruning_kind_two_sparsities_tiny(tmp_path):
    res = _run("pruning", "--sparsity", "0", "--sparsity", "0.1", "--rewind-steps", "1",
               "--score-sentences", "8", "--throughput-sentences", "16", "--rounds", "1", "--eval-pairs", "40",
               "--rewind-sentences", "64", "--out", str(tmp_path / "p.json"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "p.json", "pruning")
    base, pruned = result["rows"]
    assert base["speedup"] == 1.0 and base["heads"] == 72
    assert pruned["heads"] < 72 and pruned["safetensors_bytes"] < base["safetensors_bytes"]
    assert {"sts_spearman", "recall_at_10"} <= set(pruned["rewound"])
    table = _run("table", "pruning", str(tmp_path / "p.json"))
    assert table.exit_code == 0 and "| 10% |" in table.output


def test_default_recipe_kind_compares_candidates_with_full_hnsw(minilm_vectors, tmp_path):
    import numpy as np

    from benchmarks.kinds.recipe_choice import EF_LADDER, choice_markdown

    data, queries = tmp_path / "corpus.npy", tmp_path / "queries.npy"
    np.save(data, minilm_vectors[:2000])
    np.save(queries, minilm_vectors[2900:])
    faiss_recipe = "pca:48|faiss:HNSW16,SQ8,efc=64|rescore=auto,keep_full=float16"
    res = _run("default-recipe", "--data", str(data), "--queries", str(queries),
               "--n", "1500", "--n-queries", "60", "--rounds", "2", "--candidate", faiss_recipe,
               "--candidate", "none|hnsw:ef=16", "--work", str(tmp_path / "w"),
               "--out", str(tmp_path / "c.json"), "--page", str(tmp_path / "c.md"))
    assert res.exit_code == 0, res.output
    result = _record(tmp_path / "c.json", "default-recipe")
    (size,) = result["sizes"]
    ref, recipe, small_ef = size["rows"]
    assert size["n"] == 1500 and size["n_queries"] == 60
    assert ref["recipe"] == "none|hnsw:M=16,ef_construction=200" and not ref["meets"]
    ef = ref["params"]["ef"]  # the first beam of the ladder reaching the target (or the last)
    tried = {int(e): r for e, r in ref["ef_recalls"].items()}
    assert ef in EF_LADDER and tried[ef] == ref["recall_at_10"]
    assert all(r < 0.99 for e, r in tried.items() if e < ef)
    assert recipe["depth"] >= 1 and 0 < recipe["recall_at_10"] <= 1
    for row in size["rows"]:
        assert len(row["p50_ms"]) == 2 and all(p > 0 for p in row["p50_ms"])
        assert row["memory"]["serving"] > 0 and row["memory"]["process_baseline"] > 0
        assert row["disk_bytes"] > 0 and row["build_s"] > 0 and row["build_cpu_s"] > 0
    # the reducer's index holds less than full HNSW; its full vectors are paged apart
    assert recipe["memory"]["serving"] < ref["memory"]["serving"]
    assert recipe["disk_bytes_full_vectors"] > 0 and ref["disk_bytes_full_vectors"] == 0
    for row in (recipe, small_ef):
        assert row["meets"] == (row["recall_at_10"] >= 0.99 and max(row["p50_ratio"]) <= 1.5
                                and row["memory_ratio"] <= 0.25)
    page = (tmp_path / "c.md").read_text()
    assert page == choice_markdown(result) and page.count("\n| ") == 4  # header + three rows
