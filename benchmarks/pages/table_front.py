"""Does the reducer earn its place? Reduce-first rows against full-dimension rows per RAM budget,
on equal footing (issue 28 item 1; ``python -m benchmarks table headline RESULTS...``).

For each results file and dataset, for each budget of measured serving RAM per vector, the best
row that *reduces first* (reducer other than ``none``) and the best row on the *full dimension*
(reducer ``none``: every peer and every full-dimension store, quantized or not), by neighbour
recall@10. A re-ranked row is only ever compared with re-ranked rows: one table per footing
(:func:`slimvec.planner.ranking.equal_footing`). Re-ranking from the full vectors on disk adds
the 16 B/vector id lookup to a row's RAM and nothing else (the vectors stay on disk).

The winner column says which side has the higher recall within the budget, "tie" within 0.002
(two queries in a thousand of recall@10 move it by 0.002 or less), and "—" when a side has no
row that fits. A second table per target recall (0.99, 0.95) gives, per budget, the fastest
re-ranked row of each side that reaches it: whether the reducer buys speed where it does not buy
recall.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slimvec.benchmarks.analysis import by_dataset, config_label, short_faiss
from slimvec.benchmarks.record import quiet_during
from slimvec.planner.ranking import RERANKED, equal_footing
from slimvec.planner.rows import Row, load_rows

__all__ = ["RAM_BUDGETS", "row_ram", "reducer_front", "speed_front", "render_headline", "TIE", "SPEED_TARGETS"]

#: serving-RAM budgets per vector (bytes) of the front
RAM_BUDGETS = (2048, 1024, 512, 384, 256, 192, 128, 96, 64)
#: recall targets of the speed tables
SPEED_TARGETS = (0.99, 0.95)
#: recall@10 differences at most this are a tie
TIE = 0.002
#: RAM per vector a re-ranked search adds: the full vectors' sorted id -> row lookup
RESCORE_LOOKUP_BYTES = 16


def row_ram(r: Row) -> float | None:
    """Serving RAM per vector: the store's measured RSS (``serve_rss_bytes``), plus the
    re-ranking id lookup when re-ranked from the full vectors on disk; None when not measured."""
    if not r.serve_rss_bytes or not r.n_corpus:
        return None
    # a recipe row's RSS is the whole index opened by slimvec.open: its lookup is in it already;
    # Qdrant and sentence-transformers peers re-rank from what they hold themselves
    own = r.kind == "recipe" or str(r.store).startswith(("qdrant", "st:"))
    extra = RESCORE_LOOKUP_BYTES if r.rescore and r.reranked and not own else 0
    return r.serve_rss_bytes / r.n_corpus + extra


def _best(rows: Sequence[Row], budget: float) -> Row | None:
    fits = [r for r in rows if (row_ram(r) or float("inf")) <= budget and r.neighbor_recall_at_k is not None]
    return max(fits, key=lambda r: (r.neighbor_recall_at_k, -(row_ram(r) or 0), -(r.latency_p50_ms or 0)),
               default=None)


def _fastest(rows: Sequence[Row], budget: float, target: float) -> Row | None:
    fits = [r for r in rows if (row_ram(r) or float("inf")) <= budget and r.latency_p50_ms
            and (r.neighbor_recall_at_k or 0) >= target]
    return min(fits, key=lambda r: (r.latency_p50_ms, row_ram(r) or 0), default=None)


def _label(r: Row) -> str:
    """The row's configuration without build-only options (``train_size=``) and the ``faiss:``
    prefix every FAISS factory string would repeat. A row built through the product (its store is
    the whole recipe) reads ``recipe RECIPE +rescore×R``."""
    label, store = config_label(r), r.store or ""
    if "|" in store:
        label = f"recipe {store}{label[label.index(store) + len(store):]}"
    return short_faiss(label).replace("|", "\\|")


def _cell(r: Row | None) -> list[str]:
    if r is None:
        return ["none fits", "–", "–"]
    return [_label(r), f"{r.neighbor_recall_at_k:.3f}",
            f"{row_ram(r):,.0f} B / {r.latency_p50_ms:.2f} ms" if r.latency_p50_ms else f"{row_ram(r):,.0f} B"]


def _winner(reduce: Row | None, full: Row | None) -> str:
    if reduce is None or full is None:
        return "—"
    diff = float(reduce.neighbor_recall_at_k or 0) - float(full.neighbor_recall_at_k or 0)
    if abs(diff) <= TIE + 1e-9:  # 0.995 - 0.993 is 0.0020000000000000018 in floats
        return "tie"
    return "**reduce first**" if diff > 0 else "**full dimension**"


def _speed_winner(reduce: Row | None, full: Row | None) -> str:
    if reduce is None or full is None:
        return "—" if reduce is None and full is None else ("**reduce first**" if full is None else "**full dimension**")
    faster = float(reduce.latency_p50_ms or 0) < float(full.latency_p50_ms or 0)
    return "**reduce first**" if faster else "**full dimension**"


def _budget_rows(picks: list[tuple[float, Row | None, Row | None]], winner: Any) -> list[str]:
    """One table row per run of budgets with the same two picks (``512–2,048`` when the budgets
    512, 1,024 and 2,048 pick the same rows): a repeated row says nothing new. Budgets where
    neither side fits are left out."""
    out: list[str] = []
    runs: list[list[tuple[float, Row | None, Row | None]]] = []
    for pick in (p for p in picks if p[1] is not None or p[2] is not None):
        if runs and runs[-1][-1][1] is pick[1] and runs[-1][-1][2] is pick[2]:
            runs[-1].append(pick)
        else:
            runs.append([pick])
    for run in runs:
        lo, hi = min(p[0] for p in run), max(p[0] for p in run)
        label = f"{hi:,}" if lo == hi else f"{lo:,}–{hi:,}"
        a, b = run[0][1], run[0][2]
        out.append(f"| {label} | " + " | ".join(_cell(a) + _cell(b)) + f" | {winner(a, b)} |")
    return out


def speed_front(rows: Sequence[Row], target: float, budgets: Sequence[float] = RAM_BUDGETS) -> list[str]:
    """Markdown table lines: per RAM budget, the fastest (p50) reduce-first row and the fastest
    full-dimension row whose recall reaches ``target`` (re-ranked rows only: the footing every
    row at such targets is on)."""
    group = equal_footing(rows).get(RERANKED, [])
    measured = [r for r in group if row_ram(r) is not None]
    reduce = [r for r in measured if (r.reducer or "none") != "none"]
    full = [r for r in measured if (r.reducer or "none") == "none"]
    if not reduce or not full:  # e.g. a run whose peers were not re-ranked: not equal footing
        return []
    lines = [f"| RAM ≤ B/vec | fastest reduce first ≥ {target} | nbr R@10 | RAM / p50 | fastest full "
             f"dimension ≥ {target} | nbr R@10 | RAM / p50 | faster |", "|---:|---|---:|---|---|---:|---|---|"]
    picks = [(budget, _fastest(reduce, budget, target), _fastest(full, budget, target)) for budget in budgets]
    lines += _budget_rows(picks, _speed_winner)
    return lines if len(lines) > 2 else []


def reducer_front(rows: Sequence[Row], budgets: Sequence[float] = RAM_BUDGETS) -> dict[str, list[str]]:
    """Markdown table lines per footing: per RAM budget, the best reduce-first row and the best
    full-dimension row (see the module docstring)."""
    out: dict[str, list[str]] = {}
    for footing, group in equal_footing(rows).items():
        measured = [r for r in group if row_ram(r) is not None]
        if not measured:
            continue
        reduce = [r for r in measured if (r.reducer or "none") != "none"]
        full = [r for r in measured if (r.reducer or "none") == "none"]
        if not reduce or not full:  # one side only: no comparison, and no winner to name
            out[footing] = [f"Only {'full-dimension' if full else 'reduce-first'} rows were measured "
                            f"{footing} in this run: nothing to compare on this footing."]
            continue
        lines = ["| RAM ≤ B/vec | reduce first | nbr R@10 | RAM / p50 | full dimension | nbr R@10 | "
                 "RAM / p50 | higher recall |", "|---:|---|---:|---|---|---:|---|---|"]
        picks = [(budget, _best(reduce, budget), _best(full, budget)) for budget in budgets]
        lines += _budget_rows(picks, _winner)
        out[footing] = lines
    return out


def _rel(path: Path, root: Path) -> str:
    res = path.resolve()
    return res.relative_to(root).as_posix() if res.is_relative_to(root) else str(path)


def _no_speed_table(rows: Sequence[Row], target: float) -> str:
    """Why a run has no speed table at ``target``: one side not re-ranked, or nothing reaches it."""
    ranked = [r for r in equal_footing(rows).get(RERANKED, []) if row_ram(r) is not None]
    sides = {(r.reducer or "none") == "none" for r in ranked}
    if len(sides) < 2:
        return ("No equal-footing speed table: this run re-ranked only "
                f"{'the full-dimension' if True in sides else 'the reduce-first'} rows." if sides
                else "No re-ranked rows with measured RAM in this run.")
    return f"No re-ranked row with measured RAM reaches recall@10 ≥ {target} in this run, on either side."


def render_headline(results: list[Path], root: Path) -> str:
    """The page (``docs/benchmarks/headline.md``): one section per results file and dataset, one
    table per footing. Only the table of the fastest rows at recall@10 >= 0.99 stands outside
    ``<!-- details -->`` blocks, so BENCHMARKS.md carries that one and the page every table."""
    intro = (f"Generated by `python -m benchmarks table headline {' '.join(_rel(p, root) for p in results)}`; "
             "nothing typed by hand. RAM is the measured serving RSS per vector of a fresh process "
             "that opened the store and answered the queries, plus 16 B/vector for rows re-ranked "
             "from the full vectors on disk (their id lookup; the vectors stay memory-mapped on disk). "
             "Neighbour recall@10 against exact search over the full vectors. Re-ranked rows are "
             "compared only with re-ranked rows. p50 is one thread, single queries. FAISS factory "
             "strings are shown without `faiss:` and `train_size=`. Every table is on "
             "[the full page](../../docs/benchmarks/headline.md).")
    lines = ["## Does the reducer earn its place? Reduce first against the full dimension, on equal footing "
             "(issue 28)", "", *textwrap.wrap(intro, 100, break_long_words=False, break_on_hyphens=False), ""]
    for path in results:
        rows, meta = load_rows(path)
        machine: dict[str, Any] = meta.get("machine") or {}
        quiet, others = quiet_during(machine), machine.get("others_cores")
        link = f"../../{_rel(path, root)}"
        for name, group in by_dataset(rows).items():
            n = group[0].n_corpus if group else 0
            lines += [f"### {name} ({n:,} vectors)", "",
                      f"From [`{_rel(path, root)}`]({link}) (`{meta.get('command', '')}`)"
                      + ("; the run recorded no machine load: take its latencies as rough (its page says "
                         "how loaded it was), recall and RAM do not depend on load" if quiet is None
                         else f"; quiet machine (other processes used {others} of a core)" if quiet
                         else "; **not a quiet machine**: latencies are "
                         "rough, recall and RAM are not affected") + ".", ""]
            usable = [r for r in group if r.kind != "routed"]
            fast = speed_front(usable, SPEED_TARGETS[0])
            lines += ([f"Fastest at recall@10 ≥ {SPEED_TARGETS[0]} per RAM budget (re-ranked):", "", *fast, ""]
                      if fast else [_no_speed_table(usable, SPEED_TARGETS[0]), ""])
            lines += ["<!-- details -->", ""]
            for footing, table in reducer_front(usable).items():
                lines += [f"#### Best recall per RAM budget, {footing}", "", *table, ""]
            for target in SPEED_TARGETS[1:]:
                table = speed_front(usable, target)
                if table:
                    lines += [f"#### Fastest at recall@10 ≥ {target} per RAM budget (re-ranked)", "", *table, ""]
            lines += ["<!-- /details -->", ""]
    return "\n".join(lines)
