"""``slimvec ingest``, ``slimvec search``, ``slimvec info`` and ``slimvec calibrate``."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from slimvec.buildspec import DEFAULTS, default_recipe
from slimvec.cli.checks import check_positive, int_range, interrupt_message, number_range, rerun_command
from slimvec.errors import ConfigError

__all__ = ["ingest", "search", "info", "calibrate"]

console = Console(stderr=True)


def ingest(
    ctx: typer.Context,
    input: Path = typer.Argument(..., help="JSONL, CSV, TSV, Parquet or text file (one document per line)."),
    index: Path = typer.Option(..., "--index", help="Index folder (created on first use)."),
    reducer: str | None = typer.Option(None, help=f"Reducer spec for a new index [default: the default recipe {default_recipe()} when none of --reducer, --store, --keep-full, --recipe is given; else {DEFAULTS['reducer']}]."),
    store: str | None = typer.Option(None, help=f"Store spec for a new index [default: the default recipe's {DEFAULTS['recipe_store']} when none of --reducer, --store, --keep-full, --recipe is given; else {DEFAULTS['store']} (full precision: no full vectors are kept to re-rank from)]."),
    encoder: str | None = typer.Option(None, help="Encoder: 'minilm' or a model folder [default: minilm]."),
    text_column: str = typer.Option("text", help="Column / key holding the text."),
    id_column: str | None = typer.Option(None, help="Column / key holding the id [default: 'id' if present, else a hash of the text]."),
    format: str | None = typer.Option(None, "--format", help="jsonl, csv, tsv, parquet or text [default: from the suffix]."),
    quoting: str | None = typer.Option(None, "--quoting", help="TSV only: 'csv' reads quoted fields, which may span lines. Default: IANA TSV, where quotes are ordinary characters."),
    fit_sample: int = typer.Option(10_000, callback=int_range(1), help="Reservoir sample size the reducer is fitted on."),
    batch_size: int = typer.Option(256, callback=int_range(1), help="Documents per batch."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first bad row instead of recording it in rejects.jsonl."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Delete the index in --index and build it anew (to change reducer, store or encoder, or drop an unfinished ingest)."),
    checkpoint_seconds: float = typer.Option(30.0, callback=number_range(0), help="Commit (store flushed, progress recorded) at least this often."),
    checkpoint_batches: int = typer.Option(0, callback=int_range(0), help="Also commit every N batches (0: by time only)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    keep_full: bool = typer.Option(False, "--keep-full", help="Also keep the full encoder vectors on disk (new index) for search --rescore."),
    full_dtype: str = typer.Option("float16", help="Precision of the kept full vectors: float16 (the default recipe's, and a recipe's keep_full default when it rescores: half the disk, recall within 0.001) or float32."),
    train_pairs: Path | None = typer.Option(None, "--train-pairs", help="Pairs TSV (sentence1, sentence2, score) a pair-learning reducer (mcr2) is also fitted on (new index)."),
    engine: str = typer.Option("local", "--engine", help="local (one process) or ray (Ray Data: INPUT may be a folder or a quoted glob; needs slimvec[ray])."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="--engine ray: 'auto' or HOST:PORT of a running cluster [default: a local runtime]."),
    workers: int = typer.Option(2, "--workers", callback=int_range(1), help="--engine ray: encoder actors."),
    gpus_per_worker: float = typer.Option(0.0, "--gpus-per-worker", help="--engine ray: GPUs per encoder actor."),
    segment_docs: int = typer.Option(65_536, "--segment-docs", callback=int_range(1), help="--engine ray into a FAISS store: documents per segment, each written and its graph built by a Ray task on a worker (at most --workers at once) and adopted whole by the driver; also the commit step."),
    threads: int | None = typer.Option(None, "--threads", help="Torch CPU threads of the encoder [default: the cores the 1-minute load average leaves free, at least 1: on two idle cores 2 threads encoded 1.6x faster than 1, on two busy ones 3x slower]."),
    recipe: str | None = typer.Option(None, "--recipe", help=f"A recipe string REDUCER|STORE[|rescore=R|auto,target=0.99,keep_full=float32] or a recipe JSON file (slimvec tune): reducer, store, kept full vectors and the rescoring depth searches use; 'none': no recipe (the --reducer / --store given, else {DEFAULTS['reducer']} in {DEFAULTS['store']}, no rescoring); see docs/recipes.md."),
    payload_index: list[str] | None = typer.Option(None, "--payload-index", help="FIELD:keyword|integer|float|bool|datetime, repeatable: payload fields that filters use, recorded in the manifest and indexed by Qdrant stores (search --filter)."),
    sync: bool = typer.Option(False, "--sync", help="Make the index equal to INPUT (the whole current corpus): unchanged documents are not re-encoded, changed ones are, and documents whose id is no longer in INPUT are deleted once everything new is committed. Documents ingested from other files into this index are deleted too."),
    force: bool = typer.Option(False, "--force", help="--sync: delete the documents that left INPUT even when INPUT had unreadable rows or no document."),
    device: str = typer.Option("auto", "--device", help="Torch device of the encoder: auto (cuda when available, else cpu), cpu, cuda, cuda:1, ..."),
    encode_batch: int | None = typer.Option(None, "--encode-batch", callback=int_range(1), help="Texts per forward pass of the encoder [default: 32 on a CPU, 256 on CUDA]."),
    doc_prefix: str | None = typer.Option(None, "--doc-prefix", help="Text put before every document before it is encoded, as the model expects (E5: 'passage: '); new index: saved with it and used by every later ingest, sync and service write [default: the index's, else none]."),
    query_prefix: str | None = typer.Option(None, "--query-prefix", help="Text put before every query before it is encoded (E5: 'query: ', BGE: its query instruction); new index: saved with it and used by every search (CLI, Python, HTTP) [default: the index's, else none]."),
) -> None:
    """Stream INPUT through the encoder and a fitted reducer into the index's store.

    Resumable: rerunning the same command after Ctrl-C, a crash or kill -9 continues after the
    last committed batch.
    """
    check_positive("--fit-sample", fit_sample)
    check_positive("--batch-size", batch_size)
    _check_columns(input, text_column, id_column, format, quoting, engine)
    from slimvec.buildspec import parse_payload_indexes
    from slimvec.indexer.pipeline import IngestOptions
    from slimvec.indexer.pipeline import ingest as run_ingest

    opts = IngestOptions(reducer=reducer, store=store, encoder=encoder, text_column=text_column,
                         id_column=id_column, format=format, quoting=quoting, fit_sample=fit_sample,
                         batch_size=batch_size, progress=not json_out, strict=strict,
                         rebuild=rebuild, checkpoint_seconds=checkpoint_seconds,
                         checkpoint_batches=checkpoint_batches,
                         keep_full=full_dtype if keep_full else None,
                         train_pairs=str(train_pairs) if train_pairs else None,
                         recipe=recipe, threads=threads, sync=sync, force=force, device=device,
                         encode_batch=encode_batch,
                         encoding={"doc_prefix": doc_prefix, "query_prefix": query_prefix},
                         payload_index=parse_payload_indexes(payload_index))  # before any encoding
    if force and not sync:
        raise ConfigError("--force only applies to --sync (it lets a sync delete documents after "
                          "a source read with errors); add --sync or drop --force.")
    if sync and engine != "local":
        raise ConfigError(f"--sync runs in one process; drop --engine {engine} (a sync encodes "
                          "only the documents that changed).")
    if threads is not None:
        check_positive("--threads", threads)
    again = rerun_command(ctx, drop=("rebuild",))  # a resume must not delete what was committed
    with interrupt_message(index, again):
        if engine == "ray":
            from slimvec.engines.ray_ingest import RayOptions, ray_ingest

            # Ray prints the cluster's error messages (a node lost, a task retried) to stdout:
            # with --json, stdout holds the summary only, so they go to stderr for the run
            with contextlib.redirect_stdout(sys.stderr) if json_out else contextlib.nullcontext():
                summary = ray_ingest(str(input), index, opts,
                                     RayOptions(ray_address, workers, gpus_per_worker,
                                                segment_docs=segment_docs),
                                     notify=lambda msg: console.print(msg))
        elif engine == "local":
            from slimvec.ops.sync import sync as run_sync

            summary = (run_sync if sync else run_ingest)(input, index, opts,
                                                         notify=lambda msg: console.print(msg))
        else:
            raise ConfigError(f"--engine {engine!r}: expected 'local' or 'ray'.")
    if json_out:
        typer.echo(json.dumps(summary.to_json(), indent=2))
    if summary.interrupted:
        console.print(
            f"[bold yellow]interrupted[/]: committed up to row {summary.next_row:,} of {input} "
            f"({summary.count:,} documents in the index). Resume with the same command: "
            f"{escape(again)}", soft_wrap=True, highlight=False,  # one line to paste
        )
        raise typer.Exit(130)
    if json_out or summary.already_done:
        return
    if getattr(summary, "sync", False):
        _print_sync(summary, index)
        return
    console.print(
        f"[bold green]done[/]: {summary.ingested:,} documents ingested, {summary.rejected:,} rejected "
        f"(see {index / 'rejects.jsonl'}), {summary.count:,} in the index; "
        f"{summary.docs_per_s:,.0f} docs/s."
    )
    if summary.recipe:
        console.print(f"  recipe: {summary.recipe} (slimvec info --index {index}: what it saved)",
                      markup=False)
    for reason, n in sorted(summary.reject_reasons.items(), key=lambda kv: -kv[1]):
        console.print(f"  rejected {n:,}: {reason}")
    if summary.warnings:
        console.print(f"  [yellow]warning[/]: {summary.warnings:,} row(s) kept with a warning "
                      f"({'; '.join(sorted(summary.warning_reasons)[:3])}; listed in rejects.jsonl)")
    if summary.truncated:
        console.print(f"  [yellow]warning[/]: {summary.truncated:,} text(s) longer than the model's "
                      "maximum were truncated by the tokenizer (listed in rejects.jsonl, kept)")
    if summary.duplicates:
        console.print(f"  [yellow]warning[/]: {summary.duplicates:,} row(s) reused an earlier id with "
                      "different text; the last one won (listed in rejects.jsonl)")


def _check_columns(input: Path, text_column: str, id_column: str | None, format: str | None,
                   quoting: str | None, engine: str) -> None:
    """Read INPUT's first record before anything heavy is imported (scikit-learn, torch, the
    model): a missing --text-column / --id-column is reported at once (issue 40 item 2)."""
    if engine != "local" or not input.is_file():
        return  # ray reads folders and globs; a missing file is reported by the ingest itself
    from slimvec.sources.readers import SourceSpec, iter_records

    records = iter_records(SourceSpec(str(input), text_column, id_column, format, quoting))
    try:
        next(iter(records), None)
    finally:
        close = getattr(records, "close", None)
        if close is not None:
            close()


def _print_sync(summary: Any, index: Path) -> None:
    """The summary lines of ``ingest --sync``."""
    console.print(
        f"[bold green]synced[/]: {summary.added:,} added, {summary.updated:,} updated, "
        f"{summary.unchanged:,} unchanged (not re-encoded), {summary.deleted:,} deleted, "
        f"{summary.rejected:,} rejected (see {index / 'rejects.jsonl'}); {summary.count:,} in the "
        f"index; {summary.total_seconds:.1f} s.")
    if summary.recorded:
        console.print(f"  recorded {summary.recorded:,} unchanged document(s) that had no sync "
                      "record yet (checked against their stored payload, not encoded)")
    if summary.not_deleted:
        console.print(f"  [yellow]warning[/]: {summary.not_deleted:,} document(s) no longer in the "
                      "source were NOT deleted (see the message above; --force deletes them)")
    for reason, n in sorted(summary.reject_reasons.items(), key=lambda kv: -kv[1]):
        console.print(f"  rejected {n:,}: {reason}")


def search(
    query: list[str] | None = typer.Argument(None, help="Query text(s)."),
    index: Path = typer.Option(..., "--index", help="Index folder."),
    vectors: Path | None = typer.Option(None, "--vectors", help="Query vectors instead of texts: .npy (n, dim) or JSONL (one [0.1, ...] or {\"vector\": [...]} per line), from the index's original encoder (a migrated index without --encoder is searched this way)."),
    k: int = typer.Option(10, "-k", help="Results per query."),
    json_out: bool = typer.Option(False, "--json", help="Print results as JSON: per query the hits (id: your id, as the table shows it; store_id: the store's integer id; score, text and the other payload fields), the space the scores were computed in, the rescoring depth used and timings."),
    rescore: int | None = typer.Option(None, "--rescore", help="Re-rank k x R candidates with the full vectors kept on disk; 0: no re-ranking (scores then come from the reduced vectors) [default: the depth recorded by the index's recipe (slimvec info shows it as xR), else 0]."),
    trust_store: str | None = typer.Option(None, "--trust-store", help="Open an index whose store lies outside its folder (qdrant:URL, qdrant-edge:PATH): give that store's spec or location; a location written in an index folder is never contacted otherwise."),
    recipe: str | None = typer.Option(None, "--recipe", help="Search as this recipe (string or tuned.json) does: its reducer and store must be the index's; its rescoring depth is used (auto: the depth the index calibrated; no rescore option: no re-ranking). 'none': no re-ranking, like --rescore 0. Not with --rescore."),
    filter_json: str | None = typer.Option(None, "--filter", help="Only documents whose payload matches this Qdrant filter JSON, e.g. '{\"must\": [{\"key\": \"lang\", \"match\": {\"value\": \"en\"}}]}' (must / should / must_not, match value / any / except, range, is_null, is_empty, has_id with the ids given at ingest); @FILE reads it from a file."),
    queries_file: Path | None = typer.Option(None, "--queries", help="Search every query of this file with one model load: a text file (one query per line), or JSONL, CSV, TSV or Parquet with a 'text' column."),
) -> None:
    """Search the index with query texts (encoded, then reduced like the documents).

    Each run loads the encoder model (seconds; more on a busy machine). For many queries from the
    shell keep it warm: give them all at once (several QUERY arguments, or --queries FILE), or
    run `slimvec serve` and send searches over HTTP, where the model stays loaded.

    A score is the cosine similarity of query and document (higher is closer) in the space it was
    computed in: the full encoder vectors when the hits were re-ranked (--rescore R, or the
    index's default depth), else the reduced vectors the store holds. Scores of the two spaces are
    not comparable: the same document can score 0.77 re-ranked and 0.89 from a PCA-96 store.
    """
    from slimvec.index.folder import open_index

    check_positive("-k", k)
    if rescore is not None:
        if rescore < 0:
            raise ConfigError(f"--rescore must be 0 (no re-ranking) or a positive depth R (k x R "
                              f"candidates re-ranked with the full vectors), got {rescore}. Omit "
                              "--rescore to use the index's default depth (slimvec info).")
        if recipe is not None:
            raise ConfigError("Give --rescore R or --recipe, not both (the recipe carries its depth).")
    if bool(query) + (vectors is not None) + (queries_file is not None) != 1:
        raise ConfigError("Give query texts, --queries FILE or --vectors FILE (one of them).")
    if queries_file is not None:
        from slimvec.sources.readers import Reject, SourceSpec, iter_records

        query = [r.text for r in iter_records(SourceSpec(str(queries_file)))
                 if not isinstance(r, Reject)]
        if not query:
            raise ConfigError(f"--queries {queries_file}: no usable query text in the file; give "
                              "one query per line (or a 'text' column).")
    with open_index(index, trust_store=trust_store) as idx:
        if recipe is not None:
            rescore = idx.recipe_depth(recipe)  # 'none': 0, no re-ranking
        depth = idx.manifest.rescore.depth if rescore is None and idx.manifest.rescore else rescore
        depth = int(depth or 0)
        space = score_space(idx.manifest, depth)
        given = None
        if vectors is not None:
            from slimvec.migrate.queries import read_query_vectors  # slimvec.migrate: sklearn

            given = read_query_vectors(vectors, idx.dim_in)
            query = [f"{vectors} row {i}" for i in range(len(given))]
        elif not idx.manifest.encoder:
            raise ConfigError(f"{index} was built from vectors and records no encoder: search it "
                              "with --vectors FILE (.npy or JSONL query vectors of the original "
                              "encoder), or migrate with --encoder SPEC to search with texts.")
        t_load = time.perf_counter()
        if given is None:
            idx.encoder  # noqa: B018 - load the model now, so the search time below is the search alone
        load_s = time.perf_counter() - t_load
        t0 = time.perf_counter()
        qvecs = idx.embed(list(query) if given is None else given)
        t1 = time.perf_counter()
        from slimvec.cli.lifecycle import read_filter

        res = idx.search(qvecs, k, rescore=depth, filter=read_filter(filter_json))
        t2 = time.perf_counter()
        timings = {"encode_ms": round((t1 - t0) * 1000, 3),
                   "search_ms": round((t2 - t1) * 1000, 3),
                   "total_ms": round((t2 - t0) * 1000, 3),
                   "queries": len(query), "model_load_s": round(load_s, 3)}
        from slimvec.ids import user_id

        out = []
        for qi, q in enumerate(query):
            ids = [int(i) for i in res.ids[qi] if i >= 0]
            payloads = idx.payloads(ids)
            # "id": the user's id, as the table shows it (SearchResult.source_ids); "store_id": the store's
            hits = [{"id": user_id(i, p), "store_id": i, "score": float(s), "text": (p or {}).get("text"),
                     "payload": {key: v for key, v in (p or {}).items()
                                 if key not in ("text", "source_id")}}
                    for i, s, p in zip(ids, res.scores[qi], payloads)]
            out.append({"query": q, "hits": hits, "score": space, "rescore": depth,
                        "timings_ms": timings, "filter_plan": idx.last_filter_plan})
    if json_out:
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    console.print(f"search: {timings['total_ms']:.1f} ms for {len(query)} "
                  f"quer{'y' if len(query) == 1 else 'ies'}, end to end (encoding "
                  f"{timings['encode_ms']:.1f} ms + reduction, store and re-ranking "
                  f"{timings['search_ms']:.1f} ms); model loading {load_s:.2f} s, not included",
                  markup=False)
    console.print(f"score: {space}", markup=False)
    for item in out:
        table = Table(title=item["query"])
        table.add_column("#", justify="right")
        table.add_column("score", justify="right")
        table.add_column("id")
        table.add_column("text")
        for rank, hit in enumerate(item["hits"], 1):
            table.add_row(str(rank), f"{hit['score']:.4f}", str(hit["id"]), hit["text"] or "")
        Console().print(table)


def score_space(manifest: Any, depth: int) -> str:
    """What a search score is, for ``slimvec search`` (issue 27 item 5): cosine similarity in
    the full encoder space when re-ranked, else in the space the store holds."""
    if depth and manifest.full is not None:
        return (f"cosine similarity of the full {manifest.dim_in}-d encoder vectors "
                f"({manifest.full.dtype}), re-ranked from k x {depth} candidates")
    if manifest.reducer in (None, "none") or manifest.dim_out == manifest.dim_in:
        return (f"cosine similarity of the {manifest.dim_in}-d vectors in the store "
                f"({manifest.store}); no re-ranking")
    return (f"cosine similarity of the reduced {manifest.dim_out}-d vectors ({manifest.reducer}) "
            f"in the store ({manifest.store}); no re-ranking, so not comparable with re-ranked "
            "scores")


def info(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
    trust_store: str | None = typer.Option(None, "--trust-store", help="Open an index whose store lies outside its folder (qdrant:URL, qdrant-edge:PATH): give that store's spec or location; a location written in an index folder is never contacted otherwise."),
) -> None:
    """Document count, dimensions, specs and bytes on disk of an index."""
    from slimvec.index.folder import open_index

    with open_index(index, trust_store=trust_store) as idx:
        data = idx.info()
    if json_out:
        typer.echo(json.dumps(data, indent=2))
        return
    from slimvec.index.saved import saved_lines

    for key, value in data.items():
        typer.echo(f"{key:>14}: {value:,}" if isinstance(value, int) and not isinstance(value, bool)
                   else f"{key:>14}: {value}")
    typer.echo("")
    for line in saved_lines(data):
        typer.echo(line)


def calibrate(
    index: Path = typer.Option(..., "--index", help="Index folder built with a rescore=auto recipe (the default recipe is one)."),
    queries: Path = typer.Option(..., "--queries", help="Your queries: a text file (one per line), JSONL, CSV, TSV or Parquet. A few hundred real ones are enough."),
    text_column: str = typer.Option("text", help="Column / key holding the query text."),
    format: str | None = typer.Option(None, help="jsonl, csv, tsv, parquet or text [default: from the suffix]."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    trust_store: str | None = typer.Option(None, "--trust-store", help="Open an index whose store lies outside its folder (qdrant:URL, qdrant-edge:PATH): give that store's spec or location."),
) -> None:
    """Re-measure the index's rescoring depth (rescore=auto) on your own queries and keep them for later calibrations."""
    from slimvec.index.folder import read_manifest
    from slimvec.ops.recalibrate import calibrate_index, read_query_file

    qf = read_query_file(queries, text_column, format)
    for rej in qf.rejects[:5]:
        console.print(f"  [yellow]skipped[/] {rej.source} row {rej.row}: {rej.field}: {rej.reason}")
    before = read_manifest(index).rescore
    info = calibrate_index(index, qf.texts, trust_store=trust_store,
                           notify=lambda m: console.print(f"  {m}"))
    out = {"index": str(index), "queries": len(qf.texts), "rows": qf.rows,
           "skipped_rows": len(qf.rejects), "depth": info.depth,
           "previous_depth": before.depth if before else None, "recall": info.recall,
           "target": info.target, "k": info.k, "reached": info.reached,
           "n_corpus": info.n_corpus, "status": info.status}
    if json_out:
        typer.echo(json.dumps(out, indent=2))
        return
    was = (f" (was {before.depth}, calibrated on "
           f"{'given queries' if before.queries else 'corpus vectors'})" if before else "")
    console.print(f"[bold]calibrated[/] {index}: rescoring depth {info.depth}{was}; neighbour "
                  f"recall@{info.k} {info.recall:.4f} on {len(qf.texts):,} queries "
                  f"({len(qf.rejects):,} of {qf.rows:,} rows skipped), target {info.target}")
    if not info.reached:
        console.print(f"  [yellow]warning[/]: {info.status}", highlight=False)
