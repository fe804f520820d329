"""Pinning the committed state of an index folder and copying it (:mod:`.snapshot`'s engine).

Under the commit guard (FAISS, hnswlib) each file is opened, so the open file keeps the version of
that commit whatever the writer renames over it next; SQLite files get a read transaction (WAL
snapshot isolation); the full-vector side file and ``rejects.jsonl`` are cut at their committed
lengths. Engines that rewrite files in place (Qdrant) are copied as they are, under a lock that
keeps every writer out for the whole copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from slimvec.errors import PersistenceError
from slimvec.indexer.manifest import MANIFEST, Manifest
from slimvec.indexer.safefs import read_bytes_nofollow

__all__ = ["Pinned", "pin", "copy_pinned", "SparseWriter", "SNAPSHOT_FILE", "SNAPSHOT_FORMAT",
           "SNAPSHOT_FORMAT_VERSION"]

#: the first member of a snapshot archive: every member with its size and SHA-256 (here, below
#: both :mod:`.snapshot` and :mod:`.restore`, so neither imports the other)
SNAPSHOT_FILE = "SNAPSHOT.json"
SNAPSHOT_FORMAT = "slimvec-snapshot"
SNAPSHOT_FORMAT_VERSION = 1

_CHUNK = 1 << 20
_VOLATILE = ("-wal", "-shm", "-journal", ".tmp")
#: entries of an index folder a snapshot carries besides the reducer, store and full vectors
_TOP_FILES = ("rejects.jsonl", "calibration-queries.safetensors", ".ingest-state.sqlite")

@dataclass
class Pinned:
    """The committed state of an index, held open: what a snapshot copies. :meth:`close` it."""

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


def _pin_fd(p: Pinned, folder: Path, rel: str, length: int | None = None) -> None:
    from slimvec.indexer.safefs import open_nofollow

    fd = open_nofollow(folder / rel, os.O_RDONLY)
    size = os.fstat(fd).st_size
    if length is not None and size < length:
        os.close(fd)
        raise PersistenceError(f"{folder / rel} holds {size} bytes, fewer than the {length} "
                               "committed; the index is damaged, so it was not snapshotted.")
    p.files[rel] = (fd, size if length is None else length)


def _pin_sqlite(p: Pinned, folder: Path, rel: str) -> None:
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


def pin(folder: Path, m: Manifest, raw_manifest: bytes, in_place: bool) -> Pinned:
    """Open everything a snapshot carries (under the commit guard or the reader lock)."""
    from slimvec.connectors.fullvectors import IDS, STATE, vectors_file_name
    from slimvec.indexer.index import REDUCER_DIR, STORE_DIR

    p = Pinned(manifest=raw_manifest)
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
            state = read_bytes_nofollow(folder / d / STATE)
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
class SparseWriter:
    """Writes a new file (created exclusively, no link followed) leaving runs of zeros as holes:
    Qdrant Edge preallocates sparse 32 MiB files (a 120-document index is 133 MB long, 296 KB
    allocated), and a copy written byte for byte would allocate all of it."""

    _BLOCK = 1 << 16

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        self.fh = os.fdopen(fd, "wb")
        self.n = 0

    def write(self, data: bytes) -> None:
        """Append ``data`` (zero blocks become holes)."""
        view = memoryview(data)
        for lo in range(0, len(view), self._BLOCK):
            block = view[lo:lo + self._BLOCK]
            if block.nbytes and bytes(block).count(0) == block.nbytes:
                self.fh.seek(block.nbytes, os.SEEK_CUR)
            else:
                self.fh.write(block)
        self.n += len(view)

    def close(self) -> None:
        """Set the length (a trailing hole), fsync and close."""
        try:
            self.fh.truncate(self.n)
            self.fh.flush()
            os.fsync(self.fh.fileno())
        finally:
            self.fh.close()


def _hash_copy(read: Callable[[int], bytes], dst: Path, length: int | None) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    out = SparseWriter(dst)
    try:
        while length is None or n < length:
            chunk = read(_CHUNK if length is None else min(_CHUNK, length - n))
            if not chunk:
                break
            out.write(chunk)
            h.update(chunk)
            n += len(chunk)
    finally:
        out.close()
    if length is not None and n != length:
        raise PersistenceError(f"{dst.name}: read {n} of {length} bytes while copying; the index "
                               "changed under the snapshot. Retry.")
    return n, h.hexdigest()


def copy_pinned(p: Pinned, folder: Path, stage: Path, in_place: bool) -> dict[str, tuple[int, str]]:
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


