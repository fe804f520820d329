"""Snapshot and restore over HTTP (issue 25 item 6): ``POST /indexes/{name}/snapshot``,
``POST /indexes/{name}/restore`` and ``GET /snapshots``.

Snapshots are written on the server, under ``ROOT/.snapshots/`` (a folder no index name can
take), rather than streamed back: the archive is complete and checksummed before anyone sees
it, it is renamed into place so a killed server leaves no half file, and a restore names one of
these files. A restore never reads a path the client gives: paths are untrusted, so the body
names a snapshot file of that folder (a plain file name, no link).

The served index keeps its writer while a snapshot is taken: FAISS and hnswlib indexes are pinned
between two commits (the writer waits milliseconds); a Qdrant index is copied while its writer's
lock is held, so its writes and searches wait for the copy.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from slimvec.errors import ConfigError
from slimvec.service.indexes.names import index_folder
from slimvec.service.responses import IndexInfo, SnapshotList, SnapshotOut

__all__ = ["snapshot_router", "SNAPSHOT_DIR"]

SNAPSHOT_DIR = ".snapshots"
_FILE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz")


class SnapshotIn(BaseModel):
    """Body of ``POST /indexes/{name}/snapshot`` (optional)."""

    file: str | None = Field(None, description="File name under the server's snapshot folder, "
                             "ending in .tar, .tar.gz, .tgz or .tar.xz [default: "
                             "NAME-YYYYmmddTHHMMSSZ.tar.gz].")


class RestoreIn(BaseModel):
    """Body of ``POST /indexes/{name}/restore``."""

    snapshot: str = Field(..., description="A file name listed by GET /snapshots (never a path).")
    force: bool = Field(False, description="Replace the index if it exists.")
    trust_unsigned: bool = Field(False, description="Restore a snapshot that is unsigned or signed "
                                 "with another installation's snapshot key (its origin is then "
                                 "yours to vouch for); every other check still runs.")


def _file_name(name: str) -> str:
    """A snapshot file name: plain, one part, a known suffix; else :class:`ConfigError`."""
    if (not isinstance(name, str) or not _FILE_RE.fullmatch(name) or ".." in name
            or not name.lower().endswith(_SUFFIXES)):
        raise ConfigError(f"Invalid snapshot file name {str(name)[:80]!r}: expected a plain file "
                          "name (letters, digits, '.', '_', '-'; no '/' or '..') ending in "
                          f"{', '.join(_SUFFIXES)}, as GET /snapshots lists them.")
    return name


def _collection_parts(state: Any, name: str) -> Any:
    """The snapshot stager of a Qdrant collection's other parts (a context: the collection held
    still meanwhile), or a context giving ``None``."""
    from contextlib import nullcontext

    cols = state.collections
    return nullcontext(None) if cols is None else cols.snapshot_parts(name)


def _restore_whole(state: Any, name: str, archive: Path, target: Path, body: RestoreIn) -> None:
    """Restore ``archive`` into ``target``; a Qdrant collection's snapshot brings back its other
    parts too (its named vectors' indexes, each checked in a child process, its side shard)."""
    from slimvec.ops.snapshot import restore

    cols = state.collections
    restore(archive, target, force=body.force, trust_unsigned=body.trust_unsigned,
            nested=cols.NESTED if cols is not None else None)
    if cols is not None:
        cols.unpack(name, target)


def snapshot_router(state: Any, write: Any, read: Any) -> APIRouter:
    """The snapshot routes over the service's shared state (``state.registry``,
    ``state.config.root``); ``write`` / ``read`` are the auth dependencies."""
    router = APIRouter(tags=["snapshots"])
    root: Path = state.config.root
    folder = root / SNAPSHOT_DIR

    @router.post("/indexes/{name}/snapshot", dependencies=[write], response_model=SnapshotOut)
    def snapshot_index(name: str, body: SnapshotIn | None = None) -> dict[str, Any]:
        """Write a snapshot of the index at its last commit under the server's snapshot folder
        (the index keeps serving); returns its file name, size and SHA-256."""
        from slimvec.ops.snapshot import snapshot

        served = state.registry.get(name)
        served.ready_index()  # 409 while pending or busy
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        file = _file_name(body.file if body and body.file else f"{name}-{stamp}.tar.gz")
        folder.mkdir(exist_ok=True)
        writer = served.writer
        with _collection_parts(state, name) as extra:  # a Qdrant collection: all of it
            info = snapshot(served.folder, folder / file,
                            hold=writer.lock if writer is not None else None, extra=extra)
        return {"snapshot": file, "index": name, "count": info.count, "files": info.files,
                "bytes": info.bytes, "archive_bytes": info.archive_bytes, "sha256": info.sha256}

    @router.get("/snapshots", dependencies=[read], response_model=SnapshotList)
    def list_snapshots() -> dict[str, Any]:
        """Snapshot files on the server (name, bytes, modified time), newest first."""
        out = []
        for p in folder.iterdir() if folder.is_dir() else []:
            if p.is_file() and not p.is_symlink() and _FILE_RE.fullmatch(p.name) \
                    and p.name.lower().endswith(_SUFFIXES):
                st = p.stat()
                out.append({"snapshot": p.name, "bytes": st.st_size,
                            "modified": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                      time.gmtime(st.st_mtime))})
        return {"snapshots": sorted(out, key=lambda s: s["modified"], reverse=True)}

    @router.post("/indexes/{name}/restore", dependencies=[write], response_model=IndexInfo,
                 response_model_exclude_unset=True)
    def restore_index(name: str, body: RestoreIn) -> dict[str, Any]:
        """Restore index ``name`` from a snapshot file on the server: its signature (the server's
        snapshot key; ``trust_unsigned`` accepts another), checksums and sizes verified, links and
        paths outside the index refused, and the index opened and searched in a child process
        first (an index that crashes it is refused, 422, and listed as ``failed``); ``force``
        replaces an existing index."""
        from slimvec.service.indexes.registry import ConflictError, NotFound

        archive = folder / _file_name(body.snapshot)
        if archive.is_symlink() or not archive.is_file():
            raise NotFound(f"No snapshot named {body.snapshot!r} on the server; GET /snapshots "
                           "lists them.")
        target = index_folder(root, name)
        if state.registry.pending_spec(name) is not None:
            raise ConflictError(f"Index {name!r} is collecting its fit sample; delete it first, "
                                "or restore under another name.")
        exists = os.path.lexists(target) and any(target.iterdir())
        if exists and not body.force:
            raise ConflictError(f"Index {name!r} exists; pass force=true to replace it with the "
                                "snapshot, or restore under another name.")
        from slimvec.ops.restore import ArchiveError, IndexProbeError

        state.registry.suspend(name, "a restore")
        crashed = None
        try:
            _restore_whole(state, name, archive, target, body)
        except ArchiveError as exc:  # the named file is bad input (422), not a server fault
            message = str(exc).replace(str(archive), body.snapshot)
            crashed = message if isinstance(exc, IndexProbeError) else None
            raise ConfigError(message) from exc
        finally:
            state.registry.resume(name)
            if crashed is not None:  # shown as failed (GET /indexes) unless the old one serves
                state.registry.fail(name, crashed)
        return state.registry.get(name).info()

    return router
