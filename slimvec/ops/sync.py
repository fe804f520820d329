"""``slimvec ingest SRC --index I --sync``: make an index equal to its source, re-encoding only
what changed (the record manager's ``full`` mode of LangChain's ``index()``).

One sync is a new pass over the whole source (never a resume of an earlier run):

1. Each document's content hash (:func:`slimvec.index.records.content_hash` of the payload the
   pipeline stores: text, source id, columns) is compared with the record of its id
   (``records.sqlite``) and with the payload the store holds for it. A document is *unchanged*
   (not encoded, not written) when the store holds it with the same text and either its record
   or its stored payload has the same hash; otherwise it is encoded and upserted (*added* when
   the store had no document of that id, *updated* when it had another version). Checking the
   stored payload too means a record can never hide a document the store lost or that another
   writer changed, and an index built before records existed gets its record from its stored
   payloads, without encoding.
2. Upserted documents are recorded after their batch is written, and the record is committed
   after the store is flushed (:mod:`slimvec.index.records`).
3. Only after the whole source was read and everything new was committed, the documents whose id
   is no longer in the source are deleted (store first, then their records, one commit per
   chunk). A source read with errors (unreadable rows, a truncated last line) or holding no
   document deletes nothing unless ``force``, and says so.

A crash anywhere converges on rerun: committed batches are recorded (skipped as unchanged), the
rest is encoded again, and a delete interrupted between the store and the record is repeated
(deleting an id the store no longer has is a no-op).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.encoder import ingest_encode_batch
from slimvec.errors import ConfigError
from slimvec.ids import doc_ids
from slimvec.index.manifest import MANIFEST, Manifest, Progress
from slimvec.index.records import RECORDS, RecordTable, content_hash, encoder_identity
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.progress import ResumePlan, fingerprint, progress_bar
from slimvec.indexer.writer import IngestSummary, VectorBatch
from slimvec.sources.checks import truncation_rejects
from slimvec.sources.readers import SNIPPET, Document, Reject, SourceSpec, iter_batches, iter_records

__all__ = ["SyncSummary", "sync", "sync_with"]

log = logging.getLogger(__name__)


@dataclass
class SyncSummary(IngestSummary):
    """What one sync did (an :class:`IngestSummary` plus the sync's counts).

    ``added`` / ``updated`` count documents encoded and written (no stored version / another
    stored version), ``unchanged`` documents skipped before the encoder, ``deleted`` documents
    removed because their id left the source, ``recorded`` unchanged documents that had no record
    yet (an index built before records, or a crash between a store flush and its record: checked
    against the stored payload instead of encoded). ``read_errors`` counts source rows that could
    not be read; with any, or with no document in the source, ``not_deleted`` documents that left
    the source were kept (``force`` deletes them).
    """

    sync: bool = True
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    recorded: int = 0
    read_errors: int = 0
    not_deleted: int = 0
    unrecorded: int = 0


def sync(input_path: str | os.PathLike[str], index_dir: str | os.PathLike[str],
         options: Any, *, first_ingest: Callable[..., Any] | None = None, force: bool | None = None,
         notify: Callable[[str], None] | None = None,
         on_batch: Callable[[int], None] | None = None,
         on_delete: Callable[[int], None] | None = None) -> SyncSummary:
    """Make the index in ``index_dir`` equal to the documents of ``input_path``.

    Parameters
    ----------
    input_path : path
        JSONL, CSV, TSV, Parquet or text file: the whole current corpus.
    index_dir : path
        Index folder. Without an index yet (or with ``options.rebuild``) the source is ingested
        first (:func:`slimvec.indexer.pipeline.ingest`) and then recorded.
    options : IngestOptions
        As for :func:`~slimvec.indexer.pipeline.ingest`; ``text_column`` / ``id_column`` must be
        the ones the index was built with (other ids would make every document look new and
        delete the old ones).
    first_ingest : callable, optional
        What builds the index when there is none yet (default
        :func:`slimvec.indexer.pipeline.ingest`).
    force : bool, optional
        Delete the documents that left the source even when the source had unreadable rows or
        no document at all (default ``options.force``).
    notify : callable, optional
        One-line notices for the user; default: log.
    on_batch : callable, optional
        Called with the next source row after each batch was read and handled.
    on_delete : callable, optional
        Called with the number of documents deleted so far after each committed delete chunk.

    Returns
    -------
    SyncSummary

    Raises
    ------
    ConfigError
        Bad input or options, other columns than the index's, an index built from vectors.
    IndexBusyError
        Another process is writing the index.
    """
    opts = options
    force = bool(opts.force) if force is None else force
    if first_ingest is None:
        from slimvec.indexer.pipeline import ingest

        first_ingest = ingest
    folder = Path(index_dir)
    say = notify or log.info
    first: IngestSummary | None = None
    if opts.rebuild or not os.path.lexists(folder / MANIFEST):
        first = first_ingest(input_path, folder, replace(opts, sync=False), notify=say)
        if first.interrupted:
            return SyncSummary(**{**first.__dict__, "added": first.ingested})
        opts = replace(opts, rebuild=False)
    with IndexBuilder(folder, notify=say, strict=opts.strict,
                      checkpoint_seconds=opts.checkpoint_seconds,
                      checkpoint_batches=opts.checkpoint_batches) as b:
        b.summary = SyncSummary(index=str(folder), input=str(input_path))
        summary = _Sync(b, Path(input_path), opts, force, say).run(on_batch, on_delete)
    if first is not None:  # the documents the first ingest wrote were added, not unchanged
        summary.added += first.ingested
        summary.unchanged = max(0, summary.unchanged - first.ingested)
        summary.recorded = max(0, summary.recorded - first.ingested)
        summary.created = first.created
    return summary


def sync_with(builder: Any, input_path: str | os.PathLike[str], options: Any, *,
              force: bool = False, notify: Callable[[str], None] | None = None,
              on_batch: Callable[[int], None] | None = None,
              on_delete: Callable[[int], None] | None = None) -> SyncSummary:
    """One sync pass through a builder its caller owns, over an index that exists (the service's
    sync job lends its writer's: :class:`slimvec.service.indexes.jobwrite.SharedBuilder`); see
    :func:`sync` for the parameters and what is deleted when.

    Returns
    -------
    SyncSummary
    """
    builder.summary = SyncSummary(index=str(builder.folder), input=str(input_path))
    return _Sync(builder, Path(input_path), options, force, notify or log.info).run(on_batch,
                                                                                    on_delete)


class _Sync:
    """One sync pass over a source into an opened builder (see the module docstring)."""

    def __init__(self, b: IndexBuilder, input_path: Path, opts: Any, force: bool,
                 say: Callable[[str], None]) -> None:
        self.b, self.input_path, self.opts, self.force, self.say = b, input_path, opts, force, say
        self.summary: SyncSummary = b.summary  # type: ignore[assignment]
        self._encoder: Any = None
        self._pending: dict[str, list[Any]] = _empty()
        self._next_row = 0

    @property
    def manifest(self) -> Manifest:
        """The opened index's manifest (set by :meth:`IndexBuilder.open` before any batch)."""
        if self.b.manifest is None:
            raise ConfigError(f"{self.b.folder}: the sync's index is not open yet.")
        return self.b.manifest

    # ------------------------------------------------------------------ set-up
    def _open(self) -> SourceSpec:
        b, opts = self.b, self.opts
        old = b.existing
        if old is None:  # sync() ingests first when there is no index yet
            raise ConfigError(f"{b.folder} holds no index to sync; run slimvec ingest first.")
        if old.encoder is None:
            raise ConfigError(f"{b.folder} was built from vectors (slimvec migrate): it records no "
                              "encoder, so it cannot be synced with a text source. Migrate again "
                              "from the changed collection, or ingest the texts into a new index.")
        id_column = opts.id_column if opts.id_column is not None else old.id_column
        for name, asked, built in (("--text-column", opts.text_column, old.text_column),
                                   ("--id-column", id_column, old.id_column)):
            if asked != built:
                raise ConfigError(
                    f"{b.folder} was built reading {name} {built!r}; this sync asks {asked!r}. "
                    "Ids read another way would make every document look new and delete the "
                    f"indexed ones. Pass {name} {built} (or sync into a new --index folder).")
        source = SourceSpec(str(self.input_path), opts.text_column, id_column, opts.format,
                            opts.quoting)
        iter_records(source)  # fail fast on a missing file / unknown format
        from slimvec.recipe import apply_recipe

        opts = apply_recipe(opts)  # a --recipe given is compared with the index's canonically
        spec = b.resolve(IndexSpec.from_options(opts, encoder=opts.encoder or old.encoder,
                                                keep_full=None, text_column=old.text_column,
                                                id_column=old.id_column))
        b.summary.recipe = old.recipe or f"{old.reducer}|{old.store}"
        b.open(replace(spec, encoder_name=old.encoder_name), int(old.dim_in))
        resolved = self.input_path.resolve()
        b.begin(ResumePlan(), Progress(input=str(resolved), fingerprint=fingerprint(resolved),
                                       columns={"text_column": opts.text_column,
                                                "id_column": id_column, "format": opts.format,
                                                "sync": True}))
        self.records = RecordTable(b.folder / RECORDS, encoder_identity(self.manifest))
        if self.records.reset:
            self.say(f"{b.folder / RECORDS} was made with another encoder or id rule: every "
                     "document is checked against its stored payload again")
        b.on_commit = self.records.commit
        self.spec = spec
        return source

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._encoder is None:  # loaded only when something changed
            self._encoder = self.spec.load_encoder(self.opts.device, self.opts.encode_batch
                                                   or ingest_encode_batch(self.opts.device,
                                                                          self.opts.batch_size))
        t0 = time.perf_counter()
        out = self._encoder.encode(texts)
        self.summary.encode_seconds += time.perf_counter() - t0
        return out

    # ------------------------------------------------------------------ the pass
    def run(self, on_batch: Callable[[int], None] | None,
            on_delete: Callable[[int], None] | None) -> SyncSummary:
        from slimvec.encoder import default_encoder_threads, encoder_threads

        source = self._open()
        t0 = time.perf_counter()
        seen_docs = 0
        try:
            with progress_bar(self.opts.progress) as progress, \
                    encoder_threads(self.opts.threads or default_encoder_threads()):
                task = progress.add_task(f"syncing {self.input_path.name}", total=None)
                for docs, rejects, next_row in iter_batches(source, self.opts.batch_size):
                    seen_docs += len(docs)
                    self._classify(docs, rejects, source.path)
                    self._next_row = next_row
                    if len(self._pending["ids"]) + len(self._pending["rejects"]) \
                            >= self.opts.batch_size:
                        self._flush()
                    progress.advance(task, len(docs) + sum(not r.kept for r in rejects))
                    if on_batch is not None:
                        on_batch(next_row)
                self._flush()
                self.b.commit(self._next_row)  # everything new is durable before any delete
                self._delete_gone(seen_docs, on_delete)
                self.b.finish(recalibrate=False)  # the depth holds until the index doubles
        finally:
            self.records.close()
            if self._encoder is not None:
                del self._encoder
        self.summary.rows_read = self._next_row
        self.summary.total_seconds = self.summary.seconds = time.perf_counter() - t0
        return self.summary

    def _classify(self, docs: list[Document], rejects: list[Reject], source: str) -> None:
        from slimvec.sources.readers import stored_payload

        b, s, p = self.b, self.summary, self._pending
        s.read_errors += sum(not r.kept for r in rejects)
        p["rejects"].extend(rejects)
        if not docs:
            return
        ids = doc_ids([d.id for d in docs], self.manifest.id_rule)
        again = self.records.is_seen(ids)
        self.records.see(ids)
        payloads = [stored_payload(d) for d in docs]
        hashes = [content_hash(x) for x in payloads]
        known = self.records.lookup([int(i) for i in ids])
        stored = b.store.get_payloads(ids)
        adopt_ids, adopt_h = [], []
        for i, d in enumerate(docs):
            sid, h, st = int(ids[i]), hashes[i], stored[i]
            if again[i]:
                p["rejects"].append(Reject(
                    source, d.row, d.line, self.opts.id_column or "id",
                    f"duplicate id {d.id!r}: an earlier row of this source has it too; the last "
                    "one is kept (a sync re-encodes both every time)", d.text[:SNIPPET],
                    kept=True))
            if st is not None and st.get("text") == d.text and (
                    known.get(sid) == h or content_hash(st) == h):
                s.unchanged += 1
                if known.get(sid) != h:
                    adopt_ids.append(sid)
                    adopt_h.append(h)
                continue
            if st is None:
                s.added += 1
            else:
                s.updated += 1
            for key, value in (("ids", sid), ("docs", d), ("payloads", payloads[i]),
                               ("hashes", h)):
                p[key].append(value)
        if adopt_ids:  # stored as the source has them: recorded without encoding
            self.records.put(adopt_ids, adopt_h)
            s.recorded += len(adopt_ids)

    def _flush(self) -> None:
        """Encode and write the pending changed documents (and the rows' rejects)."""
        p, b = self._pending, self.b
        if not p["ids"] and not p["rejects"]:
            return
        self._pending = _empty()
        docs: list[Document] = p["docs"]
        rejects = list(p["rejects"])
        if docs:
            vectors = self._encode([d.text for d in docs])
            rejects += truncation_rejects(self._encoder, docs, str(self.input_path),
                                          self.opts.text_column)
        else:
            vectors = np.empty((0, int(self.manifest.dim_in)), dtype=np.float32)
        ids = np.asarray(p["ids"], dtype=np.int64)
        b.write(VectorBatch(ids, vectors, p["payloads"], rejects, self._next_row,
                            rows=[d.row for d in docs], lines=[d.line for d in docs],
                            source=str(self.input_path)))
        if len(ids):  # after the transform and the upsert; durable with the store's flush
            self.records.put(ids.tolist(), p["hashes"])
        if b.due():
            b.commit(self._next_row)

    # ------------------------------------------------------------------ deletes
    def _gone(self) -> np.ndarray:
        """Ids to delete: recorded but unseen, and (when the store can list its ids) stored but
        neither seen nor recorded (ingested before records existed, or by another writer)."""
        gone = self.records.unseen()
        lister = getattr(self.b.store, "ids", None)
        if callable(lister):
            stored = np.asarray(lister(), dtype=np.int64)
            extra = stored[~self.records.is_seen(stored)] if len(stored) else stored
            gone = np.union1d(gone, extra)
        else:
            self.summary.unrecorded = max(0, int(self.b.store.count()) - len(self.records))
        return gone

    def _delete_gone(self, seen_docs: int, on_delete: Callable[[int], None] | None) -> None:
        gone = self._gone()
        s, src = self.summary, self.input_path
        if not len(gone):
            return
        why = (f"{s.read_errors:,} row(s) of {src} could not be read (listed in rejects.jsonl)"
               if s.read_errors else f"{src} holds no document" if not seen_docs else "")
        if why and not self.force:
            s.not_deleted = len(gone)
            self.say(f"not deleting the {len(gone):,} document(s) whose id is no longer in {src}: "
                     f"{why}, so they may only be missing from this read. Fix the source and "
                     "sync again, or pass --force to delete them anyway.")
            return
        if not self._can_delete():
            s.not_deleted = len(gone)
            self.say(f"not deleting the {len(gone):,} document(s) whose id is no longer in {src}: "
                     f"the store of {self.b.folder} ({self.manifest.store}) cannot delete "
                     "documents in this version of slimvec (everything else is synced). Rebuild "
                     "the index from the source (--rebuild) to drop them.")
            return
        self.say(f"deleting {len(gone):,} document(s) whose id is no longer in {src}"
                 + (f" (--force: {why})" if why else ""))
        step = max(1, int(self.opts.batch_size))
        for start in range(0, len(gone), step):
            chunk = gone[start:start + step]
            removed = self._delete(chunk)
            self.records.forget(chunk.tolist())  # committed after the store's flush
            s.deleted += removed
            self.b.commit(self._next_row)
            if on_delete is not None:
                on_delete(s.deleted)

    def _can_delete(self) -> bool:
        return callable(getattr(self.b, "delete", None)) or \
            callable(getattr(self.b.store, "delete", None))

    def _delete(self, ids: np.ndarray) -> int:
        """Delete ids from the store and the kept full vectors (not durable before commit);
        returns how many the store held. A rerun after a kill between the store's commit and
        the record's can find recorded ids the store no longer has: they are not counted."""
        b = self.b
        deleter = getattr(b, "delete", None)
        if callable(deleter):
            return int(deleter(ids) or 0)
        removed = int(b.store.delete(ids) or 0)
        full = getattr(getattr(b, "_target", None), "full", None)
        if full is not None and callable(getattr(full, "delete", None)):
            full.delete(ids)
        return removed


def _empty() -> dict[str, list[Any]]:
    return {"ids": [], "docs": [], "payloads": [], "hashes": [], "rejects": []}
