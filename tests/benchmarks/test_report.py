"""Reports from a small hand-made results file: Pareto front, budgets, tables, nulls, plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.pages.plots import PLOTS, draw_all
from slimvec.benchmarks.report import NULL, best_per_budget, budget_ladder, pareto_front, write_report
from slimvec.errors import ConfigError, PersistenceError
from slimvec.planner.rows import Row, load_rows

KEYS = ["dataset", "encoder", "dim_in", "reducer", "dim_out", "store", "n_corpus", "n_queries",
        "fit_s", "transform_s_per_10k", "reducer_bytes", "build_s", "index_bytes", "bytes_per_vector",
        "neighbor_recall_at_10", "task_recall_at_10", "task_mrr_at_10", "sts_spearman",
        "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "qps", "cluster_accuracy"]


def row(name: str, reducer: str, dim: int, store: str, bpv: float, task: float | None,
        nbr: float | None = None, p50: float | None = 0.3, dataset: str = "stsb", **extra) -> dict:
    r = {k: None for k in KEYS}
    r.update(dataset=dataset, encoder="minilm", dim_in=384, reducer=reducer, dim_out=dim, store=store,
             n_corpus=1000, n_queries=100, fit_s=0.1 if reducer != "none" else None,
             build_s=0.5, index_bytes=int(bpv * 1000), bytes_per_vector=bpv,
             neighbor_recall_at_10=nbr, task_recall_at_10=task, task_mrr_at_10=task and task - 0.1,
             sts_spearman=0.8, latency_p50_ms=p50, latency_p95_ms=p50 and 2 * p50,
             latency_p99_ms=p50 and 3 * p50, qps=1000.0, cluster_accuracy=None, _name=name)
    r.update(extra)
    return r


# rows as an old results file spells them (``*_at_10``), written to files as they are; the analysis
# functions take them as typed rows (TYPED), as load_rows reads them
# hand-checked: C (230, .88) < B (420, .93) < A (1600, .95) are the front;
# D is beaten by C (more bytes, less recall), E by B (same bytes, less), F by C (same bytes, less),
# H by A (more bytes, same recall); G has no task recall and is left out.
ROWS = [
    row("A", "none", 384, "hnsw", 1600, 0.95, 1.0),
    row("B", "pca:96", 96, "hnsw", 420, 0.93, 0.90),
    row("C", "pca:48", 48, "hnsw", 230, 0.88, 0.75),
    row("D", "pca:48", 48, "faiss:HNSW32", 260, 0.86, 0.74, p50=0.2),
    row("E", "none", 384, "faiss:SQ8", 420, 0.90, 0.97, rescore=True),
    row("F", "rp:48", 48, "hnsw", 230, 0.80, 0.60),
    row("G", "pca:32", 32, "hnsw", 150, None, 0.55),
    row("H", "none", 384, "qdrant-edge", 2000, 0.95, 1.0, p50=None),
]
TYPED = [Row.from_json(r) for r in ROWS]


def test_pareto_front_hand_checked() -> None:
    front = pareto_front(TYPED, "bytes_per_vector", "task_recall_at_k")
    assert [r["_name"] for r in front] == ["C", "B", "A"]
    nbr_front = pareto_front(TYPED, "bytes_per_vector", "neighbor_recall_at_k")
    # neighbour recall: B (420, .90) loses to E (420, .97) at the same size
    assert [r["_name"] for r in nbr_front] == ["G", "C", "E", "A"]


def test_best_per_budget_picks_highest_recall_that_fits() -> None:
    ladder = budget_ladder(TYPED)
    assert ladder[0] == 128 and ladder[-1] == 2048
    picks = dict(best_per_budget(TYPED, [200, 256, 512, 4096]))
    assert picks[200] is None  # only G fits, and it has no task recall
    assert picks[256]["_name"] == "C"
    assert picks[512]["_name"] == "B"
    assert picks[4096]["_name"] == "A"  # ties with H on recall, A is smaller


def _write(tmp_path: Path, payload) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def _with_plots(results: Path, out: Path) -> str:
    """report.md's text with the PNG plots drawn into ``out`` (``python -m benchmarks report --plots``)."""
    from slimvec.benchmarks.report import render_report

    rows, meta = load_rows(results)
    out.mkdir(parents=True, exist_ok=True)
    return render_report(rows, meta, draw_all(rows, out))


def test_report_tables_nulls_and_plots(tmp_path: Path) -> None:
    rows = ROWS + [row("Z", "pca:96", 96, "hnsw", 400, None, 0.9, dataset="msrp")]
    results = _write(tmp_path, rows)
    report = write_report(results, tmp_path / "out")
    assert report.name == "report.md" and "## Plots" not in report.read_text(encoding="utf-8")
    text = _with_plots(results, tmp_path / "out")  # the checkout's view draws them
    assert "## Dataset `stsb`" in text and "## Dataset `msrp`" in text
    # every configuration of the run appears as a table row
    assert text.count("| pca:48 | 48 | hnsw |") == 1
    assert "| none | 384 | faiss:SQ8 +rescore |" in text
    # nulls show as a dash, never as 0 or None
    g_line = next(line for line in text.splitlines() if line.startswith("| pca:32 | 32 | hnsw |"))
    assert g_line.split(" | ")[5] == NULL
    assert "None" not in text and "nan" not in text.lower()
    # the Pareto section lists exactly the front, in order
    section = text.split("### Pareto front")[1].split("##")[0]
    labels = [line.split(" | ")[0].lstrip("| ") for line in section.splitlines() if line.startswith("| ")][1:]
    assert labels == ["pca:48 → hnsw", "pca:96 → hnsw", "none → hnsw"]
    # msrp has no task recall: its quality side falls back to neighbour recall
    assert "Pareto front: nbr R@10 against bytes per vector" in text
    assert "`cluster_accuracy` is — (not applicable) for every row" in text
    assert "`latency_p50_ms` is — (not applicable) for 1 of 9 rows: none → qdrant-edge" in text
    costs = text.split("### Reducer costs")[1].split("###")[0]
    assert "| pca:96 | 96 | 0.10 | — | — |" in costs and "| none | 384 | — | — | — |" in costs
    assert "### Cluster-routed retrieval" not in text  # no row has routed metrics
    for name in PLOTS:
        png = tmp_path / "out" / name
        assert png.stat().st_size > 1000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in text


def test_rows_and_meta_format_and_skips(tmp_path: Path) -> None:
    only_nbr = [row("A", "none", 384, "hnsw", 1600, None, 1.0, p50=None),
                row("B", "pca:96", 96, "hnsw", 420, None, 0.9, p50=None)]
    results = _write(tmp_path, {"rows": only_nbr,
                                "meta": {"command": "slimvec bench --vectors v.npy",
                                         "skipped": ["lle:96 on faiss: out of memory"]}})
    rows, meta = load_rows(results)
    assert len(rows) == 2 and meta["command"].startswith("slimvec bench")
    text = _with_plots(results, tmp_path / "o")
    assert "slimvec bench --vectors v.npy" in text
    assert "skipped: lle:96 on faiss: out of memory" in text
    assert "plot `pareto_task_recall.png` not drawn" in text
    assert "plot `latency_vs_dim.png` not drawn" in text
    assert not (tmp_path / "o" / "pareto_task_recall.png").exists()
    assert (tmp_path / "o" / "pareto_neighbor_recall.png").stat().st_size > 1000


def test_routed_retrieval_table(tmp_path: Path) -> None:
    rows = [row("A", "mcr2:64,clusters=32", 64, "hnsw", 300, 0.9, cluster_accuracy=0.7,
                routed_recall_at_10=0.85, routed_fraction_scanned=0.125, reducer_bytes=2048),
            row("B", "none", 384, "faiss:IVF32,Flat", 1600, 0.95, cluster_accuracy=0.6,
                routed_recall_at_10=0.9, routed_fraction_scanned=0.25)]
    text = write_report(_write(tmp_path, rows), tmp_path).read_text(encoding="utf-8")
    routed = text.split("### Cluster-routed retrieval")[1].split("###")[0]
    assert "| mcr2:64,clusters=32 → hnsw | 0.700 | 0.850 | 0.125 |" in routed
    assert "| none → faiss:IVF32,Flat | 0.600 | 0.900 | 0.250 |" in routed
    assert "| mcr2:64,clusters=32 | 64 | 0.10 | — | 2.0 KiB |" in text


def test_bad_results_files(tmp_path: Path) -> None:
    with pytest.raises(PersistenceError, match="No results file"):
        load_rows(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(PersistenceError, match="as JSON"):
        load_rows(bad)
    with pytest.raises(ConfigError, match="list of row objects"):
        load_rows(_write(tmp_path, {"meta": {}}))


# --------------------------------------------------------------------------- report.html (issue 40, 8)
def _saturated_rows() -> list[dict]:
    """Task recall at 1.0 on every row but one (it cannot discriminate); neighbour recall spreads."""
    return [row(f"S{i}", f"pca:{8 * (i + 1)}", 8 * (i + 1), "faiss:Flat", 40.0 * (i + 1),
                1.0 if i else 0.98, 0.5 + 0.05 * i, p50=0.1 + 0.01 * i) for i in range(10)]


def test_default_y_axis_is_a_metric_that_discriminates() -> None:
    from benchmarks.pages.html.data import default_metric

    chosen = default_metric([Row.from_json(r) for r in _saturated_rows()])
    assert chosen["key"] == "neighbor_recall_at_k"
    assert "task recall does not: saturated: 9 of 10 rows" in chosen["reason"]
    # nothing discriminates: the widest spread is the axis, and the page says so
    flat = [row(f"F{i}", "pca:8", 8, "hnsw", 40.0, 1.0, 0.995 + i / 1000) for i in range(4)]
    for r in flat:
        r["sts_spearman"] = 0.5 + r["neighbor_recall_at_10"]
    chosen = default_metric([Row.from_json(r) for r in flat])
    assert chosen["key"] in {"neighbor_recall_at_k", "sts_spearman"}
    assert "largest spread" in chosen["reason"]
    # a metric that does discriminate stays the default
    assert default_metric(TYPED)["key"] == "task_recall_at_k"


def test_report_html_names_no_absolute_path(tmp_path: Path) -> None:
    from benchmarks.pages.html import render_report_html

    run = tmp_path / "runs" / "mine"
    run.mkdir(parents=True)
    meta = {"command": f"slimvec bench --out {run} --data {tmp_path}/data/stsb.tsv",
            "skipped": [{"config": "pca:999", "reason": f"could not write {run}/work/pca.safetensors"}]}
    results = run / "results.json"
    results.write_text(json.dumps({"rows": ROWS, "meta": meta}), encoding="utf-8")
    page = render_report_html([results], tmp_path / "site" / "report.html", planner=False)
    text = page.read_text(encoding="utf-8")
    assert str(tmp_path) not in text and str(Path.home()) + "/" not in text
    assert "../runs/mine/results.json" in text  # the header names the file from the page's folder
