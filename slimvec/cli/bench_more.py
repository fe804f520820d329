"""``slimvec bench pruning``, ``table KIND``, ``vectors KIND``, ``search-profile`` and ``default-recipe``
(sub-commands of the ``bench`` group in :mod:`slimvec.cli.bench_kinds`)."""

from __future__ import annotations

from pathlib import Path

import typer

from slimvec.cli.checks import int_range
from slimvec.errors import ConfigError

__all__ = ["register", "pruning_kind", "table_kind", "vectors_kind", "search_profile_kind",
           "default_recipe_kind"]

#: the checkout (paths on generated pages are shown relative to it)
ROOT = Path(__file__).resolve().parents[2]


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
    from slimvec.benchmarks.kinds.pruning import measure_pruning
    from slimvec.benchmarks.kinds.record import MachineFacts, Record, write_record

    if structures not in ("joint", "heads", "neurons"):
        raise ConfigError(f"--structures must be joint, heads or neurons, got {structures!r}.")
    machine = MachineFacts()
    result = measure_pruning(sparsity or [0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5], structures, rewind_steps, score_sentences,
                             threads, throughput_sentences, rounds, batch_size, seed, eval_pairs, rewind_sentences)
    typer.echo(write_record(Record("pruning", result, machine), out))


def table_kind(
    kind: str = typer.Argument(..., help="sweep, pruning, filtered, fair-peers, scale, headline or default-recipe."),
    results: list[Path] = typer.Argument(None, help="results.json / record files (scale: the folder of scale-SIZE/) [default: the kind's published results]."),
    out: Path | None = typer.Option(None, "--out", help="Write the page here [default: the kind's docs page, or print]."),
    print_only: bool = typer.Option(False, "--print", help="Print, do not write the default page."),
) -> None:
    """Render a docs page or table from runs' results (nothing typed by hand)."""
    from slimvec.benchmarks.kinds.tables import TABLES, render_table

    text = render_table(kind, list(results or []), ROOT)
    default_page = TABLES[kind][2]
    page = out or (None if print_only or default_page is None else ROOT / default_page)
    if page is None:
        typer.echo(text)
        return
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {page}")


def vectors_kind(
    kind: str = typer.Argument(..., help="fair-peers or filtered."),
    npy: Path = typer.Argument(..., help="The .npy file to write."),
) -> None:
    """Write the vector corpus a suite reads (fair-peers: encodes what no cache holds; filtered: caches only)."""
    from slimvec.benchmarks.kinds.corpora import VECTOR_KINDS

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
    out: Path | None = typer.Option(None, "--out", help="Write the comparison as JSON here."),
) -> None:
    """Where the default recipe's single-query search spends its time; before / after a commit."""
    from slimvec.benchmarks.kinds.search_profile import main

    argv = ["--data", str(data), "--queries", str(queries), "--n", str(n), "--n-queries", str(n_queries)]
    for flag, value in (("--work", work), ("--before", before), ("--before-index", before_index),
                        ("--before-depth", before_depth), ("--out", out)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--breakdown"] * breakdown + ["--pool"] * pool
    main(argv)


def default_recipe_kind(
    data: Path = typer.Option(ROOT / "bench-data" / "realtext-minilm-300k.npy", "--data", help="Corpus vectors (.npy, rows in a seeded random order)."),
    queries: Path = typer.Option(ROOT / "bench-data" / "realtext-minilm-queries.npy", "--queries", help="Held-out query vectors (.npy)."),
    n: list[int] = typer.Option([], "--n", callback=int_range(1), help="Corpus size, a prefix of --data (repeatable) [default: 20000, 100000, 300000]."),
    candidate: list[str] = typer.Option([], "--candidate", help="Recipe compared with full HNSW (repeatable) [default: slimvec.benchmarks.kinds.recipe_choice.CANDIDATES]."),
    n_queries: int = typer.Option(1000, "--n-queries", callback=int_range(1), help="Held-out queries used."),
    rounds: int = typer.Option(2, "--rounds", callback=int_range(1), help="Latency rounds; the order reverses each round."),
    work: Path = typer.Option(ROOT / "bench-out" / "default-recipe", "--work", help="Where prefixes and indexes are kept (reused)."),
    out: Path | None = typer.Option(None, "--out", help="Write the JSON record here."),
    page: Path | None = typer.Option(None, "--page", help="Also write the tables as Markdown here."),
) -> None:
    """Candidate recipes against full-precision HNSW by corpus size: recall, p50, serving RAM, disk."""
    from slimvec.benchmarks.kinds.recipe_choice import CANDIDATES, ChoiceConfig, choice_markdown, measure_choice
    from slimvec.benchmarks.kinds.record import MachineFacts, Record, write_record

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


def register(app: typer.Typer) -> None:
    """Add these sub-commands to the ``bench`` group."""
    app.command("pruning")(pruning_kind)
    app.command("table")(table_kind)
    app.command("vectors")(vectors_kind)
    app.command("search-profile")(search_profile_kind)
    app.command("default-recipe")(default_recipe_kind)
