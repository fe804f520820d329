"""Snapshot an index folder into one archive, and restore it, taken at a commit.

A snapshot is a tar (``.tar``, ``.tar.gz`` / ``.tgz`` or ``.tar.xz``, chosen by the file name)
whose first member, ``SNAPSHOT.json``, lists every other member with its size and SHA-256, the
index manifest, the slimvec version and the snapshot format version. Nothing is pickled.

Consistency while a writer runs: every commit of :class:`~slimvec.indexer.builder.IndexBuilder`
holds a :class:`~slimvec.index.locking.CommitGuard` (an exclusive ``flock`` on the folder).

- Stores whose files are replaced whole by an atomic rename at each flush (FAISS, hnswlib:
  ``snapshot_files``) are *pinned* under the shared guard: each file is opened (the open file
  keeps that version), SQLite files (payloads, the ingest state) get a read transaction (WAL
  snapshot isolation), the full-vector side file's committed row count and ``rejects.jsonl``'s
  committed length are read with the manifest. The guard is then released (milliseconds: the
  writer is never held for the copy) and the pinned versions are copied.
- Engines that rewrite their files in place (Qdrant Edge, qdrant-client local mode) are copied
  under the index's reader lock (:class:`~slimvec.index.locking.IndexLock`, shared), so no
  writer runs during the copy; a writer in another process makes the snapshot refuse
  (:class:`~slimvec.errors.IndexBusyError`). The service passes its writer's lock (``hold``)
  instead and copies between two of its commits.

The archive is written under a temporary name beside ``out_file`` and renamed at the end: a
killed snapshot never leaves a partial archive at ``out_file``.

:func:`restore` checks the archive's origin (an HMAC-SHA256 signature with the snapshot key
:func:`snapshot` signs with: ``$SLIMVEC_SNAPSHOT_KEY``, else a per-user key file it creates), every
member name, type, size and checksum before writing anything, extracts into a temporary folder
beside the target, opens and searches the restored index in a child process, and only then renames
it into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from slimvec.errors import ConfigError, IndexBusyError, PersistenceError
from slimvec.index.locking import CommitGuard, IndexLock
from slimvec.index.manifest import MANIFEST, Manifest
from slimvec.ops.snapshot_pin import SNAPSHOT_FILE, SNAPSHOT_FORMAT, SNAPSHOT_FORMAT_VERSION, copy_pinned, pin, sign_meta, snapshot_key

__all__ = ["snapshot", "restore", "stage_index", "SnapshotInfo", "SNAPSHOT_FILE", "SNAPSHOT_FORMAT",
           "SNAPSHOT_FORMAT_VERSION", "archive_mode", "verify_archive"]

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (bytes done, bytes total)
Extra = Callable[[Path], dict[str, tuple[int, str]]]  # stage -> {name: (size, sha256)}


@dataclass
class SnapshotInfo:
    """What :func:`snapshot` wrote.

    Attributes
    ----------
    path : Path
        The archive.
    files : int
        Index files in it (``SNAPSHOT.json`` not counted).
    bytes : int
        Their total size, uncompressed.
    archive_bytes : int
        Size of the archive.
    sha256 : str
        SHA-256 of the archive.
    count : int
        Documents of the index at the commit the snapshot was taken at.
    signed : bool
        Signed with this installation's snapshot key (else its restore needs ``trust_unsigned``).
    """

    path: Path
    files: int
    bytes: int
    archive_bytes: int
    sha256: str
    count: int
    signed: bool = True

    def summary(self) -> str:
        """One line for the CLI."""
        return (f"snapshot {self.path}: {self.files} files, {self.bytes:,} bytes "
                f"({self.archive_bytes:,} archived), {self.count:,} documents, "
                f"sha256 {self.sha256}" + ("" if self.signed else ", UNSIGNED (no snapshot key)"))


def archive_mode(path: str | os.PathLike[str]) -> str:
    """tarfile write mode for ``path``'s suffix: ``w:gz`` (.tar.gz, .tgz), ``w:xz`` (.tar.xz),
    else ``w`` (plain tar)."""
    name = Path(path).name.lower()
    if name.endswith((".tar.gz", ".tgz")):
        return "w:gz"
    if name.endswith((".tar.xz", ".txz")):
        return "w:xz"
    if name.endswith((".zst", ".zstd")):
        raise ConfigError(f"{path}: zstd archives need the zstandard package, which slimvec does "
                          "not depend on; name the archive .tar.gz, .tar.xz or .tar instead.")
    return "w"


def _fix_store_sums(m: Manifest, stage: Path, sums: dict[str, tuple[int, str]]) -> None:
    """A finished FAISS / hnswlib index records its store files' SHA-256: the pinned files must
    match them (a damaged source is refused, never archived), and the SQLite files, copied by
    SQLite's backup rather than byte for byte, get the sums of their copies."""
    if not m.store_sha256:
        return
    changed = False
    for rel, expected in m.store_sha256.items():
        got = sums.get(rel)
        if got is None:
            raise PersistenceError(f"{rel} is recorded in the manifest but missing from the index; "
                                   "it was not snapshotted. Restore or rebuild the index.")
        if got[1] != expected:
            if not rel.endswith(".sqlite"):
                raise PersistenceError(f"{rel}: SHA-256 differs from the one recorded in the "
                                       "manifest (the file is damaged); the index was not "
                                       "snapshotted. Restore or rebuild it.")
            m.store_sha256[rel] = got[1]
            changed = True
    if changed:
        from slimvec.persistence import write_json_atomic

        (stage / MANIFEST).unlink()
        write_json_atomic(stage / MANIFEST, m.to_json())
        sums[MANIFEST] = ((stage / MANIFEST).stat().st_size, _sha(stage / MANIFEST))


def _sha(path: Path) -> str:
    from slimvec.persistence import sha256_file

    return sha256_file(path)


# ---------------------------------------------------------------------- snapshot
def snapshot(index_dir: str | os.PathLike[str], out_file: str | os.PathLike[str], *,
             hold: Any = None, progress: Progress | None = None, overwrite: bool = False,
             timeout: float = 60.0, extra: Extra | None = None) -> SnapshotInfo:
    """Write a consistent snapshot of an index folder to one archive (see the module docstring).

    Parameters
    ----------
    index_dir : path
        The index folder.
    out_file : path
        The archive to write (``.tar``, ``.tar.gz`` / ``.tgz``, ``.tar.xz``); written under a
        temporary name beside it and renamed when complete.
    hold : context manager, optional
        Held instead of the index's reader lock while an engine that rewrites its files in place
        (Qdrant) is copied: the lock of the in-process writer (the service's).
    progress : callable, optional
        ``progress(done, total)`` in bytes while the archive is written.
    overwrite : bool
        Replace an existing ``out_file`` (refused otherwise).
    timeout : float
        Seconds to wait for a running commit to end.
    extra : callable, optional
        ``extra(stage)`` copies more files into the staging folder once the index is staged
        (a Qdrant collection's other stores, under a folder of its own) and returns their
        ``{relative name: (size, sha256)}``: they are listed, checksummed and signed with it.

    Returns
    -------
    SnapshotInfo

    Raises
    ------
    ConfigError
        ``out_file`` exists (without ``overwrite``), or the store lies outside the folder.
    IndexBusyError
        A Qdrant index is being written by another process.
    PersistenceError
        Not an index, a link inside it, or a damaged file.
    """
    from slimvec.index.folder import external_store

    folder, out = Path(index_dir), Path(out_file)
    mode = archive_mode(out)
    if os.path.lexists(out) and not overwrite:
        raise ConfigError(f"{out} exists; choose another --out file, or pass --overwrite "
                          "(Python: overwrite=True) to replace it.")
    if not out.parent.is_dir():
        raise ConfigError(f"{out.parent} is not a folder; create it first or choose another --out.")
    m0 = Manifest.read(folder)
    if external_store(folder, m0) is not None:
        raise ConfigError(f"{folder}: its store {m0.store!r} lies outside the index folder, so a "
                          "folder snapshot cannot hold it; snapshot that store with its own tools.")
    key = snapshot_key(create=True)
    _remove_dead_leftovers(out)
    stage = out.parent / f".{out.name}.partial-{os.getpid()}"
    tmp = out.parent / f".{out.name}.{os.getpid()}.tmp"
    try:
        stage.mkdir()
        sums, m = stage_index(folder, stage, hold, timeout)
        if extra is not None:
            sums.update(extra(stage))
        meta = _meta(m, sums, stage)
        if key is not None:
            sign_meta(meta, key)
        size, digest = _write_tar(stage, tmp, mode, meta, sums, progress)
        os.replace(tmp, out)
        _fsync_dir(out.parent)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    files = [r for r in sums]
    return SnapshotInfo(out, len(files), sum(s for s, _ in sums.values()), size, digest,
                        int(m.count), key is not None)


def _remove_dead_leftovers(out: Path) -> None:
    """Remove the staging folder and temporary archive of a snapshot to ``out`` that was killed
    (its process is gone); a running one's are left alone."""
    for path in out.parent.glob(f".{out.name}.*"):
        tail = path.name[len(out.name) + 2:]
        pid = tail[len("partial-"):] if tail.startswith("partial-") else tail[:-len(".tmp")] \
            if tail.endswith(".tmp") else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        log.info("removing %s, left by a snapshot that was killed", path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def stage_index(folder: Path, stage: Path, hold: Any = None, timeout: float = 60.0
                ) -> tuple[dict[str, tuple[int, str]], Manifest]:
    """Copy index ``folder`` at its last commit into ``stage`` (see the module docstring for
    how a writer is held); returns ``({relative name: (size, sha256)}, manifest)``."""
    from slimvec.connectors import store_class

    in_place = not store_class(Manifest.read(folder).store).snapshot_files
    sums, m = _stage(folder, stage, in_place, hold, timeout)
    _fix_store_sums(m, stage, sums)
    return sums, m


def _stage(folder: Path, stage: Path, in_place: bool, hold: Any,
           timeout: float) -> tuple[dict[str, tuple[int, str]], Manifest]:
    """Pin the committed state and copy it into ``stage``."""
    from slimvec.index.safefs import read_bytes_nofollow

    if in_place:  # no writer may run during the copy
        guard = hold if hold is not None else _reader_lock(folder)
        with guard:
            raw = read_bytes_nofollow(folder / MANIFEST)
            m = Manifest.from_json(json.loads(raw), folder / MANIFEST)
            p = pin(folder, m, raw, True)
            try:
                return copy_pinned(p, folder, stage, True), m
            finally:
                p.close()
    with CommitGuard(folder, exclusive=False, timeout=timeout):  # milliseconds: no copying
        t0 = time.perf_counter()
        raw = read_bytes_nofollow(folder / MANIFEST)
        m = Manifest.from_json(json.loads(raw), folder / MANIFEST)
        p = pin(folder, m, raw, False)
        held = time.perf_counter() - t0
    log.info("%s: pinned at the commit of %s in %.1f ms (commits wait that long)", folder,
             m.updated, held * 1000)
    try:
        return copy_pinned(p, folder, stage, False), m
    finally:
        p.close()


@contextlib.contextmanager
def _reader_lock(folder: Path) -> Iterator[None]:
    try:
        lock = IndexLock(folder, exclusive=False).acquire()
    except IndexBusyError as exc:
        raise IndexBusyError(
            f"{folder}: the index is being written by another process, and its store engine "
            "rewrites its files in place, so a snapshot can only be taken between runs: retry "
            "when the ingest finishes (or snapshot it through the service that writes it, "
            "POST /indexes/NAME/snapshot)."
        ) from exc
    try:
        yield
    finally:
        lock.release()


def _meta(m: Manifest, sums: dict[str, tuple[int, str]], stage: Path) -> dict[str, Any]:
    from slimvec._version import __version__

    members = []
    for rel in sorted(set(sums) | {d.relative_to(stage).as_posix() for d in stage.rglob("*")
                                   if d.is_dir()}):
        if rel in sums:
            members.append({"name": rel, "type": "file", "size": sums[rel][0],
                            "sha256": sums[rel][1]})
        else:
            members.append({"name": rel, "type": "dir"})
    return {"format": SNAPSHOT_FORMAT, "format_version": SNAPSHOT_FORMAT_VERSION,
            "slimvec_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "count": int(m.count), "manifest": m.to_json(), "members": members}


class _HashingWriter(io.RawIOBase):
    """A write-only file hashing and counting what goes through it."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.h, self.n = fh, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.n

    def write(self, data: Any) -> int:
        b = bytes(data)
        self.fh.write(b)
        self.h.update(b)
        self.n += len(b)
        return len(b)


def _write_tar(stage: Path, tmp: Path, mode: str, meta: dict[str, Any],
               sums: dict[str, tuple[int, str]], progress: Progress | None) -> tuple[int, str]:
    total = sum(s for s, _ in sums.values())
    done = 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as raw:
        hw = _HashingWriter(raw)
        # gzip level 3, not tarfile's 9: float vectors hardly compress at any level, and the
        # 32 MiB zero-filled files Qdrant Edge preallocates compress 3x faster (132 MiB of zeros:
        # 0.9 s vs 2.9 s on our loaded 2-core machine; 604 KB vs 135 KB of output)
        extra = {"compresslevel": 3} if mode == "w:gz" else {}
        with tarfile.open(fileobj=hw, mode=mode, format=tarfile.PAX_FORMAT, **extra) as tar:  # type: ignore[call-overload]
            body = json.dumps(meta, indent=1, sort_keys=True).encode()
            tar.addfile(_info(SNAPSHOT_FILE, len(body)), io.BytesIO(body))
            for member in meta["members"]:
                rel = member["name"]
                if member["type"] == "dir":
                    tar.addfile(_info(rel, 0, directory=True))
                    continue
                with open(stage / rel, "rb") as fh:
                    tar.addfile(_info(rel, member["size"]), fh)
                done += member["size"]
                if progress is not None:
                    progress(done, total)
        raw.flush()
        os.fsync(raw.fileno())
    return hw.n, hw.h.hexdigest()


def _info(name: str, size: int, directory: bool = False) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size = 0 if directory else size
    ti.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    ti.mode = 0o755 if directory else 0o644
    ti.mtime = int(time.time())
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def restore(archive: str | os.PathLike[str], index_dir: str | os.PathLike[str], *,
            force: bool = False, progress: Progress | None = None, trust_unsigned: bool = False,
            limits: Any = None, nested: str | None = None) -> Path:
    """Restore a snapshot into ``index_dir``: :func:`slimvec.ops.restore.restore` (origin,
    every member name, type, size and checksum checked before anything is written; the restored
    index is opened and searched in a child process, then renamed into place; ``force`` replaces
    a non-empty ``index_dir``; ``trust_unsigned`` accepts an archive not signed with this
    installation's key)."""
    from slimvec.ops.restore import restore as _restore

    return _restore(archive, index_dir, force=force, progress=progress,
                    trust_unsigned=trust_unsigned, limits=limits, nested=nested)


def verify_archive(archive: str | os.PathLike[str], *, trust_unsigned: bool = False,
                   limits: Any = None) -> dict[str, Any]:
    """Check a snapshot archive without writing anything; returns its ``SNAPSHOT.json``
    (:func:`slimvec.ops.restore.verify_archive`)."""
    from slimvec.ops.restore import verify_archive as _verify

    return _verify(archive, trust_unsigned=trust_unsigned, limits=limits)
