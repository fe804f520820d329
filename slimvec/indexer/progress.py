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

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimvec.documents import describe_changes, fingerprint
from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.safefs import LinkError, open_nofollow

__all__ = ["fingerprint", "ResumePlan", "plan_run", "describe_changes", "truncate_file",
           "progress_bar"]



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
    """The progress display of a long write: a rich bar on a terminal, plain lines in a log."""
    from slimvec.ui import make_progress

    return make_progress(enabled, unit=unit)
