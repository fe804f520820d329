"""Background ingest and sync jobs: a file on the server, ingested (or synced) as ``slimvec
ingest [--sync]`` does.

Into a served index, a job writes through the index's one writer
(:meth:`~slimvec.service.indexes.writer.IndexWriter.run_job`, :class:`~slimvec.service.indexes.jobwrite.SharedBuilder`):
the index stays open and searches answer all along, on every store (Qdrant Edge cannot be opened
twice: a second builder on its folder made its searches answer 409 for the whole job). Writes
meanwhile answer 409. A job that creates its index, or fills one still collecting its fit
sample, builds it with :func:`slimvec.indexer.pipeline.ingest` while the index is suspended.

Each job is recorded in ``ROOT/.jobs/ID.json``: ``state``, ``phase`` (``queued``, ``preparing``,
``writing`` / ``syncing``, ``committing``, ``deleting``, ``finishing``, ``done``), ``rows`` (source
rows read), ``committed_rows`` (durable), ``ingested``, ``rejected``, docs/s, and for a sync its
``summary`` (added / updated / unchanged / deleted). A job still ``running`` when the server stops
(SIGTERM, crash, kill -9) is run again at the next start: an ingest resumes after its last commit
exactly as a rerun CLI command does, a sync makes a new pass (it converges).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError, SlimvecError
from slimvec.index.manifest import MANIFEST
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.persistence import read_json, write_json_atomic
from slimvec.service.indexes.registry import PENDING_DIR, ConflictError, NotFound, Registry

__all__ = ["Jobs", "JOBS_DIR"]

log = logging.getLogger(__name__)
JOBS_DIR = ".jobs"


class _Stopped(Exception):
    """Raised from the batch hook to leave a job at its last commit on shutdown."""


class Jobs:
    """Runs and records ingest jobs."""

    def __init__(self, root: Path, registry: Registry, allow_dirs: list[Path],
                 checkpoint_seconds: float) -> None:
        self.dir = root / JOBS_DIR
        self.registry, self.checkpoint_seconds = registry, checkpoint_seconds
        self.allow = [Path(d).resolve() for d in allow_dirs]
        self._threads: dict[str, threading.Thread] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def check_path(self, path: str) -> Path:
        """The resolved file if it lies under an allowed folder, else :class:`ConfigError`."""
        if not self.allow:
            raise PermissionError("Jobs are disabled: start the server with --allow-dir DIR to let "
                                  "jobs read files under DIR.")
        real = Path(path).resolve()
        if not any(real.is_relative_to(d) for d in self.allow):
            raise PermissionError(f"{path} is not under an allowed folder "
                                  f"({', '.join(map(str, self.allow))}).")
        if not real.is_file():
            raise ConfigError(f"{path}: no such file under the allowed folders.")
        return real

    def pending_names(self) -> set[str]:
        """Indexes a job to resume builds (left out of the registry's first open): no index yet,
        or one still collecting its fit sample. A job into a built index is resumed through
        its writer, so that index is served from the start."""
        root = self.registry.root
        return {rec["index"] for rec in self._records() if rec["state"] in ("queued", "running")
                and (not (root / rec["index"] / MANIFEST).exists()
                     or (root / PENDING_DIR / rec["index"]).exists())}

    def _records(self) -> list[dict[str, Any]]:
        if not self.dir.is_dir():
            return []
        return [read_json(p) for p in sorted(self.dir.glob("*.json"))]

    def get(self, job_id: str) -> dict[str, Any] | None:
        """The record of a job."""
        if not job_id.isalnum():
            return None
        path = self.dir / f"{job_id}.json"
        return read_json(path) if path.is_file() else None

    def submit(self, name: str, path: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Start a job ingesting (``sync``: syncing) ``path`` into index ``name`` with the options
        ``fields`` (:class:`~slimvec.indexer.pipeline.IngestOptions`'s); returns its record."""
        real, options = self.check_path(path), IngestOptions(**fields)
        spec = self.registry.pending_spec(name)
        if spec is not None:
            options = _pending_options(options, spec, name)
        writer = self._take(name, _reason(options))
        rec = {"id": uuid.uuid4().hex[:16], "kind": "sync" if options.sync else "ingest",
               "index": name, "input": str(real), "state": "queued", "phase": "queued",
               "options": asdict(options), "rows": 0, "committed_rows": 0, "ingested": 0,
               "rejected": 0, "docs_per_s": 0.0, "created": time.time(), "error": None,
               "resumes": 0}
        self.dir.mkdir(exist_ok=True)
        self._save(rec)
        out = dict(rec)  # as submitted: the job's thread updates ``rec`` from now on
        self._start(rec, writer)
        return out

    def _take(self, name: str, reason: str) -> Any:
        """The served index's writer, lent to the job (searches go on), when the index is built
        and served; else None after suspending it (the job builds it in its folder)."""
        from slimvec.service.indexes.jobserve import lend_writer

        try:
            served = self.registry.get(name)
        except NotFound:
            served = None
        writer = lend_writer(served, reason) if served is not None else None
        if writer is None:
            self.registry.suspend(name, reason)
        return writer

    def resume_all(self) -> None:
        """Restart the jobs a previous process left queued or running."""
        for rec in self._records():
            if rec["state"] in ("queued", "running"):
                rec["resumes"] = int(rec.get("resumes", 0)) + 1
                try:
                    writer = self._take(rec["index"], _reason(IngestOptions(**rec["options"])))
                except SlimvecError as exc:
                    rec.update(state="failed", error=str(exc))
                    self._save(rec)
                    continue
                self._start(rec, writer)

    def _save(self, rec: dict[str, Any]) -> None:
        write_json_atomic(self.dir / f"{rec['id']}.json", rec)

    def _start(self, rec: dict[str, Any], writer: Any = None) -> None:
        t = threading.Thread(target=self._run, args=(rec, writer), name=f"job:{rec['id']}",
                             daemon=True)
        with self._lock:
            self._threads[rec["id"]] = t
        t.start()

    def _run(self, rec: dict[str, Any], writer: Any = None) -> None:
        from slimvec.service.indexes.jobserve import JobRecord, end_job, through_writer

        opts = IngestOptions(**{**rec["options"], "progress": False})
        opts.checkpoint_seconds = min(opts.checkpoint_seconds, self.checkpoint_seconds)
        folder = self.registry.root / rec["index"]
        t0 = time.perf_counter()
        progress = JobRecord(rec, self._save, self._stop, _Stopped)
        rec["state"] = "running"
        progress.phase("preparing" if writer is None else "queued")
        try:
            if writer is not None:
                summary = through_writer(writer, rec["input"], opts, progress)
            else:
                summary = ingest(rec["input"], folder, opts, on_batch=progress.on_batch)
                progress.committed(summary.next_row)
            rec.update(state="done", phase="done", rows=summary.next_row,
                       ingested=summary.ingested, rejected=summary.rejected,
                       docs_per_s=round(summary.docs_per_s, 1), count=summary.count)
            if getattr(summary, "sync", False):
                rec["summary"] = _sync_counts(summary)
        except _Stopped:
            rec["state"] = "running"  # resumed at the next start
        except SlimvecError as exc:
            rec.update(state="failed", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - recorded, never a traceback in a response
            log.exception("job %s failed", rec["id"])
            rec.update(state="failed", error=f"{type(exc).__name__}: {exc}")
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        if not self._stop.is_set():  # before the record says done: then it is served
            if writer is not None:
                end_job(self.registry, rec["index"], writer)
            else:
                self.registry.resume(rec["index"])
        self._save(rec)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop running jobs at their next batch (their last commit stands)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads.values())
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))


def _reason(options: IngestOptions) -> str:
    return "a sync job" if options.sync else "an ingest job"


def _sync_counts(summary: Any) -> dict[str, int]:
    """What a sync did: added / updated / unchanged / deleted, and what it kept or could not
    read (``not_deleted`` with read errors unless ``force``)."""
    return {k: int(getattr(summary, k)) for k in ("added", "updated", "unchanged", "deleted",
                                                   "recorded", "read_errors", "not_deleted")}


def _pending_options(options: IngestOptions, spec: dict[str, Any], name: str) -> IngestOptions:
    """A job into an index still collecting its fit sample builds it with the index's creation
    spec (the job's own file is the fit sample); naming another recipe, reducer, store or
    encoder is a conflict. The rows collected before are written after the job's."""
    asked = {"recipe": options.recipe, "reducer": options.reducer, "store": options.store,
             "encoder": options.encoder}
    clash = {k: v for k, v in asked.items() if v is not None and v != spec.get(k)}
    if clash:
        raise ConflictError(f"Index {name!r} was created with recipe {spec.get('recipe')!r}, "
                            f"reducer {spec.get('reducer')!r}, store {spec.get('store')!r}, encoder "
                            f"{spec.get('encoder')!r}; the job asks for {clash}. Leave them out "
                            "(the job then uses the index's) or use another index name.")
    if not spec.get("encoder"):
        raise ConfigError(f"Index {name!r} is built from vectors (no encoder): a job ingests "
                          "texts; add vectors with POST /indexes/NAME/vectors instead.")
    if spec.get("recipe"):
        return replace(options, recipe=spec["recipe"], reducer=None, store=None, keep_full=None,
                       encoder=spec["encoder"])
    return replace(options, recipe=None, reducer=spec.get("reducer"), store=spec.get("store"),
                   keep_full=spec.get("keep_full"), encoder=spec["encoder"], default_recipe=None)
