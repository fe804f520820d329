"""A job written through a served index's writer, and its record as it goes (issue 25 item 7).

:func:`lend_writer` marks a served index ``busy`` with the reason while searches keep reading it
(its live index is its reader: the writer stays open), :func:`through_writer` runs the ingest or
sync on the writer's thread through a :class:`~slimvec.service.indexes.jobwrite.SharedBuilder`, and
:func:`end_job` serves the index as ``ready`` again. :class:`JobRecord` keeps ``ROOT/.jobs/ID.json``
up to date: phase, rows read, rows committed, ingested, rejected.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slimvec.service.indexes.jobwrite import SharedBuilder

__all__ = ["JobRecord", "lend_writer", "through_writer", "end_job"]


class JobRecord:
    """A job's record, saved at most once a second and at each phase change.

    Parameters
    ----------
    rec : dict
        The record (updated in place).
    save : callable
        Writes it (atomically).
    stop : threading.Event
        Set when the server stops: the next batch raises ``stopped`` (the job resumes at the next
        start from its last commit).
    stopped : exception type
    """

    def __init__(self, rec: dict[str, Any], save: Callable[[dict[str, Any]], None],
                 stop: threading.Event, stopped: type[Exception]) -> None:
        self.rec, self._save, self._stop, self._stopped = rec, save, stop, stopped
        self._last = 0.0

    def phase(self, name: str) -> None:
        """Enter phase ``name`` (saved now)."""
        self.rec["phase"] = name
        self.save(force=True)

    def report(self, phase: str, summary: Any, committed_rows: int) -> None:
        """A step of a job written through the writer (:class:`SharedBuilder`'s ``report``)."""
        changed = phase != self.rec.get("phase")
        self.rec.update(phase=phase, rows=int(summary.next_row), ingested=int(summary.ingested),
                        rejected=int(summary.rejected), committed_rows=int(committed_rows))
        self.save(force=changed)

    def on_batch(self, next_row: int) -> None:
        """After each batch: the rows read so far; raises ``stopped`` when the server stops."""
        self.rec["rows"] = int(next_row)
        if self.rec.get("phase") in ("queued", "preparing"):
            self.phase("writing")
        else:
            self.save()
        if self._stop.is_set():
            raise self._stopped()

    def on_delete(self, deleted: int) -> None:
        """After each committed chunk of a sync's deletes."""
        self.rec["deleted"] = int(deleted)
        self.save()

    def committed(self, rows: int) -> None:
        """The rows committed when the job ran in its own builder (at its end)."""
        self.rec["committed_rows"] = int(rows)

    def save(self, force: bool = False) -> None:
        """Write the record when ``force`` or a second has passed since the last write."""
        now = time.perf_counter()
        if force or now - self._last > 1.0:
            self._last = now
            self._save(self.rec)


def lend_writer(served: Any, reason: str) -> Any:
    """Mark ``served`` busy with ``reason`` and return its writer when it is built and served
    (searches then read its live index all along); None when the job must build the index in
    its folder (no index yet, collecting its fit sample, busy, closed).

    Raises
    ------
    WriterDegraded
        The writer retries a failed commit, or is being reopened (503 with Retry-After).
    """
    with served.lock:
        writer = served.writer
        if served.state != "ready" or served.index is None or writer is None \
                or Path(served.pending_dir).exists():
            return None
        if writer.dead is not None:
            raise writer.dead_error()
        if writer.degraded is not None:
            raise writer._degraded_error()
        served.state, served.busy_reason, served.reader = "busy", reason, served.index
        return writer


def through_writer(writer: Any, path: str, options: Any, record: JobRecord) -> Any:
    """Ingest (``options.sync``: sync) ``path`` through ``writer`` on its thread; returns the
    summary. A stop leaves the job's progress record at its last commit (resumed at the next
    start, as a killed CLI ingest is)."""
    from slimvec.indexer.pipeline import ingest_with
    from slimvec.ops.sync import sync_with

    def job(w: Any) -> Any:
        record.phase("preparing")
        shared = SharedBuilder(w, record.report, "syncing" if options.sync else "writing")
        try:
            if options.sync:
                return sync_with(shared, path, options, force=options.force,
                                 on_batch=record.on_batch, on_delete=record.on_delete)
            return ingest_with(shared, path, options, record.on_batch)
        finally:
            shared.release()
            record.committed(shared.committed_rows)

    reason = "a sync job" if options.sync else "an ingest job"
    return writer.run_job(job, reason).result()


def end_job(registry: Any, name: str, writer: Any) -> None:
    """Serve index ``name`` as ready again after a job through ``writer`` (a writer that died
    during the job is reopened by the index's supervisor, as any dead writer is)."""
    try:
        served = registry.get(name)
    except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to serve
        return
    with served.lock:
        if served.writer is not writer or served.state != "busy":
            return
        served.state, served.busy_reason, served.reader = "ready", "", None
    if writer.dead is not None:
        served._writer_died(writer.dead)
