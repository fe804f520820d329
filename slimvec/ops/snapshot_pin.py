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
import hmac
import io
import json
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.manifest import MANIFEST, Manifest
from slimvec.index.safefs import read_bytes_nofollow

__all__ = ["Pinned", "pin", "copy_pinned", "SparseWriter", "SNAPSHOT_FILE", "SNAPSHOT_FORMAT",
           "SNAPSHOT_FORMAT_VERSION", "KEY_ENV", "key_file", "snapshot_key", "sign_meta",
           "signature_problem", "RestoreLimits", "parse_size"]

#: the first member of a snapshot archive: every member with its size and SHA-256 (here, below
#: both :mod:`.snapshot` and :mod:`.restore`, so neither imports the other)
SNAPSHOT_FILE = "SNAPSHOT.json"
SNAPSHOT_FORMAT = "slimvec-snapshot"
SNAPSHOT_FORMAT_VERSION = 1

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_VOLATILE = ("-wal", "-shm", "-journal", ".tmp")
#: entries of an index folder a snapshot carries besides the reducer, store and full vectors
_TOP_FILES = ("rejects.jsonl", "calibration-queries.safetensors", ".ingest-state.sqlite")

# ---------------------------------------------------------------------- origin (issue 39 F3)
#: the key that signs snapshots and that restores verify; else :func:`key_file`'s
KEY_ENV = "SLIMVEC_SNAPSHOT_KEY"


def key_file() -> Path:
    """This installation's snapshot key when ``$SLIMVEC_SNAPSHOT_KEY`` is not set:
    ``$XDG_CONFIG_HOME/slimvec/snapshot.key`` (default ``~/.config``), 32 random bytes in hex,
    created with mode 0600 by the first snapshot."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "slimvec" / "snapshot.key"


def _read_key(path: Path) -> bytes:
    st = os.lstat(path)
    if not os.path.isfile(path) or os.path.islink(path) or st.st_mode & 0o077 \
            or st.st_uid != os.getuid():
        raise ConfigError(f"{path}: the snapshot key file must be a regular file of yours that "
                          f"only you can read (chmod 600 {path}); fix it, or set ${KEY_ENV}.")
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        key = b""
    if len(key) < 16:
        raise ConfigError(f"{path} should hold a hex key of 32 bytes; delete it (the next "
                          f"snapshot writes a new one) or set ${KEY_ENV}.")
    return key


def snapshot_key(create: bool = False) -> bytes | None:
    """The key snapshots are signed with: ``$SLIMVEC_SNAPSHOT_KEY`` (16 characters or more), else
    :func:`key_file` (written when ``create``, if it can be). None when there is none."""
    env = os.environ.get(KEY_ENV)
    if env:
        if len(env) < 16:
            raise ConfigError(f"${KEY_ENV} is {len(env)} characters long; use 16 or more (e.g. "
                              "the output of 'openssl rand -hex 32').")
        return env.encode()
    path = key_file()
    if os.path.lexists(path):
        return _read_key(path)
    if not create:
        return None
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another process made one first: use it
            os.link(tmp, path)
    except OSError as exc:
        log.warning("cannot create the snapshot key %s (%s): the snapshot is written unsigned and "
                    "its restore will need --trust-unsigned; set $%s to sign.", path, exc, KEY_ENV)
        return None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return _read_key(path)


def _key_id(key: bytes) -> str:
    return hmac.new(key, b"slimvec-snapshot-key-id", hashlib.sha256).hexdigest()[:16]


def _mac(meta: dict[str, Any], key: bytes) -> str:
    body = json.dumps({k: v for k, v in meta.items() if k != "signature"}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True).encode()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def sign_meta(meta: dict[str, Any], key: bytes) -> None:
    """Add ``signature`` to ``SNAPSHOT.json``'s object: HMAC-SHA256 over the rest of it (which
    lists every member's size and SHA-256), with the id of the key (never the key)."""
    meta["signature"] = {"alg": "hmac-sha256", "key_id": _key_id(key), "mac": _mac(meta, key)}


def signature_problem(meta: dict[str, Any], key: bytes | None) -> str | None:
    """None when ``meta`` is signed with ``key``; else what is wrong, in words."""
    sig = meta.get("signature")
    if not isinstance(sig, dict) or not isinstance(sig.get("mac"), str):
        return f"the archive is unsigned (its {SNAPSHOT_FILE} carries no signature)"
    if key is None:
        return (f"the archive is signed, but this installation has no snapshot key to check it "
                f"with (${KEY_ENV} is not set and {key_file()} does not exist)")
    if sig.get("alg") != "hmac-sha256" or sig.get("key_id") != _key_id(key):
        return (f"the archive is signed with another key (key id {str(sig.get('key_id'))[:32]!r}; "
                f"this installation's is {_key_id(key)!r}): it was made elsewhere")
    if not hmac.compare_digest(sig["mac"], _mac(meta, key)):
        return (f"its signature does not verify: {SNAPSHOT_FILE} was changed after it was signed "
                "(the archive was tampered with)")
    return None


# ---------------------------------------------------------------------- restore caps (F7)
def parse_size(text: str) -> int:
    """``"64G"``, ``"512M"``, ``"1.5T"``, ``"1000"`` (bytes; K/M/G/T are powers of 1024)."""
    t = str(text).strip().upper().removesuffix("B").removesuffix("I")
    scale = 1024 ** (" KMGT".index(t[-1]) if t and t[-1] in "KMGT" else 0)
    try:
        value = float(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        value = -1
    if not 0 < value < 2 ** 62:
        raise ConfigError(f"Invalid size {text!r}: expected bytes, or a number with K, M, G or T "
                          "(e.g. 64G).")
    return int(value)


@dataclass(frozen=True)
class RestoreLimits:
    """Caps on what an archive may expand to (issue 39 F7). The defaults fit real indexes with
    room to spare; raise them with ``$SLIMVEC_RESTORE_MAX_MEMBER`` / ``_MAX_TOTAL`` (sizes such
    as ``64G``) and ``$SLIMVEC_RESTORE_MAX_RATIO``, or ``slimvec restore --max-member-size /
    --max-size / --max-ratio``.

    Attributes
    ----------
    max_member_bytes : int
        One file (default 64 GiB).
    max_total_bytes : int
        All files together (default 256 GiB).
    max_ratio : float
        Bytes of data per compressed byte read, 64 KiB blocks of zeros (holes once written) not
        counted (default 200). Snapshots of small FAISS, hnswlib and Qdrant Edge indexes
        measure 0.6-3.5 (gzip-3 and xz); counting the zeros, Qdrant Edge's preallocated files
        make a .tar.xz 1,100x, which is why they are left out.
    """

    max_member_bytes: int = 64 << 30
    max_total_bytes: int = 256 << 30
    max_ratio: float = 200.0

    @classmethod
    def from_env(cls) -> RestoreLimits:
        """The defaults, overridden by the ``$SLIMVEC_RESTORE_MAX_*`` variables that are set."""
        env, d = os.environ.get, cls()
        ratio = env("SLIMVEC_RESTORE_MAX_RATIO")
        try:
            max_ratio = float(ratio) if ratio else d.max_ratio
        except ValueError:
            raise ConfigError(f"$SLIMVEC_RESTORE_MAX_RATIO={ratio!r} should be a number.") from None
        member, total = env("SLIMVEC_RESTORE_MAX_MEMBER"), env("SLIMVEC_RESTORE_MAX_TOTAL")
        return cls(parse_size(member) if member else d.max_member_bytes,
                   parse_size(total) if total else d.max_total_bytes, max_ratio)


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
    from slimvec.index.safefs import open_nofollow

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
    from slimvec.index.folder import REDUCER_DIR, STORE_DIR

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

    BLOCK = 1 << 16

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        self.fh = os.fdopen(fd, "wb")
        self.n = 0

    def write(self, data: bytes) -> None:
        """Append ``data`` (zero blocks become holes)."""
        view = memoryview(data)
        for lo in range(0, len(view), self.BLOCK):
            block = view[lo:lo + self.BLOCK]
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


