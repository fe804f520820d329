"""Assemble ``report.html``: the page template, its inlined style and script, and the data as JSON.

The script and style are files (``report.js``, ``report.css`` beside this module), read
and inlined into one HTML file; nothing on the page refers to another file or a network address.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.pages.html.data import build_page_data, load_sources
from slimvec.errors import PersistenceError

__all__ = ["render_html", "render_report_html"]

log = logging.getLogger(__name__)


def _asset(name: str) -> str:
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


def _clean(value: Any) -> Any:
    """NaN / infinity -> None (JSON has no NaN), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


#: what would let JSON end, open or confuse the ``<script type="application/json">`` element it sits
#: in (``</script>``, ``<!--`` and ``<script`` need ``<``; ``>`` and ``&`` for good measure), or break
#: a reader that takes it for JavaScript (U+2028 / U+2029): each as its JSON ``\\uXXXX`` escape,
#: which ``JSON.parse`` reads back to the same string
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029]")

#: the template's markers; substituted in one pass (:func:`render_html`)
_MARKERS = re.compile(r"__TITLE__|/\*__CSS__\*/|__DATA__|/\*__JS__\*/")


#: an absolute path in a string: ``/`` not after a word character, ``.``, ``:`` or ``/`` (so not
#: ``http://``), then path characters
_ABS_PATH = re.compile(r"(?<![\w.:/])/[^\s:;,'\"()<>]+")


def _relative(value: Any, base: Path) -> Any:
    """Every absolute path in the strings of ``value`` made relative to ``base`` (the report's
    folder), recursively: the page names files as seen from where it lies, never the machine's
    /tmp/... or /root/... (issue 40)."""
    if isinstance(value, str):
        def rel(m: re.Match[str]) -> str:
            try:
                return os.path.relpath(m.group(0), base)
            except ValueError:  # another drive (Windows)
                return Path(m.group(0)).name
        return _ABS_PATH.sub(rel, value)
    if isinstance(value, dict):
        return {k: _relative(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative(v, base) for v in value]
    return value


def _json_for_script(data: dict[str, Any]) -> str:
    text = json.dumps(_clean(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SCRIPT_UNSAFE.sub(lambda m: _SCRIPT_ESCAPES[m.group(0)], text)


def render_html(data: dict[str, Any], title: str = "slimvec benchmark report") -> str:
    """The page for ``data`` (:func:`~benchmarks.pages.html.data.build_page_data`) as one string.

    Every marker of the template is replaced in one regex pass: a replacement is never scanned
    again, so a title, file name or row field that spells a marker (``__DATA__``, ``/*__JS__*/``)
    stays text. Each value is escaped for where it goes: the title as HTML text, the data as JSON
    inside ``<script>`` (no ``<``, ``>``, ``&``, U+2028 or U+2029 left raw).
    """
    values = {"__TITLE__": html.escape(title), "/*__CSS__*/": _asset("report.css"),
              "__DATA__": _json_for_script(data), "/*__JS__*/": _asset("report.js")}
    return _MARKERS.sub(lambda m: values[m.group(0)], _asset("template.html"))


def render_report_html(results_paths: str | Path | Sequence[str | Path], out_path: str | Path, *,
                       planner: bool = True, title: str | None = None,
                       workdir: str | Path | None = None, run_started: float | None = None) -> Path:
    """Render one self-contained ``report.html`` from one or more ``results.json`` files.

    Rows of several files (different runs, encoders or datasets) are combined; each row is
    labelled with its source run. This is the function behind ``slimvec report`` and the page
    ``slimvec bench --out DIR`` writes; the indexing service serves its output under
    ``/reports/``.

    Parameters
    ----------
    results_paths : path or list of paths
        ``results.json`` files written by ``slimvec bench`` (old and new formats).
    out_path : path
        The HTML file to write (its folder is created; written atomically).
    planner : bool
        Fit the store size models for the capacity planner (as ``slimvec plan`` does: real builds
        at 1,000 and 2,000 vectors per store spec, a few seconds each). ``False``: no planner.
    title : str, optional
        Page title (default: "slimvec benchmark report" and the run labels).
    workdir : path, optional
        Parent of the temporary size builds.
    run_started : float, optional
        ``time.time()`` when the run writing this page began (``slimvec bench``): the page's wall
        time of the (single) run is then counted up to its data, size builds included.

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    PersistenceError
        A results file is missing or unreadable, or the page cannot be written.
    ConfigError
        A results file does not hold rows.
    """
    paths = [results_paths] if isinstance(results_paths, (str, Path)) else list(results_paths)
    started = time.perf_counter()
    sources = load_sources(paths)
    data = build_page_data(sources, planner=planner, workdir=workdir)
    if run_started is not None and len(data["sources"]) == 1:
        data["sources"][0]["wall_s"] = round(time.time() - run_started, 1)
    out = Path(out_path)
    base = out.resolve().parent
    for src in data["sources"]:  # the header: files as seen from the report's folder
        src["path"] = os.path.relpath(Path(src["path"]).resolve(), base) if src.get("path") else src.get("path")
    data["sources"], data["skipped"] = _relative(data["sources"], base), _relative(data["skipped"], base)
    page_title = title or "slimvec benchmark report: " + ", ".join(s.label for s in sources)
    text = render_html(data, page_title)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as exc:
        raise PersistenceError(f"Could not write the HTML report {out}: {exc}.") from exc
    log.info("wrote %s (%d rows from %d file(s), %.0f KiB, %.1fs)", out, len(data["rows"]), len(sources),
             len(text.encode("utf-8")) / 1024, time.perf_counter() - started)
    return out
