"""``slimvec snapshot`` and ``slimvec restore``: thin wrappers of :mod:`slimvec.ops.snapshot`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

__all__ = ["snapshot", "restore"]


def _bar(enabled: bool, what: str) -> tuple[Any, Callable[[int, int], None]]:
    """A progress display in bytes (plain lines when not on a terminal) and its callback."""
    from slimvec.ui import make_progress

    progress = make_progress(enabled, unit="bytes")
    task: list[int] = []

    def advance(done: int, total: int) -> None:
        if not task:
            task.append(progress.add_task(what, total=max(total, 1)))
        progress.update(task[0], completed=done)

    return progress, advance


def snapshot(
    index: Path = typer.Option(..., "--index", help="Index folder to snapshot (may be being written: the snapshot is taken at its last commit)."),
    out: Path = typer.Option(..., "--out", help="Archive to write: .tar, .tar.gz / .tgz or .tar.xz. Written under a temporary name and renamed when complete."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress while the archive is written."),
) -> None:
    """Write a consistent, checksummed snapshot of an index to one archive."""
    from slimvec.ops.snapshot import snapshot as take

    bar, advance = _bar(progress and not json_out, "snapshot")
    with bar:
        info = take(index, out, progress=advance, overwrite=overwrite)
    if json_out:
        typer.echo(json.dumps({"archive": str(info.path), "files": info.files, "bytes": info.bytes,
                               "archive_bytes": info.archive_bytes, "sha256": info.sha256,
                               "count": info.count}))
    else:
        typer.echo(info.summary())


def restore(
    archive: Path = typer.Argument(..., help="Archive written by 'slimvec snapshot'."),
    index: Path = typer.Option(..., "--index", help="Folder to restore into: new or empty (its parent must exist)."),
    force: bool = typer.Option(False, "--force", help="Replace the index already in --index (refused while another process uses it)."),
    trust_unsigned: bool = typer.Option(False, "--trust-unsigned", help="Restore an archive that is unsigned or signed with another installation's snapshot key ($SLIMVEC_SNAPSHOT_KEY): only for archives whose origin you trust. Every other check still runs."),
    max_size: str | None = typer.Option(None, "--max-size", help="Cap on all files together, e.g. 512G [default: $SLIMVEC_RESTORE_MAX_TOTAL or 256G]."),
    max_member_size: str | None = typer.Option(None, "--max-member-size", help="Cap on one file [default: $SLIMVEC_RESTORE_MAX_MEMBER or 64G]."),
    max_ratio: float | None = typer.Option(None, "--max-ratio", help="Cap on data bytes per compressed byte, zero runs not counted [default: $SLIMVEC_RESTORE_MAX_RATIO or 200]."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress while extracting."),
) -> None:
    """Restore an index from a snapshot: its signature (this installation's snapshot key), every
    checksum and size are verified and links, absolute paths and '..' refused before anything is
    written; the index is opened and searched in a child process before it is put in place."""
    import dataclasses

    from slimvec.index.folder import open_index
    from slimvec.ops.snapshot import restore as put_back
    from slimvec.ops.snapshot_pin import RestoreLimits, parse_size

    limits = RestoreLimits.from_env()
    limits = dataclasses.replace(
        limits, max_total_bytes=parse_size(max_size) if max_size else limits.max_total_bytes,
        max_member_bytes=parse_size(max_member_size) if max_member_size else limits.max_member_bytes,
        max_ratio=max_ratio if max_ratio else limits.max_ratio)
    bar, advance = _bar(progress and not json_out, "restore")
    with bar:
        folder = put_back(archive, index, force=force, progress=advance,
                          trust_unsigned=trust_unsigned, limits=limits)
    with open_index(folder) as idx:
        count = int(idx.store.count())
    if json_out:
        typer.echo(json.dumps({"index": str(folder), "count": count}))
    else:
        typer.echo(f"restored {archive} into {folder}: {count:,} documents, checksums verified")
