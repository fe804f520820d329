"""``slimvec tune``: search reducer × store × rescoring depth on a sample of your data and write
the winning recipe (``tuned.json``, :mod:`slimvec.recipe`; see docs/recipes.md)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from slimvec.cli.checks import byte_size, int_range, number_range
from slimvec.errors import ConfigError

__all__ = ["tune"]

_SEARCH_MODES = ("halving", "exhaustive", "auto")


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


def _search_choice(value: str) -> str:
    """``--search`` is one of halving, exhaustive, auto (checked before the vectors are read)."""
    if value not in _SEARCH_MODES:
        raise ConfigError(f"--search must be one of {', '.join(_SEARCH_MODES)}, got {value!r}.")
    return value


def tune(
    docs: int = typer.Option(..., "--docs", callback=int_range(1), help="Corpus size to plan for (RAM and disk are predicted at this N)."),
    vectors: Path | None = typer.Option(None, "--vectors", help="A sample of your vectors: .npy or Parquet."),
    pairs: list[Path] = typer.Option([], "--pairs", help="Pairs TSV whose sentences are encoded with MiniLM (repeatable)."),
    ram_budget: str | None = typer.Option(None, "--ram-budget", callback=byte_size, help="RAM the searchable index may use at --docs (2GiB, 512MiB)."),
    min_recall: float | None = typer.Option(None, "--min-recall", callback=number_range(0, 1), help="Neighbour recall@10 floor (e.g. 0.99)."),
    max_p50_ms: float | None = typer.Option(None, "--max-p50-ms", callback=number_range(0, low_open=True), help="Single-query p50 ceiling at --docs (ms): each candidate's p50 on the samples is carried to --docs by its store's growth (a scan linearly, a graph along ln N) [default: 50]."),
    out: Path = typer.Option(Path("tuned.json"), "--out", help="Where the winning recipe is written."),
    sample: int = typer.Option(32000, "--sample", callback=int_range(1), help="Largest rung of the successive halving (vectors)."),
    queries: int = typer.Option(200, "--queries", callback=int_range(1), help="Held-out sample queries."),
    seed: int = typer.Option(0, "--seed", callback=int_range(0), help="Seed of the query / sample split."),
    reducer: list[str] = typer.Option([], "--reducer", help="Reducer spec to consider (repeatable) [default: none and pca at dim/2, /4, /8]."),
    store: list[str] = typer.Option([], "--store", help="Store spec to consider (repeatable) [default: hnsw, faiss:HNSW32, faiss:HNSW32,SQ8, faiss:RaBitQ]."),
    top: int = typer.Option(10, "--top", callback=int_range(1), help="Runner-up rows shown."),
    search: str = typer.Option("auto", "--search", callback=_search_choice, help="halving: successive halving over builds on samples of 1/16, 1/4 and all of --sample; exhaustive: every candidate on the whole sample; auto: exhaustive when most builds within the budget train a quantizer (IVF/PQ: training costs the same at every rung), else halving."),
    payload_index: list[str] = typer.Option([], "--payload-index", help="FIELD:keyword|integer|float|bool|datetime (repeatable), as ingest takes them: their RAM and disk at --docs are added (slimvec plan's model)."),
    table_out: Path | None = typer.Option(None, "--table", help="Also write every candidate's row (JSON list) here."),
) -> None:
    """Choose reducer × store × rescoring depth for your budget (successive halving on a sample)."""
    import numpy as np

    from slimvec.buildspec import parse_payload_indexes as payload_indexes
    from slimvec.planner.plan import parse_bytes
    from slimvec.planner.tune import default_grid, ranking_rule
    from slimvec.planner.tune import tune as run_tune
    from slimvec.recipe import save_recipe

    if (vectors is None) == (not pairs):
        raise ConfigError("Give either --vectors FILE or --pairs FILE.tsv (the data to tune on).")
    if vectors is not None:
        from slimvec.benchmarks.datasets import load_vector_file

        _, X = load_vector_file(vectors)
    else:
        from slimvec.benchmarks.encoding_cache import EncodingCache, default_cache_dir
        from slimvec.benchmarks.pairs import load_pairs
        from slimvec.encoder import Encoder

        seen: dict[str, None] = {}
        for path in pairs:
            f = load_pairs(path)
            for a, b in zip(f.s1, f.s2):
                seen.setdefault(a)
                seen.setdefault(b)
        enc = Encoder()
        X = EncodingCache(default_cache_dir(), enc.fingerprint).encode(enc, list(seen))
    rungs = sorted({max(sample // 16, 500), max(sample // 4, 1000), sample})
    console = Console(stderr=True)
    budget = parse_bytes(ram_budget) if ram_budget else None
    console.print(f"ranking: {ranking_rule(min_recall, max_p50_ms, budget)}", markup=False, highlight=False)
    result = run_tune(np.asarray(X), docs=docs, ram_budget=budget,
                      min_recall=min_recall, max_p50_ms=max_p50_ms, rungs=rungs, n_queries=queries,
                      seed=seed, grid=default_grid(int(np.asarray(X).shape[1]), reducer, store), progress=lambda text: console.print(text),
                      search=search, payload_index=payload_indexes(payload_index))
    table = Table(title=f"candidates at {docs:,} documents, best first by: {result.rule}")
    for col in ("recipe", "recall@10", "p50 ms", f"p50 ms at {docs:,}", "RAM", "disk", "sample", "meets"):
        table.add_column(col, overflow="fold")
    for c in result.candidates[:top]:
        table.add_row(str(c.recipe), "-" if c.recall is None else f"{c.recall:.4f}",
                      "-" if c.p50_ms is None else f"{c.p50_ms:.3f}",
                      "-" if c.p50_at_docs is None else f"{c.p50_at_docs:,.2f}", _human(c.ram_bytes),
                      _human(c.disk_bytes), f"{c.n_sample:,}", "yes" if c.meets else (c.note or "no"))
    Console().print(table)
    for note in result.notes:
        console.print(f"note: {note}")
    if table_out is not None:
        import json

        table_out.write_text(json.dumps([c.row() for c in result.candidates], indent=1) + "\n")
        console.print(f"every candidate's row written to {table_out}")
    versus = result.versus_default()
    if versus:
        console.print(versus, markup=False, highlight=False)
    recipe = result.recipe()
    path = save_recipe(out, recipe)
    console.print(f"winner: [bold]{recipe}[/] written to {path} (see docs/recipes.md)")
    import shlex

    console.print(f"build it: slimvec ingest DOCS.jsonl --index INDEX --recipe {shlex.quote(str(path))}",
                  highlight=False, soft_wrap=True)
