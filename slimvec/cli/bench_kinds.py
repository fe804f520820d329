"""``slimvec bench``: the suite run (``slimvec bench --suite FILE`` / ``--out DIR ...``) and the
measurements the grid cannot make, as sub-commands (``slimvec bench ingest``, ``rebuild``, ...).

``bench`` is a Typer group whose callback is :func:`slimvec.cli.bench.bench` itself, invoked
without a sub-command: every option of ``slimvec bench`` works as before, and a name after them
runs a measurement from :mod:`slimvec.benchmarks.kinds` instead. Each measurement writes one
JSON record (:mod:`slimvec.benchmarks.kinds.record`) to ``--out`` and prints it.
"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any

import typer

from slimvec.cli.bench import bench
from slimvec.cli.checks import int_range, number_range
from slimvec.errors import ConfigError

__all__ = ["bench_app"]

DATA = Path(__file__).resolve().parents[1] / "data"
#: where `python scripts/make_real_corpus.py` writes the real-text corpus
REAL_CORPUS = Path.home() / ".cache" / "slimvec-corpus" / "corpus.jsonl"

bench_app = typer.Typer(rich_markup_mode=None, add_completion=False, pretty_exceptions_enable=False,
                        context_settings={"max_content_width": 120})


def _root(ctx: typer.Context, **options: Any) -> None:
    if ctx.invoked_subcommand is None:
        bench(**options)
        return
    given = [f"--{name.replace('_', '-')}" for name in options
             if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"]  # typed by the user
    if given:
        raise ConfigError(f"{', '.join(given)} belong(s) to the suite run `slimvec bench`, not to "
                          f"`slimvec bench {ctx.invoked_subcommand}`: put the sub-command's own options "
                          f"after its name (see `slimvec bench {ctx.invoked_subcommand} --help`).")


def _signature() -> inspect.Signature:
    """bench's parameters (annotations resolved) behind a ``ctx``: Typer reads them as options."""
    hints = typing.get_type_hints(bench)
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    params += [p.replace(annotation=hints[p.name]) for p in inspect.signature(bench).parameters.values()]
    return inspect.Signature(params, return_annotation=None)


_root.__signature__ = _signature()  # type: ignore[attr-defined]  # Typer reads options from it
_root.__annotations__ = {p.name: p.annotation for p in _root.__signature__.parameters.values()}  # type: ignore[attr-defined]  # same
_root.__doc__ = inspect.cleandoc(bench.__doc__ or "") + (
    "\n\nMeasurements the grid cannot make are sub-commands: slimvec bench KIND --help.")
bench_app.callback(invoke_without_command=True)(_root)


def _emit(kind: str, result: dict[str, Any], machine: Any, out: Path | None) -> None:
    from slimvec.benchmarks.kinds.record import Record, write_record

    typer.echo(write_record(Record(kind, result, machine), out))


def _machine() -> Any:
    from slimvec.benchmarks.kinds.record import MachineFacts

    return MachineFacts()


OUT = typer.Option(None, "--out", help="Write the JSON record (figures + machine facts + command) here.")
MARKDOWN = typer.Option(None, "--markdown", help="Also write the Markdown table here.")


@bench_app.command("ingest")
def ingest_kind(
    corpus: Path = typer.Option(DATA / "sentences.jsonl", "--corpus", help="JSONL corpus ({id, text} a line)."),
    store: list[str] = typer.Option([], "--store", help="Store (repeatable) [default: qdrant-edge, qdrant, faiss, hnsw]."),
    reducer: str = typer.Option("pca:96", "--reducer", help="Reducer of the measured ingest."),
    batch_size: int = typer.Option(256, "--batch-size", callback=int_range(1), help="Documents per batch."),
    out: Path | None = OUT, markdown: Path | None = MARKDOWN,
) -> None:
    """Ingest docs/s per store against encoder-only, bytes on disk, p50 search latency."""
    from slimvec.benchmarks.kinds.ingest import INGEST_STORES, ingest_markdown, measure_ingest

    machine = _machine()
    result = measure_ingest(corpus, store or list(INGEST_STORES), batch_size, reducer)
    if markdown:
        markdown.write_text(ingest_markdown(result), encoding="utf-8")
    _emit("ingest", result, machine, out)


@bench_app.command("ingest-ceiling")
def ceiling_kind(
    docs: int = typer.Option(20000, "--docs", callback=int_range(1), help="Unique bundled sentences ingested."),
    store: list[str] = typer.Option([], "--store", help="Store (repeatable; 'default': the default recipe) [default: qdrant-edge, hnsw, faiss]."),
    reducer: str = typer.Option("pca:96", "--reducer", help="Reducer (ignored by the store 'default')."),
    encoder_threads: list[int] = typer.Option([], "--encoder-threads", callback=int_range(1), help="Torch threads of the encoder-only ceiling runs (repeatable) [default: 1 and every core]."),
    no_encoder: bool = typer.Option(False, "--no-encoder", help="Measure the ingest without the model call instead: vectors looked up from a precomputed matrix behind the encoder's interface, texts from --corpus, per store (default, faiss, hnsw, qdrant-edge) and --threads."),
    corpus: Path = typer.Option(REAL_CORPUS, "--corpus", help="With --no-encoder: JSONL texts (python scripts/make_real_corpus.py)."),
    threads: list[int] = typer.Option([], "--threads", callback=int_range(1), help="With --no-encoder: cores (affinity, OpenMP and torch threads) per run (repeatable) [default: 1 and 2]."),
    out: Path | None = OUT, markdown: Path | None = MARKDOWN,
) -> None:
    """Each store's ingest against the best encoder-only run of the same texts, re-run before it;
    with --no-encoder, the ingest's docs/s with the model call removed."""
    from slimvec.benchmarks.kinds.corpora import pair_sentences
    from slimvec.benchmarks.kinds.ingest import ceiling_markdown, measure_ceiling

    machine = _machine()
    if no_encoder:
        from slimvec.benchmarks.kinds.ingest import measure_pipeline, pipeline_markdown

        result = measure_pipeline(corpus, docs, store or ["default", "faiss", "hnsw", "qdrant-edge"],
                                  threads or [1, 2], reducer)
        if markdown:
            markdown.write_text(pipeline_markdown(result), encoding="utf-8")
        _emit("ingest-pipeline", result, machine, out)
        return
    result = measure_ceiling(pair_sentences(docs), store or ["qdrant-edge", "hnsw", "faiss"], reducer,
                             threads=encoder_threads)
    if markdown:
        markdown.write_text(ceiling_markdown(result), encoding="utf-8")
    _emit("ingest-ceiling", result, machine, out)


@bench_app.command("rebuild")
def rebuild_kind(
    docs: Path = typer.Option(DATA / "sentences.jsonl", "--docs", help="JSONL documents."),
    old: str = typer.Option("pca:96|qdrant-edge|rescore=auto,keep_full=float16", "--old", help="Recipe of the index to change."),
    new: str = typer.Option("pca:128|faiss:HNSW32|rescore=auto,keep_full=float16", "--new", help="Recipe to rebuild into."),
    out: Path | None = OUT,
) -> None:
    """Wall time of `slimvec rebuild` against re-ingesting the same texts (whole commands)."""
    from slimvec.benchmarks.kinds.lifecycle import measure_rebuild

    machine = _machine()
    _emit("rebuild", measure_rebuild(docs, old, new), machine, out)


@bench_app.command("sync")
def sync_kind(
    corpus: Path = typer.Option(REAL_CORPUS, "--corpus",
                                help="JSONL corpus (python scripts/make_real_corpus.py)."),
    n: int = typer.Option(5000, "--n", callback=int_range(100), help="Rows of v1 (1 % changed, removed, added in v2)."),
    recipe: str | None = typer.Option(None, "--recipe", help="Recipe [default: ingest's default]."),
    out: Path | None = OUT,
) -> None:
    """`slimvec ingest --sync` of a 1 %-changed source against a full re-ingest (whole commands)."""
    from slimvec.benchmarks.kinds.lifecycle import measure_sync

    machine = _machine()
    _emit("sync", measure_sync(corpus, n, recipe), machine, out)


@bench_app.command("service")
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
    from slimvec.benchmarks.kinds.service import measure_service

    machine = _machine()
    _emit("service", measure_service(docs, fit, batch, clients, seconds, big, reducer, recipe), machine, out)


@bench_app.command("qdrant-compat")
def qdrant_compat_kind(
    n: int = typer.Option(5000, "--n", callback=int_range(1), help="Points loaded."),
    queries: int = typer.Option(200, "--queries", callback=int_range(1), help="Queries timed."),
    out: Path | None = OUT,
) -> None:
    """RSS and p50 of the Qdrant-compatible API through qdrant-client (local mode as reference)."""
    from slimvec.benchmarks.kinds.service import measure_qdrant_compat

    machine = _machine()
    _emit("qdrant-compat", measure_qdrant_compat(n, queries), machine, out)


@bench_app.command("sizing")
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
    from slimvec.benchmarks.kinds.record import command_line
    from slimvec.benchmarks.kinds.sizing_page import SIZES, SIZING_STORES, measure_sizing, sizing_markdown

    if ram_size and len(ram_size) != 2:
        raise ConfigError(f"--ram-size takes two sizes (given twice), got {len(ram_size)}: {ram_size}.")
    machine = _machine()
    result = measure_sizing(store or list(SIZING_STORES), big, None if no_ram else (ram_size or [5000, 20000]),
                            size or list(SIZES), dim or [64, 384])
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(sizing_markdown(result, "OMP_NUM_THREADS=1 " + command_line()), encoding="utf-8")
    _emit("sizing", result, machine, out)


@bench_app.command("scaleout")
def scaleout_kind(
    docs: int = typer.Option(20000, "--docs", callback=int_range(1), help="Bundled sentences ingested per run."),
    work: Path = typer.Option(Path("out/scaleout"), "--work", help="Folder of the corpus and the indexes."),
    run: list[str] = typer.Option([], "--run", help="'local' or 'rayW' (repeatable) [default: local, ray2, ray1]."),
    out: Path | None = OUT,
) -> None:
    """The Ray engine (--engine ray --workers W) against one `slimvec ingest` process."""
    from slimvec.benchmarks.kinds.scaleout import measure_scaleout

    machine = _machine()
    _emit("scaleout", measure_scaleout(docs, work, run or ["local", "ray2", "ray1"]), machine, out)


from slimvec.cli.bench_more import register as _register_more  # noqa: E402  # the remaining sub-commands

_register_more(bench_app)
