"""Assemble BENCHMARKS.md from the measured pages in docs/benchmarks/ (no figure is typed here).

Each page holds its own command and tables, written by the run that measured it. BENCHMARKS.md
is the reader's version: the one-page answers, then each page without its detail blocks, plus
tables generated from the runs' ``results.json``, each with a link to the full page and to the
generated report in ``bench-results/``. Markers in a page:

- ``<!-- details -->`` ... ``<!-- /details -->``: only on the full page, left out of BENCHMARKS.md;
- ``<!-- front: bench-results/RUN/results.json METRIC [DATASET-PREFIX] -->``: the Pareto front of
  METRIC (``neighbor_recall_at_k``, ``task_recall_at_k``...) against bytes per vector, generated
  from the rows (in both the page's BENCHMARKS.md copy and nowhere else);
- ``<!-- budgets: bench-results/RUN/results.json METRIC [DATASET-PREFIX] -->``: the best row per
  bytes/vector budget, generated the same way.

The result is checked: at most MAX_LINES lines, none longer than MAX_WIDTH characters.

Usage: python scripts/assemble_benchmarks.py   (writes BENCHMARKS.md at the repository root)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from slimvec.benchmarks.analysis import best_per_budget, budget_ladder, by_dataset, config_label, format_value, pareto_front  # noqa: E402
from slimvec.benchmarks.report import reranked_cell  # noqa: E402
from slimvec.planner.ranking import equal_footing  # noqa: E402
from slimvec.planner.rows import load_rows, metric_title  # noqa: E402

PAGES = ["summary.md", "headline.md", "harness.md", "reducers.md", "learned.md", "rescore.md", "pruning.md",
         "ingest.md", "sizing.md", "services-and-scale.md"]
MARKER = re.compile(r"^<!-- (front|budgets): (\S+) (\S+)(?: (\S+))? -->$")
MAX_LINES, MAX_WIDTH = 540, 300  # 480: generated tables per footing (issue 28); +10: lifecycle rows (issues 25, 26); +50: the equal-footing headline and the quiet ingest table (issue 28)


def _generated(kind: str, results: str, metric: str, prefix: str | None) -> list[str]:
    path = ROOT / results
    rows, meta = load_rows(path)
    out: list[str] = []
    report = Path(results).with_name("report.md").as_posix()
    for name, rows_of_dataset in by_dataset(rows).items():
        if prefix and not name.startswith(prefix):
            continue
        # rows on equal footing only (issue 28): re-ranked rows are never ranked against rows that
        # were not re-ranked; each table says which footing it is
        for footing, group in equal_footing(rows_of_dataset).items():
            k = group[0].k
            title = metric_title(metric, k)
            head = (f"*{name}*, {footing} rows ({len(group)} rows; generated from [`{results}`]({results}), "
                    f"report: [`{report}`]({report}))")
            if kind == "front":
                body = [[config_label(r), reranked_cell(r), format_value(r.bytes_per_vector, 1),
                         format_value(r.get(metric), 3), format_value(r.latency_p50_ms, 3)]
                        for r in pareto_front(group, "bytes_per_vector", metric)]
                header = ["Pareto front: configuration", "re-ranked", "bytes/vec", title, "p50 ms"]
            else:
                picks = [(b, r) for b, r in best_per_budget(group, budget_ladder(group), metric) if r is not None]
                # a budget whose best row is the same as the next smaller budget's adds nothing
                picks = [(b, r) for i, (b, r) in enumerate(picks) if i == 0 or r is not picks[i - 1][1]]
                body = [[format_value(b, 0), config_label(r), reranked_cell(r), format_value(r.bytes_per_vector, 1),
                         format_value(r.get(metric), 3), format_value(r.latency_p50_ms, 3)] for b, r in picks]
                header = ["budget ≤ B/vec", "best configuration", "re-ranked", "bytes/vec", title, "p50 ms"]
            out += [head, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body] + [""]
    return out


def page_lines(name: str) -> list[str]:
    """One page as it appears in BENCHMARKS.md."""
    page = ROOT / "docs" / "benchmarks" / name
    out: list[str] = []
    hidden = False
    for line in page.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped == "<!-- details -->":
            if hidden:
                raise SystemExit(f"{page}: nested <!-- details --> (close the previous block first)")
            hidden = True
            continue
        if stripped == "<!-- /details -->":
            if not hidden:
                raise SystemExit(f"{page}: <!-- /details --> without an opening <!-- details -->")
            hidden = False
            continue
        if hidden or stripped.startswith("<!-- hand-written notes below"):  # the page's own seam
            continue
        m = MARKER.match(stripped)
        # links relative to the page (docs/benchmarks/) become relative to the repository root
        out += _generated(*m.groups()) if m else [line.replace("](../../", "](")]
    if hidden:
        raise SystemExit(f"{page}: <!-- details --> never closed")
    while out and not out[-1].strip():
        out.pop()
    if name != "summary.md":
        out += ["", f"Full page with every table: [`docs/benchmarks/{name}`](docs/benchmarks/{name})."]
    return out


def main() -> None:
    lines = ["# slimvec benchmarks", "",
             "Every figure below was measured on this project's machine (2 shared cores, no GPU) by the",
             "command printed next to it (`slimvec bench --suite benchmarks/suites/*.toml`, pytest, or one of",
             "the few `scripts/bench_*.py` that measure what the harness cannot). Assembled by",
             "`python scripts/assemble_benchmarks.py` from `docs/benchmarks/`; tables marked *generated* are",
             "computed from the runs' `results.json`; every row is in the linked `bench-results/` reports.", ""]
    for name in PAGES:
        if not (ROOT / "docs" / "benchmarks" / name).is_file():
            lines += [f"<!-- {name}: not measured yet -->", ""]
            continue
        lines += page_lines(name) + [""]
    lines = [line for i, line in enumerate(lines)
             if line.strip() or i == 0 or lines[i - 1].strip()]  # no runs of blank lines
    too_wide = [(i + 1, len(line)) for i, line in enumerate(lines) if len(line) > MAX_WIDTH]
    if too_wide:
        raise SystemExit(f"BENCHMARKS.md lines over {MAX_WIDTH} characters (line, width): {too_wide[:10]}")
    if len(lines) > MAX_LINES:
        raise SystemExit(f"BENCHMARKS.md would have {len(lines)} lines (at most {MAX_LINES}): move more "
                         "of the pages into <!-- details --> blocks.")
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    print(f"BENCHMARKS.md: {len(lines)} lines")


if __name__ == "__main__":
    main()
