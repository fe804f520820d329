"""The durable progress record of an ingest, and the decision to start, resume or refuse.

The record lives in the index manifest (``manifest['progress']``, written atomically and fsynced)
and only advances after the store has durably accepted every batch before ``next_row``:

``input``
    Resolved path of the file being ingested.
``fingerprint``
    ``size``, ``mtime_ns`` and SHA-256 of the first and last MiB of the input: a cheap test that
    the file is the one the progress refers to.
``next_row``
    First data row not yet committed.
``rejects_bytes``
    Length of ``rejects.jsonl`` at that commit; a resumed run cuts the file back to it so rows
    re-read after a crash are not reported twice.
``state``
    ``running`` (interrupted or killed when read back), ``done``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError, PersistenceError
from slimvec.indexer.safefs import LinkError, open_nofollow

__all__ = ["fingerprint", "ResumePlan", "plan_run", "describe_changes", "truncate_file",
           "progress_bar"]

_EDGE = 1 << 20


def fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Size, mtime and head / tail SHA-256 of a file (reads at most 2 MiB)."""
    p = Path(path)
    st = p.stat()
    head = hashlib.sha256()
    tail = hashlib.sha256()
    with open(p, "rb") as fh:
        head.update(fh.read(_EDGE))
        if st.st_size > _EDGE:
            fh.seek(max(_EDGE, st.st_size - _EDGE))
            tail.update(fh.read(_EDGE))
    return {"size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "head_sha256": head.hexdigest(), "tail_sha256": tail.hexdigest()}


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Human description of how two fingerprints differ (empty when equal)."""
    parts = []
    if old.get("size") != new.get("size"):
        parts.append(f"size {old.get('size')} -> {new.get('size')} bytes")
    if old.get("head_sha256") != new.get("head_sha256") or old.get("tail_sha256") != new.get(
            "tail_sha256"):
        parts.append("content differs")
    if old.get("mtime_ns") != new.get("mtime_ns"):
        parts.append("modification time differs")
    return ", ".join(parts)


@dataclass
class ResumePlan:
    """What an ingest run does with an existing progress record.

    Attributes
    ----------
    start_row : int
        First row to read (0 for a fresh run).
    rejects_bytes : int or None
        Cut ``rejects.jsonl`` back to this length before appending (resume only).
    resuming : bool
    already_done : bool
        The same unchanged file was ingested completely before: nothing to do.
    """

    start_row: int = 0
    rejects_bytes: int | None = None
    resuming: bool = False
    already_done: bool = False


def plan_run(folder: Path, progress: dict[str, Any] | None, input_path: Path,
             current: dict[str, Any], columns: dict[str, Any]) -> ResumePlan:
    """Decide whether to start, resume, skip, or refuse.

    Parameters
    ----------
    folder : Path
        Index folder (for messages).
    progress : dict or None
        ``manifest['progress']`` of the existing index.
    input_path : Path
        Resolved input file of this run.
    current : dict
        :func:`fingerprint` of the input now.
    columns : dict
        ``text_column`` / ``id_column`` / ``format`` of this run (a resumed run must read rows
        the same way).

    Raises
    ------
    ConfigError
        An unfinished ingest of another file, or of this file since changed, or with other
        columns; the message says how to resume or to start over with ``--rebuild``.
    """
    if not progress or not progress.get("fingerprint"):
        return ResumePlan()
    same_path = progress.get("input") == str(input_path)
    changes = describe_changes(progress["fingerprint"], current) if same_path else "other file"
    if progress.get("state") == "done":
        if same_path and not changes:
            return ResumePlan(already_done=True)
        return ResumePlan()  # a new or updated file adds to / overwrites the index
    row = int(progress.get("next_row", 0))
    rebuild = "pass --rebuild to delete the index and start over"
    if not same_path:
        raise ConfigError(
            f"{folder} has an unfinished ingest of {progress.get('input')} (committed up to row "
            f"{row:,}). Resume it by rerunning the same command with that file, or {rebuild}."
        )
    if changes:
        raise ConfigError(
            f"{input_path} changed since the interrupted ingest into {folder} ({changes}); rows "
            f"0-{row:,} were committed from the old version, so resuming could mix two files. "
            f"Restore the file to resume, or {rebuild}."
        )
    old_cols = progress.get("columns") or {}
    diffs = [f"{k} {old_cols.get(k)!r} (asked {v!r})" for k, v in columns.items()
             if k in old_cols and old_cols.get(k) != v]
    if diffs:
        raise ConfigError(
            f"The interrupted ingest into {folder} read {input_path} with {', '.join(diffs)}. "
            f"Rerun with the same options to resume, or {rebuild}."
        )
    return ResumePlan(start_row=row, rejects_bytes=progress.get("rejects_bytes"),
                      resuming=row > 0 or progress.get("rejects_bytes") is not None)


def truncate_file(path: Path, size: int | None) -> None:
    """Cut ``path`` back to ``size`` bytes (no-op when ``size`` is None or the file is shorter)."""
    if size is None or not path.exists():
        return
    try:
        if path.stat().st_size > size:
            fd = open_nofollow(path, os.O_RDWR)
            try:
                os.ftruncate(fd, size)
                os.fsync(fd)
            finally:
                os.close(fd)
    except LinkError:
        raise
    except OSError as exc:
        raise PersistenceError(f"Cannot cut {path} back to its committed length: {exc}.") from exc


def progress_bar(enabled: bool, unit: str = "docs") -> Any:
    """A rich progress display (bar, done/total, rate in ``unit``/s, elapsed, ETA)."""
    from rich.progress import (
        BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
    )

    class _Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task):  # type: ignore[override]
            from rich.text import Text

            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} {unit}/s" if speed else "")

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    _Rate(), TimeElapsedColumn(), TimeRemainingColumn(), disable=not enabled,
                    transient=False)
