"""Folder safety of the index writer: what it may delete, what it refuses, how I/O errors read.

A folder without a manifest is only cleaned of what a crashed first run provably left (listed in
``.slimvec-new`` before anything was created); anything else in a non-index folder (``.git/``,
``.env``, a user's ``store/``) is refused, never deleted. ``rebuild`` deletes only what the
manifest proves slimvec wrote, after every check passed. Used by
:class:`~slimvec.indexer.builder.IndexBuilder` (split out of it, issue 24 item 2).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from slimvec.connectors.fullvectors import FULL_DIR
from slimvec.errors import ConfigError, PersistenceError, SlimvecError
from slimvec.index.calibration_queries import CALIBRATION_QUERIES_FILE
from slimvec.index.folder import REDUCER_DIR, STORE_DIR, store_folder
from slimvec.index.locking import LOCK_NAME
from slimvec.index.manifest import MANIFEST, Manifest
from slimvec.index.records import RECORDS
from slimvec.index.safefs import refuse_link
from slimvec.indexer.writer import REJECTS
from slimvec.sources.checks import STATE_DB

__all__ = ["NEW_MARKER", "STORE_MARKER", "STATE_FILES", "existing_index", "remove_failed_new",
           "clear_for_new", "check_new_store", "persistence_error", "map_io_error"]

log = logging.getLogger(__name__)
#: written (fsynced) before a new index creates anything; lists what a crash may leave behind
NEW_MARKER = ".slimvec-new"
STORE_MARKER = "slimvec_store.json"  # every local store writes it at create
STATE_FILES = (STATE_DB, STATE_DB + "-wal", STATE_DB + "-shm",
               RECORDS, RECORDS + "-wal", RECORDS + "-shm")  # records: ingest --sync
_IO_HINTS = ("No space left", "Read-only file system", "Permission denied", "Disk quota",
             "File too large", "disk I/O error", "database or disk is full",
             "attempt to write a readonly database")  # the last three: SQLite (payloads, state)


def existing_index(folder: Path, rebuild: bool) -> tuple[Manifest | None, list[Path]]:
    """The folder's index and what a new index may delete first.

    Returns
    -------
    (Manifest or None, list of Path)
        The existing index's manifest (``None``: none, or ``rebuild``) and the entries a new
        index deletes before it is created (the old index's own files under ``rebuild``, a
        crashed first run's leftovers otherwise).

    Raises
    ------
    ConfigError
        The folder holds files slimvec cannot prove it wrote (nothing is deleted), or a link
        where the index keeps a file.
    """
    for name in (MANIFEST, REJECTS, *STATE_FILES, NEW_MARKER, CALIBRATION_QUERIES_FILE):
        refuse_link(folder / name)
    if os.path.lexists(folder / MANIFEST):
        if not rebuild:
            return Manifest.read(folder), []
        return None, _own_entries(folder, _lenient_manifest(folder))
    return None, _crash_leftovers(folder)


def remove_failed_new(folder: Path) -> None:
    """Delete what this run created for a new index that failed before its first commit
    (the entries its ``.slimvec-new`` marker lists, the marker last): a failed first build
    leaves the folder as it found it (issue 27 item 6). A killed run still leaves the marker,
    and the next run cleans up after it."""
    try:
        for p in _crash_leftovers(folder):
            if p.name == NEW_MARKER:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif os.path.lexists(p):
                p.unlink()
        (folder / NEW_MARKER).unlink(missing_ok=True)
    except (OSError, SlimvecError) as exc:  # never hide the error that stopped the build
        log.warning("could not remove the failed build's files from %s: %s", folder, exc)


def clear_for_new(folder: Path, doomed: list[Path]) -> None:
    """Delete the old index (rebuild) or a crashed first run's leftovers; mark the new one."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / MANIFEST) in doomed:
        (folder / MANIFEST).unlink()  # first, so a crash mid-wipe leaves no half index
    for p in doomed:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif os.path.lexists(p):
            p.unlink()
    marker = folder / NEW_MARKER
    names = [REDUCER_DIR, STORE_DIR, "full", REJECTS, *STATE_FILES, NEW_MARKER]
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as fh:
        json.dump({"created_by": "slimvec", "names": names}, fh)
        fh.flush()
        os.fsync(fh.fileno())


def check_new_store(folder: Path, store: Any) -> None:
    """Before anything is deleted or created: an external store location must be free."""
    location = Path(str(store.location))
    if str(location) == str(store_folder(folder)):
        return
    exists = False
    if getattr(store, "local", True):
        exists = location.exists() and (not location.is_dir() or any(location.iterdir()))
    else:
        try:
            store.open()
            exists = True
            store.close()
        except Exception:  # no such collection (or unreachable: create will say so)
            exists = False
    if exists:
        raise ConfigError(
            f"The store {store.location} named by the store spec already holds data. slimvec "
            "does not delete or overwrite an external store; nothing was changed in "
            f"{folder}. Delete that store yourself, or choose another location.")


def _lenient_manifest(folder: Path) -> Manifest | None:
    """The manifest of an index about to be rebuilt; ``None`` when it cannot be read (then only
    the fixed names slimvec always writes count as its own)."""
    try:
        return Manifest.read(folder)
    except PersistenceError:
        return None


def _own_entries(folder: Path, manifest: Manifest | None) -> list[Path]:
    """What ``rebuild`` may delete: files the manifest proves slimvec wrote. Anything else in the
    folder is refused (listed), never deleted."""
    own = {MANIFEST, REDUCER_DIR, REJECTS, LOCK_NAME, NEW_MARKER, CALIBRATION_QUERIES_FILE,
           *STATE_FILES}
    if manifest is None:  # unreadable manifest: a store folder proves itself by its own marker
        if (store_folder(folder) / STORE_MARKER).is_file():
            own.add(STORE_DIR)
        if (folder / FULL_DIR / "state.json").is_file():  # FullVectors' own record
            own.add(FULL_DIR)
    else:
        from slimvec.connectors import make_store

        try:
            loc = make_store(manifest.store, store_folder(folder)).location
        except SlimvecError:
            loc = None
        if loc is not None and Path(loc) == store_folder(folder):
            own.add(STORE_DIR)
        if manifest.full is not None and manifest.full.dir:
            own.add(Path(manifest.full.dir).parts[0])
    return _entries_or_refuse(folder, own, "holds files this index's manifest does not account "
                              "for")


def _crash_leftovers(folder: Path) -> list[Path]:
    """What a first run killed before its first commit left (listed in its marker file)."""
    if not folder.is_dir():
        return []
    own = {LOCK_NAME}
    marker = folder / NEW_MARKER
    if marker.is_file() and not marker.is_symlink():
        try:
            names = json.loads(marker.read_text(encoding="utf-8")).get("names", [])
        except (ValueError, OSError, AttributeError):
            names = []
        own |= {str(n) for n in names if isinstance(n, str) and "/" not in n and n not in ("..",)}
    return _entries_or_refuse(folder, own, "is not empty and is not a slimvec index")


def _entries_or_refuse(folder: Path, own: set[str], why: str) -> list[Path]:
    entries = list(folder.iterdir()) if folder.is_dir() else []
    strangers = sorted(p.name for p in entries if p.name not in own)
    if strangers:
        raise ConfigError(
            f"{folder} {why} (it holds {', '.join(strangers[:5])}"
            f"{'...' if len(strangers) > 5 else ''}); nothing was deleted. Choose an empty or new "
            "--index folder, or move those files away.")
    return [p for p in entries if p.name != LOCK_NAME]


def persistence_error(folder: Path, exc: OSError) -> PersistenceError:
    """The user's error for an ``OSError`` while writing ``folder``."""
    where = f" ({exc.filename})" if exc.filename else ""
    return PersistenceError(
        f"Cannot write the index {folder}: {exc.strerror or exc}{where}. Check that the folder "
        "is writable and the disk is not full, then rerun the same command to resume.")


def map_io_error(folder: Path, exc: BaseException) -> PersistenceError | None:
    """Store engines report I/O failures as their own exceptions: map them for the user."""
    if isinstance(exc, OSError):
        return persistence_error(folder, exc)
    if isinstance(exc, Exception) and any(h in str(exc) for h in _IO_HINTS):
        return PersistenceError(
            f"The store of {folder} could not write: {str(exc).splitlines()[0][:300]}. Check "
            "that the folder is writable and the disk is not full, then rerun the same "
            "command to resume.")
    return None
