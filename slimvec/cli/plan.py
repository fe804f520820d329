"""``slimvec plan``: capacity planning from bench results and fitted store size models."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from slimvec.cli.checks import byte_size, int_range, number_range
from slimvec.errors import ConfigError

__all__ = ["plan"]


def _human(n: float | None) -> str:
    from slimvec.benchmarks.report import human_bytes

    return human_bytes(n)


def _p50_cell(c) -> str:
    """p50 at the plan's N with where it was measured (benchmarks.latency.latency_at)."""
    if c.p50_ms is None:
        return "—"
    at = f"n={c.p50_n:,}" if c.p50_n else "n=?"
    if c.p50_at_docs is None:
        return f"— (measured {c.p50_ms:.3f} at {at}; not extrapolated)"
    if c.points and len({p[1] for p in c.points}) > 1:  # fitted on several sizes (planner.growth)
        band = "" if c.p50_uncertainty is None else f" ±{c.p50_uncertainty:.0%}"
        sizes = "/".join(f"{n // 1000:,}k" for n in sorted({p[1] for p in c.points}))
        return f"{c.p50_at_docs:.3f}{band} (fit on {sizes}{', extrapolated' if c.p50_uncertainty is not None else ''})"
    return f"{c.p50_at_docs:.3f} (measured at {at})"


def plan(
    docs: int = typer.Option(..., "--docs", callback=int_range(1), help="Number of documents to plan for."),
    dim: int = typer.Option(..., "--dim", callback=int_range(1), help="Encoder output dimension (384 for MiniLM)."),
    store: list[str] = typer.Option([], "--store", help="Store spec to consider (repeatable) [default: every store in the results]."),
    min_task_recall: float | None = typer.Option(None, "--min-task-recall", callback=number_range(0, 1), help="Target: task recall@k at least this (k of the results)."),
    min_neighbor_recall: float | None = typer.Option(None, "--min-neighbor-recall", callback=number_range(0, 1), help="Target: neighbour recall@k at least this (k of the results)."),
    memory_budget: str | None = typer.Option(None, "--memory-budget", callback=byte_size, help="Target: predicted RAM at most this (2GiB, 512MiB, 1.5GB)."),
    results: list[Path] = typer.Option([], "--results", help="results.json of `slimvec bench` (the quality side; repeatable: runs at several corpus sizes fit latency and recall against N)."),
    pairs: list[Path] = typer.Option([], "--pairs", help="Pairs TSV of your data for a quick sweep (repeatable)."),
    vectors: Path | None = typer.Option(None, "--vectors", help="Vectors file of your data for a quick sweep."),
    reducer: list[str] = typer.Option([], "--reducer", help="Reducer spec for the quick sweep (repeatable) [default: pca at dim/2, dim/4, dim/8]."),
    sample: int = typer.Option(2000, "--sample", callback=int_range(1), help="Rows of --pairs / --vectors used by the quick sweep (with --corpus and --recipe: texts of --corpus the recipes are measured on, at this size, a half and a quarter of it)."),
    payload_bytes: int = typer.Option(0, "--payload-bytes", callback=int_range(0), help="Mean bytes of each document's payload JSON as ingest stores it: its text, its source_id and its other columns ({\"text\": ..., \"source_id\": ..., \"product\": ...}); 0: none. Payload indexes are counted apart (--payload-index)."),
    top: int = typer.Option(10, "--top", callback=int_range(1), help="Candidates shown."),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    engine: str | None = typer.Option(None, "--engine", help="Also plan ingest on this engine (ray): workers, hours, shards, nodes."),
    workers: int = typer.Option(8, "--workers", callback=int_range(1), help="--engine: encoder workers."),
    gpus_per_worker: float = typer.Option(0.0, "--gpus-per-worker", callback=number_range(0), help="--engine: GPUs per worker (the GPU rate benchmarks/gpu_ingest_check.py recorded here, else the H200 figure of issue 36)."),
    cpu_rate: float | None = typer.Option(None, "--cpu-rate", callback=number_range(0, low_open=True, hint="docs/s per CPU core; leave it out to measure it here"), help="--engine: docs/s per CPU core [default: measured now]."),
    node_ram: str = typer.Option("64GiB", "--node-ram", callback=byte_size, help="--engine: RAM per serving node."),
    node_hour_price: float = typer.Option(0.0, "--node-hour-price", callback=number_range(0), help="--engine: price of a node-hour, for savings."),
    replication: int = typer.Option(1, "--replication", callback=int_range(1), help="--engine: copies of each shard."),
    payload_index: list[str] = typer.Option([], "--payload-index", help="FIELD:keyword|integer|float|bool|datetime (repeatable), as ingest takes them: their RAM and disk are added (measured on --corpus rows when given)."),
    corpus: Path | None = typer.Option(None, "--corpus", help="Your own documents (JSONL, CSV, TSV, Parquet, as ingest reads them): their first --corpus-rows measure the payload bytes and the payload indexes."),
    corpus_rows: int = typer.Option(20000, "--corpus-rows", callback=int_range(1), help="Rows of --corpus measured (payload indexes need 10,000 or more)."),
    text_column: str = typer.Option("text", "--text-column", help="--corpus: the text column."),
    recipe: list[str] = typer.Option([], "--recipe", help="Plan exactly this recipe (string or tuned.json; repeatable): sized at --docs with its full vectors on disk, quality from --results / the quick sweep (which then measures it)."),
) -> None:
    """Recommend reducer × store configurations for DOCS documents and predict RAM and disk.

    Quality comes from bench results (--results) or a quick sweep on a sample of your data
    (--pairs / --vectors); sizes from store size models fitted on real builds at small sizes,
    whose prediction error at a held-out size is printed with the plan.
    """
    from slimvec.benchmarks.sweep import quick_sweep
    from slimvec.planner.plan import default_sweep_reducers, make_plan, parse_bytes, size_model_cache
    from slimvec.planner.rows import load_rows

    if min_task_recall is not None and min_neighbor_recall is not None:
        raise ConfigError("Give one quality target: --min-task-recall or --min-neighbor-recall, not both.")
    metric, floor = "task_recall_at_k", min_task_recall
    if min_neighbor_recall is not None:
        metric, floor = "neighbor_recall_at_k", min_neighbor_recall
    if memory_budget is not None:
        parse_bytes(memory_budget)  # fail before any work
    from slimvec.buildspec import parse_payload_indexes
    from slimvec.recipe import recipe_grid, resolve_recipe

    recipes = [resolve_recipe(r) for r in recipe]  # a bad recipe fails before any work
    fields = parse_payload_indexes(payload_index)
    err = Console(stderr=True)
    rate_source = None
    with tempfile.TemporaryDirectory(prefix="slimvec-plan-") as tmp:
        profile = None
        if corpus is not None:
            from slimvec.planner.corpus import profile_corpus

            err.print(f"measuring the first {corpus_rows:,} rows of {corpus} ...")
            profile = profile_corpus(corpus, corpus_rows, fields, text_column, workdir=tmp, rate_texts=1024)
            payload_bytes = payload_bytes or profile.payload_bytes
        rows = None
        if results:
            rows = [r for path in results for r in load_rows(path)[0]]
        elif corpus is not None and recipes:  # the recipes measured on the user's own texts
            from slimvec.benchmarks.sweep import corpus_sweep

            err.print(f"quick sweep: {len(recipes)} recipe(s) built and searched on the first {sample:,} "
                      f"texts of {corpus} (and on a half and a quarter of them) ...")
            rows = corpus_sweep(Path(tmp) / "sweep", corpus, recipes, sample=sample, text_column=text_column)
        elif pairs or vectors is not None:
            err.print(f"quick sweep: `slimvec bench` on the first {sample:,} rows of your data ...")
            reducers, stores, depths = recipe_grid(recipe, reducer or ([] if recipe else default_sweep_reducers(dim)),
                                                   store, [])
            rows = quick_sweep(Path(tmp) / "sweep", pairs=pairs, vectors=vectors,
                               reducers=[r for r in reducers if r != "none"], stores=stores,
                               sample=sample, rescore=depths)
        # the progress line says up front how many size models are built (none when an earlier
        # plan's are in the cache: plan then answers in seconds)
        result = make_plan(docs, dim, store, rows=rows, min_quality=floor, memory_budget=memory_budget,
                           metric=metric, payload_bytes=payload_bytes, workdir=tmp, recipes=recipes,
                           progress=not json_out, cache=size_model_cache(), payload_index=fields,
                           payload_index_measured=(profile.payload_index or None) if profile else None)
    if profile is not None:
        result.notes.append(f"--corpus {corpus}: {profile.rows:,} rows measured, payload "
                            f"{profile.payload_bytes:,} B/document stored; MiniLM encodes "
                            f"{profile.cpu_rate:,.1f} docs/s per CPU core on {profile.rate_assumes()}: "
                            "the rate falls with text length")
        if cpu_rate is None and not gpus_per_worker:  # the engine plan's rate: the user's texts
            cpu_rate, rate_source = profile.cpu_rate, f"measured on {profile.rate_assumes()}, 1 thread"
    engine_result = None
    if engine:  # the engine model lives in slimvec.engines.plan
        from slimvec.cli.engine_plan import run_engine_plan

        engine_result = run_engine_plan(result, engine, workers, gpus_per_worker, cpu_rate, node_ram,
                                        node_hour_price, replication, err, cpu_source=rate_source,
                                        rows=rows or ())
    if json_out:
        data = result.to_json()
        if engine_result is not None:
            data["engine"] = engine_result.to_json()
        data["corpus"] = profile.to_json() if profile else None
        typer.echo(json.dumps(data, indent=2))
        return
    out = Console(width=max(Console().width, 120))
    _print_plan(result, out, metric, floor, top)
    if engine_result is not None:
        from slimvec.cli.engine_plan import render

        render(engine_result, out, _human)
    for note in result.notes:
        out.print(f"note: {note}")
    if not result.recommendations:
        raise typer.Exit(1)


def _print_plan(result, out: Console, metric: str, floor: float | None, top: int) -> None:
    """The plan's tables, its size checks, the payload indexes and the recommendation."""
    from slimvec.planner.rows import metric_title

    short = metric_title(metric, result.k)
    target = []
    if floor is not None:
        target.append(f"{short} ≥ {floor}")
    if result.memory_budget is not None:
        target.append(f"RAM ≤ {_human(result.memory_budget)}")
    table = Table(title=f"Plan for {result.docs:,} documents of dimension {result.dim} "
                        f"({' and '.join(target) or 'no target: the recipes sized'})")
    ranked = result.ranked_by if result.ranked_by and result.ranked_by != metric else None
    cols = ["#", "reducer", "dim", "store", short] + ([metric_title(ranked, result.k) + " (ranks)"]
                                                       if ranked else [])
    for col in cols + ["RAM", "disk", f"p50 ms at {result.docs:,}", "meets target", "measured on"]:
        table.add_column(col, justify="right" if col in ("#", "dim", "RAM", "disk") else "left")
    for i, c in enumerate(result.candidates[:top], 1):
        rank_cell = ["—" if c.rank_quality is None else f"{c.rank_quality:.3f}"] if ranked else []
        table.add_row(str(i), c.reducer, str(c.dim_out),
                      c.recipe or (c.store + (f" +rescore×{c.depth}" if c.depth else " +rescore" if c.rescore else "")),
                      "—" if c.quality is None else f"{c.quality:.3f}", *rank_cell, _human(c.ram_bytes),
                      _human(c.disk_bytes), _p50_cell(c), "[green]yes[/]" if c.meets_target else "[red]no[/]",
                      ", ".join(sorted(set(c.datasets))) or "—")
    out.print(table)
    checks = Table(title="Size models: prediction at a size not fitted on")
    for col in ("store", "n", "dim", "predicted", "measured", "error"):
        checks.add_column(col, justify="left" if col == "store" else "right")
    for k in result.checks:
        checks.add_row(k.spec, f"{k.n:,}", str(k.dim), _human(k.predicted), _human(k.measured), f"{k.error:+.1%}")
    out.print(checks)
    for form, k in (result.latency_check or {}).items():
        what = "recall (absolute)" if form == "recall" else f"{form} p50"
        out.print(f"growth check, {what}: n={k['check_n']:,} predicted from "
                  f"{', '.join(f'{n:,}' for n in k['fit_n'])} for {k['configs']} configurations: median "
                  f"error {k['median']:+.3f}, largest {k['max_abs']:.3f}" if form == "recall" else
                  f"growth check, {what}: n={k['check_n']:,} predicted from "
                  f"{', '.join(f'{n:,}' for n in k['fit_n'])} for {k['configs']} configurations: median "
                  f"error {k['median']:+.1%}, largest {k['max_abs']:.1%}", highlight=False, soft_wrap=True)
    if result.payload_indexes:
        p = result.payload_indexes
        out.print(f"payload indexes ({', '.join(f'{f}:{k}' for f, k in p['kinds'].items())}): RAM "
                  f"{_human(p['ram'])}, disk {_human(p['disk'])} at {result.docs:,} (in each row above; "
                  f"{p['source']})", highlight=False, soft_wrap=True)
    if result.recommendations:
        best = result.recommendations[0]
        out.print(f"[bold green]recommended[/]: {best.label} — RAM {_human(best.ram_bytes)}, "
                  f"disk {_human(best.disk_bytes)}")
        out.print(f"build it: {best.command}", highlight=False, soft_wrap=True)
        if best.p50_ms is not None:
            at = "—" if best.p50_at_docs is None else f"{best.p50_at_docs:.3f} ms"
            out.print(f"p50 at {result.docs:,}: {at} ({best.p50_note})", highlight=False, soft_wrap=True)
        if best.quality_note:
            q = "" if best.quality_at_docs is None else f"{best.quality_at_docs:.4f} "
            out.print(f"quality at {result.docs:,}: {q}({best.quality_note})", highlight=False, soft_wrap=True)
