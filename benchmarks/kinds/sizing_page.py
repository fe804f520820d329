"""Store size models: fitted constants and prediction errors (``python -m benchmarks sizing``).

For every store spec, builds the real store at 1,000 and 2,000 random unit vectors of 64 and 384
dimensions, fits the per-component constants of :mod:`slimvec.planner.sizing`, then builds it
again at sizes it was NOT fitted on and records predicted against measured allocated bytes. One
more model per store is fitted with a 120-byte JSON text payload per document and checked the
same way. Optionally (``ram``) the model's RAM is compared with the RSS growth of a fresh process.
The page docs/benchmarks/sizing.md is :func:`sizing_markdown` of the result, re-rendered from the
record by ``python -m benchmarks table sizing`` (:func:`sizing_record`).
"""

from __future__ import annotations

import json
import logging
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slimvec.benchmarks.report import human_bytes

__all__ = ["SIZING_STORES", "SIZING_COMMAND", "measure_sizing", "sizing_markdown", "sizing_record", "worst_line",
           "wrap_prose"]

log = logging.getLogger(__name__)

SIZING_STORES = ("hnsw:threads=1", "faiss:HNSW32", "faiss:Flat", "faiss:SQ8",
                 "faiss:IVF64,PQ16x4,train_size=100000", "qdrant-edge", "qdrant-edge:quant=sq8")
SIZES, DIMS, PAYLOAD = (1000, 2000), (64, 384), 120
#: the page's command (a file of models only, written before the records, does not carry one)
SIZING_COMMAND = ("OMP_NUM_THREADS=1 python -m benchmarks sizing --markdown docs/benchmarks/sizing.md "
                  "--out docs/benchmarks/sizing.json")


def _constants(model: Any) -> list[str]:
    lines = []
    for comp, fit in sorted(model.components.items()):
        terms = [f"{v:,.2f}·{k}" for k, v in fit.__dict__.items() if abs(v) > 1e-6]
        resident = " (RAM)" if comp in model.resident else ""
        lines.append(f"| `{model.spec}` | {comp}{resident} | {', '.join(terms) or '0'} |")
    return lines


def _predictions(model: Any) -> list[str]:
    return [f"| `{model.spec}` | {d} | {human_bytes(model.disk_bytes(1e6, d))} | {human_bytes(model.ram_bytes(1e6, d))} |"
            for d in (384, 96)]


def _ram_rows(spec: str, model: Any, sizes: Sequence[int], dim: int = 384) -> list[str]:
    """Model RAM against measured RSS growth of a fresh process that opens the store and searches."""
    from slimvec.planner.sizing import measure_resident

    rows, points = [], []
    for n in sizes:
        r = measure_resident(spec, n, dim)
        wal = r["mapped"].get("wal", 0)
        served = r["rss_delta"] - wal
        predicted = model.ram_bytes(n, dim)
        points.append((n, served, predicted))
        rows.append(f"| `{spec}` | {n:,} | {human_bytes(predicted)} | {human_bytes(r['rss_delta'])} | "
                    f"{human_bytes(wal)} | {human_bytes(served)} | {(predicted - served) / served:+.1%} | |")
    (n0, s0, p0), (n1, s1, p1) = points[0], points[-1]
    measured_slope, model_slope = (s1 - s0) / (n1 - n0), (p1 - p0) / (n1 - n0)
    rows.append(f"| `{spec}` | per vector | {model_slope:,.0f} B | | | {measured_slope:,.0f} B | "
                f"{(model_slope - measured_slope) / measured_slope:+.1%} | {human_bytes(s0 - measured_slope * n0)} |")
    return rows


def worst_line(checks_md: list[str]) -> str:
    """One sentence with the largest held-out disk error of the check table rows."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in checks_md]
    worst = max(rows, key=lambda r: abs(float(r[-1].rstrip("%"))))
    return (f"Largest disk error at a size not fitted on: {worst[-1]} ({worst[0]}, n = {worst[2]}, d = {worst[3]}; "
            f"{len(rows)} checks, every one on the full page).")


def wrap_prose(lines: list[str], width: int = 100) -> list[str]:
    """Wrap prose lines at ``width`` (list items indented); tables, code and headings as they are."""
    out: list[str] = []
    in_code = False
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        if in_code or line.startswith(("|", "#", "<!--", "```")) or len(line) <= width:
            out.append(line)
        elif line.startswith("- "):
            out += textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)
        else:
            out += textwrap.wrap(line, width, break_on_hyphens=False)
    return out


def _one_store(spec: str, pay: int, big: int, ram_sizes: Sequence[int] | None,
               sizes: Sequence[int], dims: Sequence[int], tables: dict[str, list[str]]) -> dict[str, Any]:
    from slimvec.planner.sizing import calibrate, check_model

    t0 = time.perf_counter()
    model, measured = calibrate(spec, tuple(sizes), tuple(dims), (pay,))
    fit_s = time.perf_counter() - t0
    held_out = [(2 * max(sizes), 192), (big, 384)] if pay == 0 else [(2 * max(sizes), 192)]
    for n, d in held_out:
        k = check_model(model, n, d, pay)
        tables["checks"].append(f"| `{spec}` | {pay} | {n:,} | {d} | {human_bytes(k.predicted)} | "
                                f"{human_bytes(k.measured)} | {k.error:+.2%} |")
        log.info("%s payload=%d n=%d d=%d: error %+.2f%%", spec, pay, n, d, 100 * k.error)
    if pay == 0:
        if ram_sizes:
            tables["ram"] += _ram_rows(spec, model, ram_sizes)
        tables["constants"] += _constants(model)
        tables["predictions"] += _predictions(model)
    return {"model": model.to_json(), "calibration_s": round(fit_s, 2), "measured": [m.__dict__ for m in measured]}


def measure_sizing(stores: Sequence[str] = SIZING_STORES, big: int = 20000,
                   ram_sizes: Sequence[int] | None = (5000, 20000), sizes: Sequence[int] = SIZES,
                   dims: Sequence[int] = DIMS, payload: int = PAYLOAD) -> dict[str, Any]:
    """Fit and check every store's size model.

    Returns
    -------
    dict
        ``{"sizes", "dims", "payload", "models": {"SPEC payload=P": {model, calibration_s,
        measured}}, "tables": {"checks", "constants", "predictions", "ram": [Markdown rows]}}``.
        The held-out sizes are ``2 * max(sizes)`` at 192-d and ``big`` at 384-d.
    """
    tables: dict[str, list[str]] = {"checks": [], "constants": [], "predictions": [], "ram": []}
    models = {f"{spec} payload={pay}": _one_store(spec, pay, big, ram_sizes, sizes, dims, tables)
              for spec in stores for pay in (0, payload)}
    return {"sizes": list(sizes), "dims": list(dims), "payload": payload, "models": models, "tables": tables}


def sizing_record(path: Path) -> tuple[dict[str, Any], str]:
    """A ``python -m benchmarks sizing --out`` record's result and command. A file of models only
    (written before the records, without the held-out checks and RAM rows) gets the constants and
    predictions of its models."""
    from slimvec.benchmarks.record import load_record
    from slimvec.planner.sizing import SizeModel

    result = load_record(path)
    if "models" in result:
        return result, "OMP_NUM_THREADS=1 " + json.loads(path.read_text(encoding="utf-8"))["command"]
    models = [SizeModel.from_json(e["model"]) for key, e in result.items() if key.endswith(" payload=0")]
    fitted = models[0].fitted_on
    tables = {"checks": [], "ram": [], "constants": [line for m in models for line in _constants(m)],
              "predictions": [line for m in models for line in _predictions(m)]}
    return {"sizes": sorted({n for n, _, _ in fitted}), "dims": sorted({d for _, d, _ in fitted}), "tables": tables,
            "payload": max(int(key.rsplit("=", 1)[1]) for key in result), "models": result}, SIZING_COMMAND


def sizing_markdown(result: dict[str, Any], command: str, record: str | None = None) -> str:
    """docs/benchmarks/sizing.md from :func:`measure_sizing`'s result and the command that ran it;
    ``record``: where the run's record is (the page says how to re-render it from there)."""
    from benchmarks.pages.sizing_text import limits_lines, ram_intro, reading_lines
    from slimvec.connectors import store_class

    t = result["tables"]
    names = dict.fromkeys(key.split(":")[0].split()[0] for key in result["models"])  # the stores measured
    resident = {name: sorted(store_class(name).resident_components) for name in names}
    sizes = ", ".join(f"{s:,}" for s in result["sizes"])
    dims = ", ".join(map(str, result["dims"]))
    short = f"{'/'.join(f'{s // 1000}k' if s % 1000 == 0 else str(s) for s in result['sizes'])} vectors × d {'/'.join(map(str, result['dims']))}"
    checks = ["| store | payload B | n | d | predicted | measured | error |", "|---|---|---|---|---|---|---|",
              *t["checks"], ""] if t["checks"] else []
    md = [
        "## Store size models (`slimvec plan`)", "",
        f"Allocated bytes of each store, fitted per component on real builds ({short}) and checked at "
        "sizes not fitted on.", "<!-- details -->",
        "Allocated bytes (`st_blocks × 512`) of each store after `finalize` + `flush`, split by "
        "component; each component fitted as `fixed + fixed_per_dim·d + n·(per_vector + per_dim·d "
        f"+ per_payload_byte·p)` by non-negative least squares on real builds at n ∈ {{{sizes}}} × "
        f"d ∈ {{{dims}}} (random unit vectors), then checked at sizes it was not fitted on. Payload rows "
        f"store a {result['payload']}-byte JSON text payload per document (real STS-B sentences) and fit "
        "at that payload size." + (f" Generated by `python -m benchmarks table sizing {record}` from the "
                                   "run's record; nothing typed by hand." if record else ""), "<!-- /details -->", "",
        "Command:", "", "```", command, "```", "",
        *(["### Prediction error at sizes not fitted on", "", worst_line(t["checks"]), ""] if checks else []),
        "<!-- details -->", *checks,
        "### Fitted constants (bytes; no payload)", "",
        "Components marked (RAM) are what the engine holds in memory while serving; RAM predictions "
        "add FAISS's Python id map (measured with tracemalloc). RAM is a model, not a measured RSS.", "",
        "| store | component | constants |", "|---|---|---|", *t["constants"], "",
        "<!-- /details -->", "",
        "### What the models predict at 1,000,000 vectors (no payload)", "",
        "| store | d | disk | RAM |", "|---|---|---|---|", *t["predictions"], "",
        "<!-- details -->",
        f"Resident components per store: {json.dumps(resident)}.", "",
        "<!-- /details -->", "",
        "<!-- details -->", *(["### RAM: model against measured memory", "", ram_intro(), "",
                               "| store | n | model RAM | RSS growth | WAL pages | served | model error | fixed |",
                               "|---|---|---|---|---|---|---|---|", *t["ram"], ""] if t["ram"] else []),
        *reading_lines(), *limits_lines(),
        "`slimvec plan` fits the same models for the stores and dimensions it considers on every "
        "run (a few seconds) and prints the error at a held-out size with its plan.", "",
    ]
    return "\n".join(wrap_prose(md))
