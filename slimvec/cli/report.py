"""``slimvec report``: render ``report.html`` from existing ``results.json`` files."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

__all__ = ["report"]


def report(
    results: list[Path] = typer.Argument(..., help="results.json file(s) of `slimvec bench`; several are combined, each row labelled with its run."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
    planner: bool = typer.Option(True, "--planner/--no-planner", help="Fit the store size models for the page's capacity planner (real builds at 1,000 and 2,000 vectors per store, as `slimvec plan` does)."),
    title: str | None = typer.Option(None, "--title", help="Page title (default: the run labels)."),
) -> None:
    """Render one self-contained, offline report.html (Pareto plots, table, capacity planner).

    Every script and style is inlined: open the file in a browser, no network needed.
    """
    from slimvec.benchmarks.html import render_report_html

    err = Console(stderr=True)
    if planner:
        err.print("fitting store size models for the planner (real builds at 1,000 and 2,000 vectors) ...")
    path = render_report_html(results, out, planner=planner, title=title)
    size = path.stat().st_size
    err.print(f"wrote {path} ({size / 1024:.0f} KiB)")
