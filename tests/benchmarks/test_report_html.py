"""report.html from a real small bench run, opened in headless Debian Chromium with the network off.

The browser is Debian's ``chromium`` (``scripts/setup.sh`` installs it) driven by Playwright. When
it is missing these tests FAIL; they skip only when ``SLIMVEC_SKIP_BROWSER=1`` is set explicitly.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.pages.html import render_report_html
from benchmarks.pages.html.data import row_facets
from slimvec.benchmarks.datasets import pairs_datasets
from slimvec.benchmarks.report import human_bytes
from slimvec.benchmarks.runner import BenchConfig, run_bench, write_results
from slimvec.planner.plan import make_plan
from slimvec.planner.rows import load_rows
from slimvec.planner.sizing import SizeModel

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "slimvec" / "data"
CHROMIUM = os.environ.get("SLIMVEC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]

#: stated size budget of a page: 1 MiB for 400 rows (the 388-row bench-results/dev page is ~0.4 MiB)
PAGE_BUDGET_400_ROWS = 1 << 20


def _head(src: Path, n: int, dest: Path) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()[: n + 1]  # header + n rows
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A real bench: ~300 MiniLM sentences of STS-B dev, exact FAISS store, 3 reducers, rescoring,
    k-means routing; then report.html with the planner's size models."""
    tmp = tmp_path_factory.mktemp("html")
    dev = _head(DATA / "stsb-dev.tsv", 160, tmp / "stsb-dev.tsv")
    [ds] = pairs_datasets([dev], [None], cache_dir=tmp / "cache", max_queries=100)
    cfg = BenchConfig(reducers=["pca:32", "pca:16", "rp:32"], stores=["faiss:Flat"], work_dir=tmp / "work",
                      baselines=False, rescore=[4], kmeans=4, latency_queries=10, latency_repeats=1)
    rows, meta = run_bench([ds], cfg)
    meta["command"] = "test_report_html small run"
    results = write_results(rows, meta, tmp / "run")
    page = render_report_html([results], tmp / "run" / "report.html", workdir=tmp)
    return {"tmp": tmp, "results": results, "page": page, "rows": rows}


def _page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    m = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1).replace("<\\/", "</"))


# --------------------------------------------------------------------------- no browser needed
def test_page_is_self_contained(small_run):
    text = small_run["page"].read_text(encoding="utf-8")
    # no external script, style, image, font or frame: nothing with a src/href to fetch
    assert not re.search(r'<(script|img|iframe|link)[^>]+(src|href)=["\'](?!data:)', text)
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    assert "@import" not in text and not re.search(r"url\((?!#)", text)  # url(#id): in-page clip
    data = _page_data(small_run["page"])
    assert len(data["rows"]) == len(small_run["rows"])
    assert {r["source"] for r in data["rows"]} == {"run"}
    planner = data["planner"]["dims"]["384"]
    assert set(planner["models"]) == {"faiss:Flat"}
    assert len(small_run["page"].read_bytes()) < PAGE_BUDGET_400_ROWS


def test_committed_results_stay_under_the_size_budget(tmp_path):
    """The 388-row bench-results/dev run (old results format) renders under the stated budget."""
    page = render_report_html([ROOT / "bench-results" / "dev" / "results.json"], tmp_path / "dev.html",
                              planner=False)
    rows, _ = load_rows(ROOT / "bench-results" / "dev" / "results.json")
    size = page.stat().st_size
    log.info("bench-results/dev page: %d rows, %.0f KiB", len(rows), size / 1024)
    assert size <= PAGE_BUDGET_400_ROWS * max(len(rows), 400) / 400


def test_cli_combines_runs_and_labels_rows(small_run, tmp_path):
    second = tmp_path / "other-run"
    second.mkdir()
    shutil.copy(small_run["results"], second / "results.json")
    out = tmp_path / "combined.html"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "report", str(small_run["results"]),
                           str(second / "results.json"), str(ROOT / "bench-results" / "pruned-encoders" / "results.json"),
                           "--no-planner", "--out", str(out)], capture_output=True, text=True, env=env, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = _page_data(out)
    n = len(small_run["rows"])
    labels = [r["source"] for r in data["rows"]]
    assert labels.count("run") == n and labels.count("other-run") == n and labels.count("pruned-encoders") == 4
    assert data["planner"] is None

    missing = subprocess.run([sys.executable, "-m", "benchmarks", "report", str(tmp_path / "nope.json"),
                              "--out", str(out)], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert missing.returncode == 2
    assert "nope.json" in missing.stderr and "Traceback" not in missing.stderr


def test_skipped_configurations_are_grouped_by_reason():
    from benchmarks.pages.html.data import load_sources, skipped_groups

    groups = skipped_groups(load_sources([ROOT / "bench-results" / "dev" / "results.json"]))
    assert len(groups) == 1  # umap:96 and umap:48: the same reason once, counted twice
    assert groups[0]["count"] == 2 and set(groups[0]["configs"]) == {
        "umap:96 artifact (reducer_bytes is null)", "umap:48 artifact (reducer_bytes is null)"}


# --------------------------------------------------------------------------- in the browser
@pytest.fixture(scope="module")
def browser():
    if os.environ.get("SLIMVEC_SKIP_BROWSER") == "1":
        pytest.skip("SLIMVEC_SKIP_BROWSER=1: browser tests skipped on request")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"No Chromium at {CHROMIUM}: run scripts/setup.sh (installs Debian's chromium) or "
                    "`apt-get install chromium`; set SLIMVEC_SKIP_BROWSER=1 to skip these tests explicitly.")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Python package playwright missing: pip install -e '.[test]' (or SLIMVEC_SKIP_BROWSER=1).")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Opened:
    """A page loaded offline, with every console error, page error and request recorded."""

    def __init__(self, browser, path: Path) -> None:
        self.ctx = browser.new_context(viewport={"width": 1300, "height": 1000}, offline=True)
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.failed: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", lambda r: self.failed.append(r.url))
        url = path.resolve().as_uri()
        self.page.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
        start = time.perf_counter()
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=30000)
        self.load_s = time.perf_counter() - start
        self.url = url

    def marks(self, plot: str = "#plot-bytes") -> int:
        return self.page.eval_on_selector_all(f"{plot} .mark", "e => e.length")

    def close(self) -> None:
        self.ctx.close()


def _expected_marks(rows, x: str, y: str, keep=lambda r: True) -> int:
    def ok(v):
        return v is not None and not isinstance(v, bool)
    return sum(1 for r in rows if keep(r) and ok(r.get(x)) and r[x] > 0 and ok(r.get(y)))


def test_page_in_chromium_offline(small_run, browser, tmp_path):
    opened = Opened(browser, small_run["page"])
    try:
        page, rows = opened.page, small_run["rows"]
        log.info("report.html (%d rows, %.0f KiB) rendered in %.2f s", len(rows),
                 small_run["page"].stat().st_size / 1024, opened.load_s)
        assert opened.load_s < 10  # generous: the figure of record is the logged one
        assert opened.errors == []
        assert opened.failed == []
        assert opened.requests == [opened.url]  # the page itself, nothing else

        # one mark per configuration row that has both values
        # the default y-axis is the metric data.default_metric picks (issue 40); the checks below use task recall
        default = _page_data(small_run["page"])["default_metric"]
        assert page.eval_on_selector("#metric", "e => e.value") == default["key"]
        assert "chosen because " + default["reason"] in page.inner_text("#metric-why")
        page.select_option("#metric", "task_recall_at_k")
        want = _expected_marks(rows, "bytes_per_vector", "task_recall_at_k")
        assert want >= 7 and opened.marks("#plot-bytes") == want
        assert opened.marks("#plot-latency") == _expected_marks(rows, "latency_p50_ms", "task_recall_at_k")
        assert page.eval_on_selector("#plot-bytes path.front", "e => +e.dataset.front") >= 1
        page.select_option("#metric", "neighbor_recall_at_k")
        assert opened.marks() == _expected_marks(rows, "bytes_per_vector", "neighbor_recall_at_k")
        page.select_option("#metric", "task_recall_at_k")

        # the Pareto front's marks are labelled with their configuration
        front_labels = page.eval_on_selector_all("#plot-bytes text.mark-label", "ts => ts.map(t => t.textContent)")
        assert front_labels and all("→" in t for t in front_labels)

        # hovering a mark shows a short card (issue 27: not a 40-field dump over half the plot):
        # bytes, both recalls, p50 and the command that builds it
        page.eval_on_selector("#plot-bytes", "e => e.scrollIntoView({block: 'center'})")
        page.hover("#plot-bytes .marks .mark:last-child")  # drawn last: on top of any overlap
        tip = page.inner_text("#tooltip")
        assert "bytes/vec" in tip and "nbr R@10 / task R@10" in tip and "p50 ms" in tip
        assert "build it\tslimvec ingest" in tip or "not buildable" in tip
        assert page.eval_on_selector_all("#tooltip tr", "trs => trs.length") <= 6

        # a filter changes the count: only the pca family
        page.click("[data-filter='family'] .chip[data-value='pca'] .only")
        pca = _expected_marks(rows, "bytes_per_vector", "task_recall_at_k",
                              lambda r: str(r["reducer"]).startswith("pca:"))
        assert 0 < pca < want and opened.marks() == pca
        shown = page.eval_on_selector_all("#rows-table tbody tr", "e => e.length")
        assert shown == sum(1 for r in rows if str(r["reducer"]).startswith("pca:"))
        page.click("[data-filter='family'] .linkbtn")
        assert opened.marks() == want
        # the rescoring filter: drop ×4
        page.click("[data-filter='rescoring'] .chip[data-value='×4']")
        assert opened.marks() == _expected_marks(rows, "bytes_per_vector", "task_recall_at_k",
                                                 lambda r: not r.get("rescore"))
        page.click("[data-filter='rescoring'] .linkbtn")

        # the table: every row, full-dimension row marked, sortable
        assert page.eval_on_selector_all("#rows-table tbody tr", "e => e.length") == len(rows)
        assert page.eval_on_selector_all("#rows-table tbody tr.role-full", "e => e.length") == \
            sum(1 for r in rows if row_facets(r)["role"] == "full")
        page.click("#rows-table th[data-key='task_recall_at_k']")
        col = page.eval_on_selector_all(
            # (columns 7 and 8: the RAM and disk per vector that rescoring adds, issue 27)
            "#rows-table tbody tr", "trs => trs.map(tr => tr.children[11].textContent)")
        values = [float(v) for v in col if v != "—"]
        assert values and values == sorted(values, reverse=True)

        shot = tmp_path / "report-screenshot.png"
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(shot))
        log.info("screenshot of the page: %s", shot)
        assert shot.stat().st_size > 10000
    finally:
        opened.close()


def _planner_rows(page) -> list[dict]:
    return page.eval_on_selector_all(
        "#plan-table tbody tr",
        "trs => trs.map(tr => ({label: tr.dataset.label, ram: +tr.dataset.ram, disk: +tr.dataset.disk, "
        "meets: tr.dataset.meets === '1', ramText: tr.children[7].textContent, "
        "p50Text: tr.children[6].textContent}))")


@pytest.mark.parametrize("docs,min_quality,budget", [
    (2_000_000, "low", "1GiB"),
    (50_000_000, None, "20GiB"),
    (300_000, "low", None),
])
def test_planner_matches_make_plan(small_run, browser, docs, min_quality, budget):
    data = _page_data(small_run["page"])
    block = data["planner"]["dims"]["384"]
    models = {k: SizeModel.from_json(v) for k, v in block["models"].items()}
    rows = small_run["rows"]
    if min_quality == "low":  # the second-lowest quality: most fit, with different qualities
        qs = sorted({c["quality"]["task_recall_at_k"] for c in block["candidates"]
                     if c["quality"]["task_recall_at_k"] is not None})
        min_quality = qs[1]
    plan = make_plan(docs, 384, rows=rows, min_quality=min_quality, memory_budget=budget, models=models)

    opened = Opened(browser, small_run["page"])
    try:
        page = opened.page
        page.fill("#plan-docs", str(docs))
        page.fill("#plan-min", "" if min_quality is None else repr(min_quality))
        page.fill("#plan-budget", budget or "")
        got = _planner_rows(page)
        assert opened.errors == []
    finally:
        opened.close()
    assert [g["label"] for g in got] == [c.label for c in plan.candidates]
    assert [g["meets"] for g in got] == [c.meets_target for c in plan.candidates]
    assert any(g["meets"] for g in got) and not all(g["meets"] for g in got)
    fitting = [c for c in plan.candidates if c.meets_target]
    assert len({c.quality for c in fitting}) > 1 and len({c.ram_bytes for c in fitting}) > 1  # order matters
    for g, c in zip(got, plan.candidates):
        assert g["ram"] == pytest.approx(c.ram_bytes, rel=1e-12)
        assert g["disk"] == pytest.approx(c.disk_bytes, rel=1e-12)
        assert g["ramText"] == human_bytes(c.ram_bytes)
        # latency at the planned N says where it was measured (issue 27 item 2)
        if c.p50_ms is not None:
            assert f"at n = {c.p50_n:,}" in g["p50Text"]
            if c.p50_at_docs is None:
                assert "not extrapolated" in g["p50Text"]
            else:
                assert g["p50Text"].startswith(f"{c.p50_at_docs:.3f}")


def test_planner_of_a_vectors_run(small_run, browser, tmp_path, monkeypatch):
    """Issue 52: a ``--vectors`` run has no task metrics. The planner defaults to one it has,
    keeps the rescoring depth in its store column, reuses the size models ``slimvec plan``
    cached instead of refitting them, and says plainly what a metric that cannot tell the rows
    apart means (here none can: every neighbour recall is 1.0)."""
    from dataclasses import replace

    monkeypatch.setenv("SLIMVEC_CACHE", str(tmp_path / "cache"))
    rows, meta = load_rows(small_run["results"])
    rows = [replace(r, task_recall_at_k=None, task_mrr_at_k=None, sts_spearman=None,
                    neighbor_recall_at_k=1.0) for r in rows]
    results = write_results(rows, meta, tmp_path / "vectors-run")
    first = _page_data(render_report_html([results], tmp_path / "a.html", workdir=tmp_path))
    page_path = render_report_html([results], tmp_path / "b.html", workdir=tmp_path)
    data = _page_data(page_path)
    assert not any("reused" in n for n in first["planner"]["dims"]["384"]["notes"])
    assert any("reused from" in n for n in data["planner"]["dims"]["384"]["notes"]), \
        data["planner"]["dims"]["384"]["notes"]
    assert data["planner"]["default_metric"] == "neighbor_recall_at_k"
    opened = Opened(browser, page_path)
    try:
        page = opened.page
        assert page.eval_on_selector("#plan-metric", "e => e.value") == "neighbor_recall_at_k"
        page.fill("#plan-docs", "100000")
        page.fill("#plan-min", "0.5")
        stores = page.eval_on_selector_all("#plan-table tbody tr", "trs => trs.map(tr => tr.children[4].textContent)")
        assert "faiss:Flat +rescore×4" in stores, stores  # as docs/benchmarks write it
        assert page.eval_on_selector_all("#plan-table tbody tr.fits", "e => e.length") > 0
        notes = page.inner_text("#plan-notes")
        assert "neighbour recall@10 hardly tells these configurations apart (saturated:" in notes, notes
        assert "still ranked by it" in notes and "not used for ranking" not in notes, notes
        assert opened.errors == []
    finally:
        opened.close()


def test_page_model_is_what_slimvec_plan_fits(small_run, tmp_path):
    """A fresh `slimvec plan` (its own size builds) lands on the page's figures: same order, RAM
    within 1% (the builds are re-measured)."""
    data = _page_data(small_run["page"])
    block = data["planner"]["dims"]["384"]
    models = {k: SizeModel.from_json(v) for k, v in block["models"].items()}
    page_plan = make_plan(10_000_000, 384, rows=small_run["rows"], memory_budget="64GiB", models=models)
    fresh = make_plan(10_000_000, 384, rows=small_run["rows"], memory_budget="64GiB", workdir=tmp_path)
    assert [c.label for c in fresh.candidates] == [c.label for c in page_plan.candidates]
    for a, b in zip(fresh.candidates, page_plan.candidates):
        assert a.ram_bytes == pytest.approx(b.ram_bytes, rel=0.01)


def test_committed_results_render_in_chromium(browser, tmp_path):
    """The committed 388-row run (old results format) loads without errors, a mark per row."""
    path = ROOT / "bench-results" / "dev" / "results.json"
    page_path = render_report_html([path], tmp_path / "dev.html", planner=False)
    rows, _ = load_rows(path)
    opened = Opened(browser, page_path)
    try:
        log.info("bench-results/dev page (%d rows, %.0f KiB) rendered in %.2f s", len(rows),
                 page_path.stat().st_size / 1024, opened.load_s)
        assert opened.errors == [] and opened.failed == [] and opened.requests == [opened.url]
        assert opened.marks() == _expected_marks(rows, "bytes_per_vector", "task_recall_at_k")
        assert "No planner" in opened.page.inner_text("#planner-hint")
        assert not opened.page.is_visible("#plan-form")
        groups = opened.page.eval_on_selector_all("#notes-body details.skip-group", "e => e.length")
        assert groups == 1
    finally:
        opened.close()


def test_hostile_and_sparse_rows_render_as_text(browser, tmp_path):
    """Strings from a results file are data, never markup; rows missing most keys still render."""
    evil = "<!-- </script><script>window.__pwned = 1</script><img src=x onerror=window.__pwned=2>"
    rows = [{"reducer": "pca:8", "store": evil, "dataset": evil, "bytes_per_vector": 40.0,
             "task_recall_at_10": 0.9, "latency_p50_ms": 0.1},
            {"reducer": "none", "store": "hnsw", "bytes_per_vector": float("nan")},  # NaN -> null
            {"reducer": None}]
    results = tmp_path / "results.json"
    results.write_text(json.dumps(rows), encoding="utf-8")  # json writes NaN, as old runs could
    page_path = render_report_html([results], tmp_path / "r.html", planner=False)
    assert _page_data(page_path)["rows"][0]["store"] == evil
    opened = Opened(browser, page_path)
    try:
        page = opened.page
        assert opened.errors == [] and opened.requests == [opened.url]
        assert page.evaluate("window.__pwned === undefined")
        assert opened.marks() == 1
        assert evil in page.inner_text("#rows-table")
    finally:
        opened.close()


# --------------------------------------------------------------------------- template markers as data
#: the template's own markers, and a row field that runs script if it ever lands outside the JSON
MARKERS = ["__TITLE__", "/*__CSS__*/", "__DATA__", "/*__JS__*/"]
IMG = "<img src=x onerror=window.__pwned=1>"


def _marker_rows() -> list[dict]:
    rows = [{"reducer": "pca:8", "store": IMG, "dataset": "d", "bytes_per_vector": 40.0,
             "task_recall_at_10": 0.9, "latency_p50_ms": 0.1}]
    for i, m in enumerate(MARKERS):  # each marker as a whole field, and one with U+2028 / U+2029 in it
        rows.append({"reducer": f"rp:{8 + i}", "store": m, "dataset": m + "\u2028\u2029",
                     "bytes_per_vector": 20.0 + i, "task_recall_at_10": 0.5 + i / 10, "latency_p50_ms": 0.1})
    return rows


def test_markers_in_values_are_substituted_once(tmp_path):
    """Title, file name and row fields equal to the template's markers stay data: one pass, no
    re-scanning, the JSON block holds neither '<' nor a raw U+2028."""
    results = tmp_path / "__DATA__.json"
    results.write_text(json.dumps(_marker_rows()), encoding="utf-8")
    for title in ("__DATA__", None):  # None: the default title names the file stem, __DATA__
        text = render_report_html([results], tmp_path / "r.html", planner=False, title=title).read_text("utf-8")
        assert text.count("<script") == 2 and text.count("</script>") == 2
        assert text.count('"use strict"') == 1  # report.js once, not again inside the data
        want = "__DATA__" if title else "slimvec benchmark report: __DATA__"
        assert re.search(r"<h1>(.*?)</h1>", text, re.S).group(1) == want
        assert re.search(r"<title>(.*?)</title>", text, re.S).group(1) == want
        block = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S).group(1)
        assert "<" not in block and "\u2028" not in block and "\u2029" not in block
        data = json.loads(block)
        assert [r["store"] for r in data["rows"]] == [IMG] + MARKERS
        assert data["rows"][1]["dataset"] == MARKERS[0] + "\u2028\u2029"


def test_marker_names_render_as_text_in_chromium(browser, tmp_path):
    """`--title __DATA__`, a results file `__DATA__.json`, an `<img onerror>` field and a field
    `/*__JS__*/`: no script runs, every row renders, the title is literal text."""
    results = tmp_path / "__DATA__.json"
    rows = _marker_rows()
    results.write_text(json.dumps(rows), encoding="utf-8")
    for title in ("__DATA__", None):
        page_path = render_report_html([results], tmp_path / "m.html", planner=False, title=title)
        opened = Opened(browser, page_path)
        try:
            page = opened.page
            assert opened.errors == [] and opened.requests == [opened.url]
            assert page.evaluate("window.__pwned === undefined")
            want = "__DATA__" if title else "slimvec benchmark report: __DATA__"
            assert page.title() == want
            assert page.inner_text("h1") == want
            assert page.eval_on_selector_all("header h1 *", "e => e.length") == 0  # text, no elements
            assert page.eval_on_selector_all("#rows-table tbody tr", "e => e.length") == len(rows)
            table = page.inner_text("#rows-table")
            assert IMG in table and all(m in table for m in MARKERS)
            assert opened.marks() == len(rows)
        finally:
            opened.close()


# --------------------------------------------------------------------------- issue 40, item 8
#: the boxes of the plot's front labels, as the browser lays them out
LABEL_BOXES = ("ts => ts.map(t => { const b = t.getBoundingClientRect(); "
               "return [b.left, b.top, b.right, b.bottom, t.textContent]; })")


def test_default_axis_discriminates_and_front_labels_do_not_overlap(browser, tmp_path):
    """Task recall at 1.0 on all but one row is not the default y-axis (neighbour recall, which
    spreads, is, and the page says why); seven of eight front marks packed close get labels that do not
    print over each other; the header names the results file relative to the page."""
    rows = [{"reducer": f"pca:{8 + i}", "store": "faiss:Flat", "dataset": "d", "n_queries": 100,
             "bytes_per_vector": 40.0 + 0.5 * i, "task_recall_at_10": 1.0 if i else 0.98,
             "neighbor_recall_at_10": 0.50 + 0.004 * i, "latency_p50_ms": 0.1 + 0.002 * i} for i in range(7)]
    rows.append(dict(rows[-1], reducer="none", bytes_per_vector=1536.0, neighbor_recall_at_10=1.0, latency_p50_ms=2.0))
    run = tmp_path / "crowded"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"rows": rows, "meta": {}}), encoding="utf-8")
    page_path = render_report_html([run / "results.json"], tmp_path / "site" / "r.html", planner=False)
    assert str(tmp_path) not in page_path.read_text(encoding="utf-8")
    opened = Opened(browser, page_path)
    try:
        page = opened.page
        assert opened.errors == []
        assert page.eval_on_selector("#metric", "e => e.value") == "neighbor_recall_at_k"
        why = page.inner_text("#metric-why")
        assert why.startswith("y-axis: neighbour recall@10, chosen because") and "saturated: 7 of 8" in why
        assert "../crowded/results.json" in page.inner_text("#sources")
        for plot in ("#plot-bytes", "#plot-latency"):
            boxes = page.eval_on_selector_all(f"{plot} text.mark-label", LABEL_BOXES)
            assert boxes, f"{plot}: no front label"
            for j, a in enumerate(boxes):
                for b in boxes[j + 1:]:
                    overlap = a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
                    assert not overlap, f"{plot}: label {a[4]!r} {a[:4]} prints over {b[4]!r} {b[:4]}"
    finally:
        opened.close()
