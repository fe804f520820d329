"""`slimvec plan` in a subprocess with a hand-made results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _row(reducer: str, dim_out: int, store: str, task: float) -> dict:
    return {"dataset": "stsb-dev", "encoder": "minilm", "dim_in": 384, "reducer": reducer,
            "dim_out": dim_out, "store": store, "task_recall_at_10": task, "neighbor_recall_at_10": 0.9,
            "reducer_bytes": 0 if reducer == "none" else 4 * 384 * dim_out, "latency_p50_ms": None}


def _plan(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "slimvec", "plan", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_plan_cli_recommends_a_config_meeting_the_target(tmp_path: Path) -> None:
    rows = [_row("none", 384, "hnsw", 0.95), _row("pca:96", 96, "hnsw", 0.94),
            _row("pca:48", 48, "hnsw", 0.90), _row("pca:96", 96, "faiss:HNSW32", 0.935)]
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"rows": rows, "meta": {}}), encoding="utf-8")
    proc = _plan("--docs", "1000000", "--dim", "384", "--min-task-recall", "0.93",
                 "--results", str(results), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    best = plan["recommendation"]
    assert best["task_recall_at_k"] >= 0.93 and plan["k"] == 10  # an old file: read as k = 10
    assert (best["reducer"], best["store"]) == ("pca:96", "hnsw")  # smaller than faiss:HNSW32 at 96-d
    # a million 96-d float32 vectors alone are 384 MB: the predicted RAM must hold them
    assert 1_000_000 * 96 * 4 < best["ram_bytes"] < 1_000_000 * 384 * 4
    assert {c["store"] for c in plan["size_checks"]} == {"hnsw", "faiss:HNSW32"}
    assert all(abs(c["error"]) < 0.10 for c in plan["size_checks"])
    assert [p for p in tmp_path.iterdir()] == [results]  # sizing builds were cleaned up

    table = _plan("--docs", "1000000", "--dim", "384", "--memory-budget", "400MiB", "--store", "hnsw",
                  "--results", str(results), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "recommended: pca:48 → hnsw" in table.stdout
    assert "prediction at a size not fitted on" in table.stdout


def test_plan_cli_bad_input_is_one_line_error(tmp_path: Path) -> None:
    proc = _plan("--docs", "1000", "--dim", "384", "--min-task-recall", "0.9", "--store", "hnsw", cwd=tmp_path)
    assert proc.returncode == 2
    assert "needs measured quality" in proc.stderr and "Traceback" not in proc.stderr
    proc = _plan("--docs", "1000", "--dim", "384", "--memory-budget", "lots", "--store", "hnsw", cwd=tmp_path)
    assert proc.returncode == 2 and "--memory-budget 'lots'" in proc.stderr


def test_plan_cli_recipe_quick_sweep_measures_the_recipe(tmp_path: Path) -> None:
    """--recipe with --vectors: the sweep measures the recipe's depth, the plan shows the recipe."""
    import numpy as np

    rng = np.random.default_rng(0)
    # 12 latent dimensions plus a little noise: pca:16 keeps the structure, rescoring the rest
    X = (rng.standard_normal((500, 12)) @ rng.standard_normal((12, 64))
         + 0.05 * rng.standard_normal((500, 64))).astype(np.float32)
    np.save(tmp_path / "v.npy", X)
    proc = _plan("--docs", "100000", "--dim", "64", "--vectors", str(tmp_path / "v.npy"), "--sample", "500",
                 "--recipe", "pca:16|hnsw|rescore=4", "--min-neighbor-recall", "0.5", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = json.loads(proc.stdout)
    assert [c["recipe"] for c in plan["candidates"]] == ["pca:16|hnsw|rescore=4"]
    cand = plan["candidates"][0]
    assert cand["rescore"] and 0.9 <= cand["neighbor_recall_at_k"] <= 1.0
    assert cand["disk_bytes"] > 100_000 * 64 * 4  # the full vectors on disk are counted
    bad = _plan("--docs", "10", "--dim", "64", "--recipe", "pca:16|nostore", cwd=tmp_path)
    assert bad.returncode == 2 and "store stage" in " ".join(bad.stderr.split())


def _page_data(html_path: Path) -> dict:
    text = html_path.read_text(encoding="utf-8")
    start = text.index('<script id="report-data" type="application/json">') + len(
        '<script id="report-data" type="application/json">')
    return json.loads(text[start:text.index("</script>", start)])


def test_plan_reads_the_quality_of_a_bench_run_at_k_5(tmp_path: Path) -> None:
    """Issue 24 item 5: a run measured at k = 5 has quality figures; `slimvec plan --results` must
    find and use them (it looked for the ``*_at_10`` keys only), and report.md and report.html
    must show them under their k (nbr R@5), not as empty @10 columns."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = (rng.standard_normal((300, 8)) @ rng.standard_normal((8, 32))
         + 0.05 * rng.standard_normal((300, 32))).astype(np.float32)
    np.save(tmp_path / "v.npy", X)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    bench = subprocess.run([sys.executable, "-m", "slimvec", "bench", "--vectors", str(tmp_path / "v.npy"),
                            "--reducer", "pca:8", "--store", "hnsw", "--no-baselines", "--k", "5",
                            "--max-queries", "30", "--latency-queries", "5", "--out", str(tmp_path / "run")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert bench.returncode == 0, bench.stderr[-3000:]
    results = tmp_path / "run" / "results.json"
    raw = json.loads(results.read_text(encoding="utf-8"))["rows"]
    assert {r["k"] for r in raw} == {5} and all(r["neighbor_recall_at_k"] is not None for r in raw)

    proc = _plan("--docs", "100000", "--dim", "32", "--results", str(results), "--min-neighbor-recall", "0.5",
                 "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = json.loads(proc.stdout)
    assert plan["metric"] == "neighbor_recall_at_k" and plan["k"] == 5
    measured = {(r["reducer"], r["store"]): r["neighbor_recall_at_k"] for r in raw if not r["rescore"]}
    for cand in plan["candidates"]:
        assert cand["neighbor_recall_at_k"] == pytest.approx(measured[(cand["reducer"], cand["store"])])
    assert plan["recommendation"] is not None
    table = _plan("--docs", "100000", "--dim", "32", "--results", str(results), "--min-neighbor-recall", "0.5",
                  cwd=tmp_path)
    assert table.returncode == 0, table.stderr[-3000:]
    assert "nbr R@5" in table.stdout and "R@10" not in table.stdout

    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "nbr R@5" in report and "@10" not in report
    from benchmarks.pages.html import render_report_html  # the page is a view in the checkout

    page = _page_data(render_report_html([results], tmp_path / "run" / "report.html"))
    assert page["k"] == 5 and ["neighbor_recall_at_k", "neighbour recall@5"] in page["metrics"]
    assert all(r["neighbor_recall_at_k"] is not None for r in page["rows"])
    block = page["planner"]["dims"]["32"]
    assert all(c["quality"]["neighbor_recall_at_k"] is not None for c in block["candidates"])
    script = (ROOT / "benchmarks" / "pages" / "html" / "report.js").read_text(encoding="utf-8")
    assert "_at_10" not in script and "R@10" not in script  # the page titles every metric with its k
