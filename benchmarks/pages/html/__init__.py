"""``report.html``: the benchmark results as one self-contained, offline web page.

The page holds the rows of one or more ``results.json`` files as JSON, a hand-written SVG
renderer and a capacity planner, all inlined (no script, style, font or image is fetched; it
works from a file:// URL or behind a server). It shows:

- Pareto plots: a quality metric (neighbour recall@k, task recall@k at the runs' k, STS) against bytes per
  vector (log scale) and against p50 latency, one mark per configuration row, the front drawn,
  a tooltip with the full row, filters by reducer family, store, quantization and rescoring;
- the table of all rows, sortable and filterable, the full-dimension rows and the peer
  baselines marked;
- a capacity planner form (documents, encoder dimension, RAM budget, minimum quality, maximum
  p50) that evaluates the *same* fitted store size models as ``slimvec plan``
  (:func:`slimvec.planner.plan.make_plan`), exported into the page as data, so page and CLI
  print the same configurations and RAM / disk figures;
- reducer cost, cluster-routed retrieval, and the notes (skipped configurations grouped by
  reason, with counts).

Usage::

    from benchmarks.pages.html import render_report_html
    render_report_html(["out/results.json"], "out/report.html")

``slimvec report RESULTS.json [...] --out report.html`` is the command-line form, and
``slimvec bench --out DIR`` writes ``DIR/report.html`` next to ``report.md``.
"""

from benchmarks.pages.html.data import PageSource, build_page_data, load_sources, planner_data
from benchmarks.pages.html.page import render_html, render_report_html

__all__ = ["render_report_html", "render_html", "build_page_data", "planner_data", "load_sources",
           "PageSource"]
