"""``slimvec rebuild``: change an index's recipe from its kept full vectors, without re-embedding."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from slimvec.cli.checks import check_positive

__all__ = ["rebuild"]

console = Console(stderr=True)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n}"


def rebuild(
    index: Path = typer.Option(..., "--index", help="Index folder that keeps its full vectors (keep_full in its recipe, or --keep-full)."),
    recipe: str = typer.Option(..., "--recipe", help="The new recipe REDUCER|STORE[|rescore=R|auto,keep_full=float16|float32] or a recipe JSON file (slimvec tune); the reducer may be none (the full vectors as they are) and the store stage may change too (qdrant-edge -> faiss:HNSW32). Without keep_full the index's own precision is kept (the default recipe's is float16), so a rebuild never grows the side file unasked."),
    sample: int = typer.Option(10_000, "--sample", help="Kept vectors sampled uniformly to fit the new reducer."),
    batch_size: int = typer.Option(2048, help="Vectors re-reduced and written per batch."),
    checkpoint_seconds: float = typer.Option(30.0, help="Commit at least this often (a killed rebuild resumes from the last commit)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Rebuild an index with a new recipe from its kept full vectors: no text is re-encoded.

    The new reducer is fitted on a sample of the kept full vectors, every vector re-reduced into a
    new index beside the old one (same ids and payloads), then the two are swapped atomically;
    searches answer from the old index until the swap. Rerun the same command after a crash or
    kill -9: it resumes the build or finishes the swap.
    """
    from slimvec.ops.rebuild import RebuildInterrupted
    from slimvec.ops.rebuild import rebuild as run_rebuild

    check_positive("--sample", sample)
    check_positive("--batch-size", batch_size)
    try:
        summary = run_rebuild(index, recipe, sample=sample, batch_size=batch_size,
                              progress=not json_out, checkpoint_seconds=checkpoint_seconds,
                              notify=lambda msg: console.print(msg))
    except RebuildInterrupted as exc:
        console.print(f"[bold yellow]interrupted[/]: {exc}")
        raise typer.Exit(130) from None
    if json_out:
        typer.echo(json.dumps(summary.to_json(), indent=2))
        return
    console.print(
        f"rebuilt [bold]{index}[/]: {summary.documents:,} documents, {summary.old_recipe or '?'} "
        f"-> {summary.new_recipe}; {_size(summary.bytes_before)} -> {_size(summary.bytes_after)}; "
        f"{summary.seconds:,.1f} s (fit {summary.fit_seconds:,.1f} s), no text re-encoded"
        + (f"; rescoring depth {summary.rescore_depth}" if summary.rescore_depth else "")
        + ("" if summary.old_removed else "; the old index stays beside it while a reader has "
           "it open (the next rebuild removes it)"))
