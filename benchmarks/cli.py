"""The measurements ``slimvec bench --suite`` cannot make, and the pages rendered from results.

Run from the checkout: ``python -m benchmarks KIND --help``. Each measurement writes one JSON
record (:mod:`slimvec.benchmarks.record`) to ``--out`` and prints it; ``table`` renders a docs page
from results, ``report`` the offline report.html of runs, ``vectors`` writes a vector corpus a
suite reads. None of this ships in the wheel: the installed ``slimvec bench`` runs suites and
writes results.json and report.md (issue 35 item 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from slimvec.cli import PlainUsage
from slimvec.cli.checks import int_range, number_range
from slimvec.errors import ConfigError

__all__ = ["app"]

#: the checkout (paths on generated pages are shown relative to it)
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "slimvec" / "data"
#: where `python scripts/make_real_corpus.py` writes the real-text corpus
REAL_CORPUS = Path.home() / ".cache" / "slimvec-corpus" / "corpus.jsonl"

app = typer.Typer(rich_markup_mode=None, add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"max_content_width": 120}, no_args_is_help=True)

def _emit(kind: str, result: dict[str, Any], machine: Any, out: Path | None) -> None:
    from slimvec.benchmarks.record import Record, write_record

    typer.echo(write_record(Record(kind, result, machine), out))


def _machine() -> Any:
    from slimvec.benchmarks.record import MachineFacts

    return MachineFacts()


OUT = typer.Option(None, "--out", help="Write the JSON record (figures + machine facts + command) here.")
MARKDOWN = typer.Option(None, "--markdown", help="Also write the Markdown table here.")


@app.command("ingest")
def ingest_kind(
    corpus: Path = typer.Option(DATA / "sentences.jsonl", "--corpus", help="JSONL corpus ({id, text} a line)."),
    store: list[str] = typer.Option([], "--store", help="Store (repeatable) [default: qdrant-edge, qdrant, faiss, hnsw]."),
    reducer: str = typer.Option("pca:96", "--reducer", help="Reducer of the measured ingest."),
    batch_size: int = typer.Option(256, "--batch-size", callback=int_range(1), help="Documents per batch."),
    out: Path | None = OUT, markdown: Path | None = MARKDOWN,
) -> None:
    """Ingest docs/s per store against encoder-only, bytes on disk, p50 search latency."""
    from benchmarks.kinds.ingest import INGEST_STORES, ingest_markdown, measure_ingest

    machine = _machine()
    result = measure_ingest(corpus, store or list(INGEST_STORES), batch_size, reducer)
    if markdown:
        markdown.write_text(ingest_markdown(result), encoding="utf-8")
    _emit("ingest", result, machine, out)


@app.command("ingest-ceiling")
def ceiling_kind(
    docs: int = typer.Option(20000, "--docs", callback=int_range(1), help="Unique bundled sentences ingested."),
    store: list[str] = typer.Option([], "--store", help="Store (repeatable; 'default': the default recipe) [default: qdrant-edge, hnsw, faiss]."),
    reducer: str = typer.Option("pca:96", "--reducer", help="Reducer (ignored by the store 'default')."),
    encoder_threads: list[int] = typer.Option([], "--encoder-threads", callback=int_range(1), help="Torch threads of the encoder-only ceiling runs (repeatable) [default: 1 and every core]."),
    no_encoder: bool = typer.Option(False, "--no-encoder", help="Measure the ingest without the model call instead: vectors looked up from a precomputed matrix behind the encoder's interface, texts from --corpus, per store (default, faiss, hnsw, qdrant-edge) and --threads."),
    corpus: Path = typer.Option(REAL_CORPUS, "--corpus", help="With --no-encoder: JSONL texts (python scripts/make_real_corpus.py)."),
    threads: list[int] = typer.Option([], "--threads", callback=int_range(1), help="With --no-encoder: cores (affinity, OpenMP and torch threads) per run (repeatable) [default: 1 and 2]."),
    recipe: str | None = typer.Option(None, "--recipe", help="With --no-encoder: the recipe of the store 'default' [default: the default recipe]."),
    out: Path | None = OUT, markdown: Path | None = MARKDOWN,
) -> None:
    """Each store's ingest against the best encoder-only run of the same texts, re-run before it;
    with --no-encoder, the ingest's docs/s with the model call removed."""
    from benchmarks.corpora.sentences import pair_sentences
    from benchmarks.kinds.ingest import ceiling_markdown, measure_ceiling

    machine = _machine()
    if no_encoder:
        from benchmarks.kinds.ingest import measure_pipeline, pipeline_markdown

        result = measure_pipeline(corpus, docs, store or ["default", "faiss", "hnsw", "qdrant-edge"],
                                  threads or [1, 2], reducer, recipe)
        if markdown:
            markdown.write_text(pipeline_markdown(result), encoding="utf-8")
        _emit("ingest-pipeline", result, machine, out)
        return
    result = measure_ceiling(pair_sentences(docs), store or ["qdrant-edge", "hnsw", "faiss"], reducer,
                             threads=encoder_threads)
    if markdown:
        markdown.write_text(ceiling_markdown(result), encoding="utf-8")
    _emit("ingest-ceiling", result, machine, out)


@app.command("segments")
def segments_kind(
    docs: int = typer.Option(200_000, "--docs", callback=int_range(20_001), help="Vectors bulk-loaded."),
    threads: int = typer.Option(2, "--threads", callback=int_range(1), help="Cores (affinity and OpenMP threads)."),
    batch: int = typer.Option(256, "--batch", callback=int_range(1), help="Vectors per acknowledged commit."),
    out: Path | None = OUT, markdown: Path | None = MARKDOWN,
) -> None:
    """Acknowledged writes (each found on ack) during a bulk load, against the graph built alone."""
    from benchmarks.kinds.segments import measure_segments, segments_markdown

    machine = _machine()
    result = measure_segments(docs, threads, batch)
    if markdown:
        markdown.write_text(segments_markdown(result), encoding="utf-8")
    _emit("segments", result, machine, out)


@app.command("rebuild")
def rebuild_kind(
    docs: Path = typer.Option(DATA / "sentences.jsonl", "--docs", help="JSONL documents."),
    old: str = typer.Option("pca:96|qdrant-edge|rescore=auto,keep_full=float16", "--old", help="Recipe of the index to change."),
    new: str = typer.Option("pca:128|faiss:HNSW32|rescore=auto,keep_full=float16", "--new", help="Recipe to rebuild into."),
    out: Path | None = OUT,
) -> None:
    """Wall time of `slimvec rebuild` against re-ingesting the same texts (whole commands)."""
    from benchmarks.kinds.lifecycle import measure_rebuild

    machine = _machine()
    _emit("rebuild", measure_rebuild(docs, old, new), machine, out)


@app.command("sync")
def sync_kind(
    corpus: Path = typer.Option(REAL_CORPUS, "--corpus",
                                help="JSONL corpus (python scripts/make_real_corpus.py)."),
    n: int = typer.Option(5000, "--n", callback=int_range(100), help="Rows of v1 (1 % changed, removed, added in v2)."),
    recipe: str | None = typer.Option(None, "--recipe", help="Recipe [default: ingest's default]."),
    out: Path | None = OUT,
) -> None:
    """`slimvec ingest --sync` of a 1 %-changed source against a full re-ingest (whole commands)."""
    from benchmarks.kinds.lifecycle import measure_sync

    machine = _machine()
    _emit("sync", measure_sync(corpus, n, recipe), machine, out)


@app.command("service")
def service_kind(
    docs: int = typer.Option(2000, "--docs", callback=int_range(1), help="Documents ingested each way."),
    fit: int = typer.Option(1000, "--fit", callback=int_range(2), help="Documents the reducer is fitted on."),
    batch: int = typer.Option(256, "--batch", callback=int_range(1), help="Documents per HTTP request."),
    clients: int = typer.Option(2, "--clients", callback=int_range(1), help="Concurrent HTTP writers."),
    seconds: float = typer.Option(6.0, "--seconds", callback=number_range(0, low_open=True), help="Seconds per search configuration."),
    big: int = typer.Option(100_000, "--big", callback=int_range(2), help="Vectors of the idle-RSS index."),
    reducer: str = typer.Option("pca:96", "--reducer", help="Reducer of the indexes (without --recipe)."),
    recipe: str | None = typer.Option(None, "--recipe", help="Recipe of the indexes, instead of --reducer alone (e.g. the default recipe)."),
    out: Path | None = OUT,
) -> None:
    """Bounded load of `slimvec serve` on loopback: ingest, search, start-up, idle RSS."""
    from benchmarks.kinds.service import measure_service

    machine = _machine()
    _emit("service", measure_service(docs, fit, batch, clients, seconds, big, reducer, recipe), machine, out)


@app.command("qdrant-compat")
def qdrant_compat_kind(
    n: int = typer.Option(5000, "--n", callback=int_range(1), help="Points loaded."),
    queries: int = typer.Option(200, "--queries", callback=int_range(1), help="Queries timed."),
    out: Path | None = OUT,
) -> None:
    """RSS and p50 of the Qdrant-compatible API through qdrant-client (local mode as reference)."""
    from benchmarks.kinds.service import measure_qdrant_compat

    machine = _machine()
    _emit("qdrant-compat", measure_qdrant_compat(n, queries), machine, out)


@app.command("sizing")
def sizing_kind(
    store: list[str] = typer.Option([], "--store", help="Store spec (repeatable) [default: the seven of the sizing page]."),
    big: int = typer.Option(20000, "--big", callback=int_range(2), help="Largest held-out size (384-d)."),
    ram_size: list[int] = typer.Option([], "--ram-size", callback=int_range(2), help="Sizes of the RAM check (two; repeatable) [default: 5000, 20000]."),
    no_ram: bool = typer.Option(False, "--no-ram", help="Skip the RAM check."),
    size: list[int] = typer.Option([], "--size", callback=int_range(2), help="Fit sizes (repeatable) [default: 1000, 2000]."),
    dim: list[int] = typer.Option([], "--dim", callback=int_range(2), help="Fit dimensions (repeatable) [default: 64, 384]."),
    out: Path | None = OUT,
    markdown: Path | None = typer.Option(None, "--markdown", help="Write the sizing page (docs/benchmarks/sizing.md)."),
) -> None:
    """Store size models: fitted constants, errors at sizes not fitted on, RAM against RSS."""
    from benchmarks.kinds.sizing_page import SIZES, SIZING_STORES, measure_sizing, sizing_markdown
    from slimvec.benchmarks.record import command_line

    if ram_size and len(ram_size) != 2:
        raise ConfigError(f"--ram-size takes two sizes (given twice), got {len(ram_size)}: {ram_size}.")
    machine = _machine()
    result = measure_sizing(store or list(SIZING_STORES), big, None if no_ram else (ram_size or [5000, 20000]),
                            size or list(SIZES), dim or [64, 384])
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(sizing_markdown(result, "OMP_NUM_THREADS=1 " + command_line(), out.as_posix() if out else None),
                            encoding="utf-8")
    _emit("sizing", result, machine, out)


@app.command("scaleout")
def scaleout_kind(
    docs: int = typer.Option(20000, "--docs", callback=int_range(1), help="Bundled sentences ingested per run."),
    work: Path = typer.Option(Path("out/scaleout"), "--work", help="Folder of the corpus and the indexes."),
    run: list[str] = typer.Option([], "--run", help="'local' or 'rayW' (repeatable) [default: local, ray2, ray1]."),
    out: Path | None = OUT,
) -> None:
    """The Ray engine (--engine ray --workers W) against one `slimvec ingest` process."""
    from benchmarks.kinds.scaleout import measure_scaleout

    machine = _machine()
    _emit("scaleout", measure_scaleout(docs, work, run or ["local", "ray2", "ray1"]), machine, out)


def pruning_kind(
    sparsity: list[float] = typer.Option([], "--sparsity", help="Sparsity (repeatable; the first is the speed-up reference) [default: 0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5]."),
    structures: str = typer.Option("joint", "--structures", help="joint, heads or neurons."),
    rewind_steps: int = typer.Option(100, "--rewind-steps", callback=int_range(0), help="SimCSE rewinding steps (0: none)."),
    score_sentences: int = typer.Option(512, "--score-sentences", callback=int_range(1), help="Sentences importance is scored on."),
    threads: int = typer.Option(1, "--threads", callback=int_range(1), help="torch threads."),
    throughput_sentences: int = typer.Option(1024, "--throughput-sentences", callback=int_range(1), help="Sentences timed per round."),
    rounds: int = typer.Option(5, "--rounds", callback=int_range(1), help="Throughput rounds (median)."),
    batch_size: int = typer.Option(64, "--batch-size", callback=int_range(1), help="Encoding batch size."),
    eval_pairs: int | None = typer.Option(None, "--eval-pairs", callback=int_range(1), help="STS-B dev/test pairs evaluated at most [default: all]."),
    rewind_sentences: int | None = typer.Option(None, "--rewind-sentences", callback=int_range(1), help="Rewinding corpus sentences at most [default: all]."),
    seed: int = typer.Option(0, "--seed", callback=int_range(0), help="Seed of scoring and rewinding."),
    out: Path | None = typer.Option(None, "--out", help="Write the JSON record here."),
) -> None:
    """SparseCSE on MiniLM: throughput, bytes and quality per sparsity, before and after rewinding."""
    from benchmarks.kinds.pruning import measure_pruning
    from slimvec.benchmarks.record import MachineFacts, Record, write_record

    if structures not in ("joint", "heads", "neurons"):
        raise ConfigError(f"--structures must be joint, heads or neurons, got {structures!r}.")
    machine = MachineFacts()
    result = measure_pruning(sparsity or [0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5], structures, rewind_steps, score_sentences,
                             threads, throughput_sentences, rounds, batch_size, seed, eval_pairs, rewind_sentences)
    typer.echo(write_record(Record("pruning", result, machine), out))


def table_kind(
    kind: str = typer.Argument(..., help="sweep, pruning, filtered, fair-peers, realtext, scale, sizing, headline, default-recipe or ingest-ceiling."),
    results: list[Path] = typer.Argument(None, help="results.json / record files (scale: the folder of scale-SIZE/) [default: the kind's published results]."),
    out: Path | None = typer.Option(None, "--out", help="Write the page here [default: the kind's docs page, or print]."),
    print_only: bool = typer.Option(False, "--print", help="Print, do not write the default page."),
) -> None:
    """Render a docs page or table from runs' results (nothing typed by hand; a page's hand-written notes are kept)."""
    from benchmarks.pages.tables import TABLES, hand_notes, render_table

    text = render_table(kind, list(results or []), ROOT)
    default_page = TABLES[kind][2]
    page = out or (None if print_only or default_page is None else ROOT / default_page)
    if page is None:
        typer.echo(text)
        return
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text + hand_notes(page), encoding="utf-8")
    typer.echo(f"wrote {page}")


def vectors_kind(
    kind: str = typer.Argument(..., help="fair-peers or filtered."),
    npy: Path = typer.Argument(..., help="The .npy file to write."),
) -> None:
    """Write the vector corpus a suite reads (fair-peers: encodes what no cache holds; filtered: caches only)."""
    from benchmarks.corpora.sentences import VECTOR_KINDS

    if kind not in VECTOR_KINDS:
        raise ConfigError(f"Unknown vectors kind {kind!r}: expected one of {', '.join(VECTOR_KINDS)}.")
    n = VECTOR_KINDS[kind](npy.expanduser())
    typer.echo(f"wrote {n:,} MiniLM vectors to {npy}")


def search_profile_kind(
    data: Path = typer.Option(ROOT / "bench-data" / "realtext-minilm-100k.npy", "--data", help="Corpus vectors (.npy)."),
    queries: Path = typer.Option(ROOT / "bench-data" / "realtext-minilm-queries.npy", "--queries", help="Query vectors (.npy)."),
    n: int = typer.Option(20000, "--n", callback=int_range(1), help="Corpus rows used (a prefix)."),
    n_queries: int = typer.Option(1000, "--n-queries", callback=int_range(1), help="Queries timed."),
    work: Path | None = typer.Option(None, "--work", help="Where the two indexes are built (reused) [default: a temp folder]."),
    before: str | None = typer.Option(None, "--before", help="Git commit whose store search and re-ranking to compare with."),
    before_index: Path | None = typer.Option(None, "--before-index", help="An index built by --before's code from the same vectors."),
    before_depth: int | None = typer.Option(None, "--before-depth", help="Rescoring depth of the before path."),
    breakdown: bool = typer.Option(False, "--breakdown", help="Per-stage p50 and a cProfile instead."),
    pool: bool = typer.Option(False, "--pool", help="The engine's search pool against one search thread."),
    python: bool = typer.Option(False, "--python", help="Per query, the Python around FAISS's native calls, unfiltered and filtered."),
    scan_before: str | None = typer.Option(None, "--scan-before", help="Git commit whose exact scan to compare with, alternated."),
    out: Path | None = typer.Option(None, "--out", help="Write the comparison as JSON here."),
) -> None:
    """Where the default recipe's single-query search spends its time; before / after a commit."""
    from benchmarks.kinds.search_profile import main

    argv = ["--data", str(data), "--queries", str(queries), "--n", str(n), "--n-queries", str(n_queries)]
    for flag, value in (("--work", work), ("--before", before), ("--before-index", before_index),
                        ("--before-depth", before_depth), ("--scan-before", scan_before), ("--out", out)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--breakdown"] * breakdown + ["--pool"] * pool + ["--python"] * python
    main(argv)


def default_recipe_kind(
    data: Path = typer.Option(ROOT / "bench-data" / "realtext-minilm-300k.npy", "--data", help="Corpus vectors (.npy, rows in a seeded random order)."),
    queries: Path = typer.Option(ROOT / "bench-data" / "realtext-minilm-queries.npy", "--queries", help="Held-out query vectors (.npy)."),
    n: list[int] = typer.Option([], "--n", callback=int_range(1), help="Corpus size, a prefix of --data (repeatable) [default: 20000, 100000, 300000]."),
    candidate: list[str] = typer.Option([], "--candidate", help="Recipe compared with full HNSW (repeatable) [default: benchmarks.kinds.recipe_choice.CANDIDATES]."),
    n_queries: int = typer.Option(1000, "--n-queries", callback=int_range(1), help="Held-out queries used."),
    rounds: int = typer.Option(2, "--rounds", callback=int_range(1), help="Latency rounds; the order reverses each round."),
    work: Path = typer.Option(ROOT / "bench-out" / "default-recipe", "--work", help="Where prefixes and indexes are kept (reused)."),
    out: Path | None = typer.Option(None, "--out", help="Write the JSON record here."),
    page: Path | None = typer.Option(None, "--page", help="Also write the tables as Markdown here."),
) -> None:
    """Candidate recipes against full-precision HNSW by corpus size: recall, p50, serving RAM, disk."""
    from benchmarks.kinds.recipe_choice import CANDIDATES, ChoiceConfig, choice_markdown, measure_choice
    from slimvec.benchmarks.record import MachineFacts, Record, write_record

    machine = MachineFacts()
    cfg = ChoiceConfig(data=data, queries=queries, sizes=n or [20000, 100000, 300000],
                       candidates=candidate or list(CANDIDATES), work=work, n_queries=n_queries,
                       rounds=rounds)
    result = measure_choice(cfg, progress=lambda msg: typer.echo(msg, err=True))
    typer.echo(write_record(Record("default-recipe", result, machine), out))
    if page is not None:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(choice_markdown(result), encoding="utf-8")
        typer.echo(f"wrote {page}", err=True)


def report_page(
    results: list[Path] = typer.Argument(..., help="results.json file(s) of `slimvec bench`; several are combined, each row labelled with its run."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
    planner: bool = typer.Option(True, "--planner/--no-planner", help="Fit the store size models for the page's capacity planner (real builds at 1,000 and 2,000 vectors per store, as `slimvec plan` does)."),
    title: str | None = typer.Option(None, "--title", help="Page title (default: the run labels)."),
    plots: bool = typer.Option(False, "--plots", help="Also draw the PNG plots (matplotlib) beside the page."),
) -> None:
    """Render one self-contained, offline report.html (Pareto plots, table, capacity planner).

    Every script and style is inlined: open the file in a browser, no network needed.
    """
    from benchmarks.pages.html import render_report_html

    if planner:
        typer.echo("fitting store size models for the planner (real builds at 1,000 and 2,000 vectors) ...", err=True)
    path = render_report_html(results, out, planner=planner, title=title)
    typer.echo(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)", err=True)
    if plots:
        from benchmarks.pages.plots import draw_all
        from slimvec.planner.rows import load_rows

        drawn = draw_all([r for p in results for r in load_rows(p)[0]], path.parent)
        typer.echo(f"plots: {', '.join(n for n, why in drawn.items() if why is None) or 'none drawn'}", err=True)


for _name, _command in (("report", report_page), ("pruning", pruning_kind), ("table", table_kind), ("vectors", vectors_kind),
                        ("search-profile", search_profile_kind), ("default-recipe", default_recipe_kind)):
    app.command(_name, cls=PlainUsage)(_command)
