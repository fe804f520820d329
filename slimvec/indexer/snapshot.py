"""Snapshot an index folder into one archive, and restore it, taken at a commit.

A snapshot is a tar (``.tar``, ``.tar.gz`` / ``.tgz`` or ``.tar.xz``, chosen by the file name)
whose first member, ``SNAPSHOT.json``, lists every other member with its size and SHA-256, the
index manifest, the slimvec version and the snapshot format version. Nothing is pickled.

Consistency while a writer runs: every commit of :class:`~slimvec.indexer.builder.IndexBuilder`
holds a :class:`~slimvec.indexer.locking.CommitGuard` (an exclusive ``flock`` on the folder).

- Stores whose files are replaced whole by an atomic rename at each flush (FAISS, hnswlib:
  ``snapshot_files``) are *pinned* under the shared guard: each file is opened (the open file
  keeps that version), SQLite files (payloads, the ingest state) get a read transaction (WAL
  snapshot isolation), the full-vector side file's committed row count and ``rejects.jsonl``'s
  committed length are read with the manifest. The guard is then released (milliseconds: the
  writer is never held for the copy) and the pinned versions are copied.
- Engines that rewrite their files in place (Qdrant Edge, qdrant-client local mode) are copied
  under the index's reader lock (:class:`~slimvec.indexer.locking.IndexLock`, shared), so no
  writer runs during the copy; a writer in another process makes the snapshot refuse
  (:class:`~slimvec.errors.IndexBusyError`). The service passes its writer's lock (``hold``)
  instead and copies between two of its commits.

The archive is written under a temporary name beside ``out_file`` and renamed at the end: a
killed snapshot never leaves a partial archive at ``out_file``.

:func:`restore` checks every member name and type and every checksum before writing anything,
extracts into a temporary folder beside the target, opens the restored index
(:func:`slimvec.open`) and only then renames it into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import sqlite3
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from slimvec.errors import ConfigError, IndexBusyError, PersistenceError
from slimvec.indexer.locking import CommitGuard, IndexLock
from slimvec.indexer.manifest import MANIFEST, Manifest

__all__ = ["snapshot", "restore", "SnapshotInfo", "SNAPSHOT_FILE", "SNAPSHOT_FORMAT",
           "SNAPSHOT_FORMAT_VERSION", "archive_mode", "verify_archive"]

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "SNAPSHOT.json"
SNAPSHOT_FORMAT = "slimvec-snapshot"
SNAPSHOT_FORMAT_VERSION = 1
_CHUNK = 1 << 20
_MAX_META = 64 << 20  # SNAPSHOT.json larger than this is not ours
_VOLATILE = ("-wal", "-shm", "-journal", ".tmp")
#: entries of an index folder a snapshot carries besides the store (others are not slimvec's)
_TOP_FILES = ("rejects.jsonl", "calibration-queries.safetensors", ".ingest-state.sqlite")
Progress = Callable[[int, int], None]  # (bytes done, bytes total)


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
    """

    path: Path
    files: int
    bytes: int
    archive_bytes: int
    sha256: str
    count: int

    def summary(self) -> str:
        """One line for the CLI."""
        return (f"snapshot {self.path}: {self.files} files, {self.bytes:,} bytes "
                f"({self.archive_bytes:,} archived), {self.count:,} documents, "
                f"sha256 {self.sha256}")


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


# ---------------------------------------------------------------------- pinning
@dataclass
class _Pinned:
    """The committed state of an index, held open: what a snapshot copies."""

    manifest: bytes = b""
    files: dict[str, tuple[int, int]] = field(default_factory=dict)   # rel -> (fd, length)
    blobs: dict[str, bytes] = field(default_factory=dict)             # rel -> content
    sqlite: dict[str, sqlite3.Connection] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)

    def close(self) -> None:
        for fd, _ in self.files.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        for conn in self.sqlite.values():
            with contextlib.suppress(sqlite3.Error):
                conn.rollback()
                conn.close()
        self.files.clear()
        self.sqlite.clear()


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise PersistenceError(f"{path} is a symbolic link; slimvec does not follow links inside "
                               "an index folder, so it cannot snapshot it. Replace the link with "
                               "the real file.")


def _pin_fd(p: _Pinned, folder: Path, rel: str, length: int | None = None) -> None:
    from slimvec.indexer.safefs import open_nofollow

    fd = open_nofollow(folder / rel, os.O_RDONLY)
    size = os.fstat(fd).st_size
    if length is not None and size < length:
        os.close(fd)
        raise PersistenceError(f"{folder / rel} holds {size} bytes, fewer than the {length} "
                               "committed; the index is damaged, so it was not snapshotted.")
    p.files[rel] = (fd, size if length is None else length)


def _pin_sqlite(p: _Pinned, folder: Path, rel: str) -> None:
    """A read transaction on a SQLite file: WAL readers see the state at its start until the
    end, whatever the writer commits meanwhile. Read-only: closing it never checkpoints."""
    uri = f"file:{folder / rel}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None,
                           check_same_thread=False)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    p.sqlite[rel] = conn


def _walk(folder: Path, sub: str) -> Iterator[tuple[str, bool]]:
    """(relative name, is_dir) under ``folder/sub``, sorted; links are refused."""
    base = folder / sub
    for root, dirs, files in os.walk(base):
        dirs.sort()
        for name in dirs + sorted(files):
            path = Path(root) / name
            _refuse_link(path)
            yield path.relative_to(folder).as_posix(), path.is_dir()


def _pin(folder: Path, m: Manifest, raw_manifest: bytes, in_place: bool) -> _Pinned:
    """Open everything a snapshot carries (under the commit guard or the reader lock)."""
    from slimvec.connectors.fullvectors import IDS, STATE, vectors_file_name
    from slimvec.indexer.index import REDUCER_DIR, STORE_DIR

    p = _Pinned(manifest=raw_manifest)
    try:
        for sub in (REDUCER_DIR, STORE_DIR):
            if not (folder / sub).is_dir():
                continue
            p.dirs.append(sub)
            for rel, is_dir in _walk(folder, sub):
                name = rel.rsplit("/", 1)[-1]
                if is_dir:
                    p.dirs.append(rel)
                elif in_place:
                    p.files[rel] = (-1, -1)  # copied under the lock, as it is
                elif name.endswith(_VOLATILE) or name.startswith("."):
                    continue  # SQLite's WAL is read through the pinned transaction
                elif name.endswith(".sqlite"):
                    _pin_sqlite(p, folder, rel)
                else:
                    _pin_fd(p, folder, rel)
        if m.full is not None and m.full.dir:
            d = m.full.dir
            _refuse_link(folder / d)
            p.dirs.append(d)
            state = (folder / d / STATE).read_bytes()
            p.blobs[f"{d}/{STATE}"] = state
            info = json.loads(state)
            rows, dim = int(info["rows"]), int(info["dim"])
            item = 4 if info["dtype"] == "float32" else 2
            _pin_fd(p, folder, f"{d}/{vectors_file_name(info['dtype'])}", rows * dim * item)
            _pin_fd(p, folder, f"{d}/{IDS}", rows * 8)
        for rel in _TOP_FILES:
            if not os.path.lexists(folder / rel):
                continue
            _refuse_link(folder / rel)
            if rel.endswith(".sqlite"):
                _pin_sqlite(p, folder, rel)
            elif rel == "rejects.jsonl" and m.progress is not None:
                _pin_fd(p, folder, rel, m.progress.rejects_bytes)
            else:
                _pin_fd(p, folder, rel)
    except BaseException:
        p.close()
        raise
    return p


# ---------------------------------------------------------------------- copying
def _hash_copy(read: Callable[[int], bytes], dst: Path, length: int | None) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        while length is None or n < length:
            chunk = read(_CHUNK if length is None else min(_CHUNK, length - n))
            if not chunk:
                break
            out.write(chunk)
            h.update(chunk)
            n += len(chunk)
    if length is not None and n != length:
        raise PersistenceError(f"{dst.name}: read {n} of {length} bytes while copying; the index "
                               "changed under the snapshot. Retry.")
    return n, h.hexdigest()


def _copy_pinned(p: _Pinned, folder: Path, stage: Path, in_place: bool) -> dict[str, tuple[int, str]]:
    """Copy the pinned state into ``stage``; returns rel -> (size, sha256)."""
    from slimvec.persistence import sha256_file

    out: dict[str, tuple[int, str]] = {}
    for d in p.dirs:
        (stage / d).mkdir(parents=True, exist_ok=True)
    for rel, (fd, length) in sorted(p.files.items()):
        if in_place and fd < 0:
            with open(folder / rel, "rb") as src:
                out[rel] = _hash_copy(src.read, stage / rel, None)
            continue
        pos = [0]

        def read(n: int, fd: int = fd, pos: list[int] = pos) -> bytes:
            chunk = os.pread(fd, n, pos[0])
            pos[0] += len(chunk)
            return chunk

        out[rel] = _hash_copy(read, stage / rel, length)
    for rel, data in p.blobs.items():
        out[rel] = _hash_copy(io.BytesIO(data).read, stage / rel, len(data))
    for rel, conn in p.sqlite.items():
        dst = sqlite3.connect(str(stage / rel))
        try:
            conn.backup(dst)  # keeps the source's journal mode (WAL): reopening changes nothing
        finally:
            dst.close()
        out[rel] = ((stage / rel).stat().st_size, sha256_file(stage / rel))
    out[MANIFEST] = _hash_copy(io.BytesIO(p.manifest).read, stage / MANIFEST, len(p.manifest))
    return out


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
             timeout: float = 60.0) -> SnapshotInfo:
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
    from slimvec.connectors import store_class
    from slimvec.indexer.index import external_store

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
    in_place = not store_class(m0.store).snapshot_files
    _remove_dead_leftovers(out)
    stage = out.parent / f".{out.name}.partial-{os.getpid()}"
    tmp = out.parent / f".{out.name}.{os.getpid()}.tmp"
    try:
        stage.mkdir()
        sums, m = _stage(folder, stage, in_place, hold, timeout)
        _fix_store_sums(m, stage, sums)
        meta = _meta(m, sums, stage)
        size, digest = _write_tar(stage, tmp, mode, meta, sums, progress)
        os.replace(tmp, out)
        _fsync_dir(out.parent)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    files = [r for r in sums]
    return SnapshotInfo(out, len(files), sum(s for s, _ in sums.values()), size, digest,
                        int(m.count))


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


def _stage(folder: Path, stage: Path, in_place: bool, hold: Any,
           timeout: float) -> tuple[dict[str, tuple[int, str]], Manifest]:
    """Pin the committed state and copy it into ``stage``."""
    from slimvec.indexer.safefs import read_bytes_nofollow

    if in_place:  # no writer may run during the copy
        guard = hold if hold is not None else _reader_lock(folder)
        with guard:
            raw = read_bytes_nofollow(folder / MANIFEST)
            m = Manifest.from_json(json.loads(raw), folder / MANIFEST)
            p = _pin(folder, m, raw, True)
            try:
                return _copy_pinned(p, folder, stage, True), m
            finally:
                p.close()
    with CommitGuard(folder, exclusive=False, timeout=timeout):  # milliseconds: no copying
        raw = read_bytes_nofollow(folder / MANIFEST)
        m = Manifest.from_json(json.loads(raw), folder / MANIFEST)
        p = _pin(folder, m, raw, False)
    try:
        return _copy_pinned(p, folder, stage, False), m
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
    import slimvec

    members = []
    for rel in sorted(set(sums) | {d.relative_to(stage).as_posix() for d in stage.rglob("*")
                                   if d.is_dir()}):
        if rel in sums:
            members.append({"name": rel, "type": "file", "size": sums[rel][0],
                            "sha256": sums[rel][1]})
        else:
            members.append({"name": rel, "type": "dir"})
    return {"format": SNAPSHOT_FORMAT, "format_version": SNAPSHOT_FORMAT_VERSION,
            "slimvec_version": slimvec.__version__,
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
        with tarfile.open(fileobj=hw, mode=mode, format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
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


from slimvec.indexer.restore import restore, verify_archive  # re-exported
