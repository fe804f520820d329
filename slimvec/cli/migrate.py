"""``slimvec migrate``: an existing Qdrant / Qdrant Edge / FAISS / hnswlib / .npy / Parquet
collection into a reduced slimvec index (no text, no encoder)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from slimvec.buildspec import DEFAULTS, default_recipe
from slimvec.cli.checks import check_positive, interrupt_message

__all__ = ["migrate", "export"]

console = Console(stderr=True)


def migrate(
    source: str = typer.Option(..., "--from", help="qdrant:URL/COLLECTION, qdrant:PATH/COLLECTION, "
                               "qdrant-edge:PATH, faiss:FILE, hnsw:FILE,dim=384,space=cosine, "
                               "FILE.npy (id = row) or parquet:FILE,id=id,vector=vector."),
    index: Path = typer.Option(..., "--index", help="Index folder (created on first use)."),
    reducer: str | None = typer.Option(None, help=f"Reducer spec for a new index [default: the default recipe {default_recipe()} when none of --reducer, --store, --keep-full, --recipe is given; else {DEFAULTS['reducer']}]."),
    store: str | None = typer.Option(None, help=f"Store spec for a new index [default: the default recipe's {DEFAULTS['recipe_store']} when none of --reducer, --store, --keep-full, --recipe is given; else {DEFAULTS['store']} (full precision: no full vectors are kept to re-rank from)]."),
    fit_sample: int = typer.Option(10_000, help="Vectors sampled uniformly to fit the reducer."),
    keep_full: bool = typer.Option(False, "--keep-full", help="Also keep the original vectors on disk "
                                   "(memory-mapped) for search(..., rescore=R)."),
    full_dtype: str = typer.Option("float16", help="Precision of the kept full vectors: float16 (the default recipe's, and a recipe's keep_full default when it rescores: half the disk, recall within 0.001) or float32."),
    batch_size: int = typer.Option(1024, help="Vectors per batch."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first bad vector instead of recording it in rejects.jsonl."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Delete the index in --index and build it anew."),
    checkpoint_seconds: float = typer.Option(30.0, help="Commit (store flushed, progress recorded) at least this often."),
    checkpoint_batches: int = typer.Option(0, help="Also commit every N batches (0: by time only)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    encoder: str | None = typer.Option(None, "--encoder", help="The model that made the source's vectors (spec or local folder), recorded so the index is searched with texts too; its output dimension must be the vectors'. Without it, search with query vectors (slimvec search --vectors FILE)."),
    recipe: str | None = typer.Option(None, "--recipe", help="A recipe string REDUCER|STORE[|rescore=R|auto,target=0.99,keep_full=float16|float32 (default float16)] or a recipe JSON file (slimvec tune): reducer, store, kept full vectors and the rescoring depth searches use; see docs/recipes.md."),
    metric: str | None = typer.Option(None, "--metric", help="What the index compares vectors by: cosine, ip (inner product) or l2 [default: what the source records (hnswlib space, FAISS metric, Qdrant distance; an inner-product source of unit vectors: cosine), else cosine]. For l2 the reducer must not normalise (pca:96,normalize=false), for ip it must be linear without offset (pca:96,center=false,normalize=false); the default reducer follows the metric."),
) -> None:
    """Fit a reducer on a sample of an existing collection and stream every vector into a new index.

    Ids and payloads are kept. Resumable: rerunning the same command after Ctrl-C, a crash or
    kill -9 continues after the last committed batch. Search the result with query vectors from
    the original encoder: slimvec.open(INDEX).search(vectors, k, rescore=R).
    """
    from slimvec.migrate import MigrateOptions
    from slimvec.migrate import migrate as run_migrate

    opts = MigrateOptions(reducer=reducer, store=store, keep_full=full_dtype if keep_full else None,
                          fit_sample=fit_sample, batch_size=batch_size, progress=not json_out,
                          strict=strict, rebuild=rebuild, checkpoint_seconds=checkpoint_seconds,
                          checkpoint_batches=checkpoint_batches, recipe=recipe, encoder=encoder,
                          metric=metric)
    check_positive("--fit-sample", fit_sample)
    check_positive("--batch-size", batch_size)
    with interrupt_message(index, f"slimvec migrate --from {source} --index {index}"):
        summary = run_migrate(source, index, opts, notify=lambda msg: console.print(msg))
    if json_out:
        typer.echo(json.dumps(summary.to_json(), indent=2))
    if summary.interrupted:
        console.print(f"[bold yellow]interrupted[/]: committed up to vector {summary.next_row:,} of "
                      f"{source}. Resume with the same command.")
        raise typer.Exit(130)
    if json_out or summary.already_done:
        return
    console.print(f"migrated [bold]{summary.ingested:,}[/] vectors ({summary.rejected:,} rejected) "
                  f"into {index} — {summary.count:,} in the index, "
                  f"{summary.docs_per_s:,.0f} vectors/s")


def export(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    format: str = typer.Option(..., "--format", help="npy, faiss (a complete index: the reducer in front of the index's vectors and ids), faiss-transform (the reducer alone, an empty index) or sentence-transformers; with --vectors: npy or parquet."),
    out: Path = typer.Option(..., "--out", help="Output folder (npy, sentence-transformers) or file (faiss, faiss-transform, parquet)."),
    model: str | None = typer.Option(None, help="Encoder for sentence-transformers [default: the index's]."),
    vectors: bool = typer.Option(False, "--vectors", help="Export the full vectors the index kept, with your ids, instead of the reducer: npy writes OUT/vectors.npy (float32) and OUT/ids.json; parquet writes OUT with columns id and vector (needs pyarrow). Deleted documents are left out; nothing is re-encoded."),
) -> None:
    """Export the index's (linear) reducer to reduce queries outside slimvec, or with --vectors
    the full vectors it kept (to bench or tune on your own corpus without re-encoding)."""
    if vectors:
        from slimvec.migrate.export import export_vectors

        path, n = export_vectors(index, format, out)
        console.print(f"wrote {n:,} kept full vectors of {index} with their ids to {path} ({format})")
        return
    from slimvec.migrate.export import export_reducer

    path = export_reducer(index, format, out, model)
    console.print(f"wrote {format} export of {index} to {path}")
