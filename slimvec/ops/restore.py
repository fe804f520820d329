"""Restore an index from a snapshot archive (:func:`restore`, also :mod:`slimvec.ops.snapshot`).

An archive is untrusted input. Before anything is written, a first pass over it checks:

- the first member is ``SNAPSHOT.json`` of a known format version, signed (HMAC-SHA256) with this
  installation's snapshot key (``$SLIMVEC_SNAPSHOT_KEY``, else ``~/.config/slimvec/snapshot.key``):
  checksums prove integrity, not origin, as whoever writes an archive can recompute them. An
  unsigned archive, or one signed with another key, is refused unless ``trust_unsigned``;
- every member is a regular file or a folder (no link, device, FIFO, sparse file) whose name is a
  plain relative path (no absolute path, ``..``, ``.``, backslash, empty or control characters),
  listed once in ``SNAPSHOT.json`` and not under a listed file, with the listed size and SHA-256;
- every listed member is present (a truncated archive names the member it stopped in);
- sizes (:class:`RestoreLimits`): per file and in all as listed (before anything is decompressed),
  and at most ``max_ratio`` bytes of data (zero runs, written as holes, not counted) per
  compressed byte read: a decompression bomb is stopped while it is read.

A second pass extracts into a temporary folder beside the target (files created exclusively,
links never followed, checksums checked again). The restored index is then opened and searched in
a child process (:func:`slimvec.index.probe.probe_index`): a store file that crashes the engine
(a segfault) kills that child, not this process, and the restore is refused with the reason. Only
then is the folder renamed into place. Any failure removes the temporary folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import os
import shutil
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from slimvec.errors import ConfigError, PersistenceError, SlimvecError
from slimvec.index.locking import IndexLock
from slimvec.index.manifest import MANIFEST
from slimvec.ops import snapshot_pin as pin
from slimvec.ops.snapshot_pin import SNAPSHOT_FILE, RestoreLimits
from slimvec.persistence import fsync_dir

__all__ = ["restore", "verify_archive", "ArchiveError", "UnsignedArchiveError", "IndexProbeError",
           "RestoreLimits"]

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)
_HOLE = bytes(pin.SparseWriter.BLOCK)
_MAX_META = 64 << 20
_MAX_MEMBERS = 100_000
_RATIO_FREE = 64 << 20  # data bytes read before the ratio is checked (small archives vary most)
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError)


class ArchiveError(PersistenceError):
    """An archive refused before anything was written (hostile, truncated or tampered)."""


class UnsignedArchiveError(ArchiveError):
    """Not signed with this installation's snapshot key (``trust_unsigned`` restores it)."""


class IndexProbeError(ArchiveError):
    """The restored index crashed, failed or hung when opened and searched in a child process."""


class _Budget:
    """Counts the data read out of an archive against the compressed bytes read (``raw``)."""

    def __init__(self, archive: Path, raw: IO[bytes], limits: RestoreLimits) -> None:
        self.archive, self.raw, self.limits, self.data = archive, raw, limits, 0

    def count(self, name: str, chunk: bytes) -> None:
        if chunk == _ZEROS:
            return  # a hole once written
        for lo in range(0, len(chunk), len(_HOLE)):  # the blocks SparseWriter writes as holes
            block = chunk[lo:lo + len(_HOLE)]
            self.data += 0 if block == _HOLE[:len(block)] else len(block)
        read = self.raw.tell()
        if self.data > _RATIO_FREE + self.limits.max_ratio * read:
            raise _refuse(self.archive, f"member {name!r} expands more than "
                          f"{self.limits.max_ratio:g} times ({self.data:,} bytes of data from "
                          f"{read:,} compressed): a decompression bomb, or data far more "
                          "compressible than an index; if you trust the archive, raise the cap "
                          "(--max-ratio, $SLIMVEC_RESTORE_MAX_RATIO)")


def _refuse(archive: Path, what: str) -> ArchiveError:
    return ArchiveError(f"{archive}: {what}. Nothing was restored; use an archive written by "
                "'slimvec snapshot', or take a new snapshot.")


def _check_name(archive: Path, name: str) -> None:
    parts = name.split("/")
    bad = (not name or name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts)
           or any(ord(c) < 32 or ord(c) == 127 for c in name) or len(name) > 1024)
    if bad:
        raise _refuse(archive, f"member {name[:200]!r} is not a plain relative path inside the "
                      "index (absolute, '..', '.', empty part or control character)")


def _check_type(archive: Path, ti: tarfile.TarInfo) -> None:
    if (ti.isfile() and not ti.issparse()) or ti.isdir():
        return
    kind = ("a symbolic link" if ti.issym() else "a hard link" if ti.islnk() else
            "a FIFO" if ti.isfifo() else "a device file" if ti.isdev() else
            "a sparse file" if ti.issparse() else f"of type {ti.type!r}")
    raise _refuse(archive, f"member {ti.name[:200]!r} is {kind}; an index snapshot holds only "
                  "regular files and folders")


def _members(archive: Path, tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    last = "(the start)"
    while True:
        try:
            ti = tar.next()
        except _READ_ERRORS as exc:
            raise _refuse(archive, f"the archive is truncated or damaged after member {last!r} "
                          f"({type(exc).__name__}: {exc})") from exc
        if ti is None:
            return
        last = ti.name
        yield ti


def _read_member(archive: Path, tar: tarfile.TarFile, ti: tarfile.TarInfo,
                 sink: Callable[[bytes], None], budget: _Budget) -> str:
    h = hashlib.sha256()
    try:
        fh = tar.extractfile(ti)
        assert fh is not None
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            budget.count(ti.name, chunk)
            h.update(chunk)
            sink(chunk)
    except _READ_ERRORS as exc:
        raise _refuse(archive, f"member {ti.name!r} is truncated or damaged "
                      f"({type(exc).__name__}: {exc})") from exc
    return h.hexdigest()


def _parse_meta(archive: Path, body: bytes, limits: RestoreLimits) -> dict[str, Any]:
    try:
        meta = json.loads(body)
    except ValueError as exc:
        raise _refuse(archive, f"{SNAPSHOT_FILE} is not JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != pin.SNAPSHOT_FORMAT:
        raise _refuse(archive, f"{SNAPSHOT_FILE} does not describe a {pin.SNAPSHOT_FORMAT!r}")
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise _refuse(archive, f"{SNAPSHOT_FILE}: format_version should be a positive int, got "
                      f"{version!r}")
    if version > pin.SNAPSHOT_FORMAT_VERSION:
        raise PersistenceError(f"{archive}: snapshot format {version} is newer than this slimvec "
                               f"reads ({pin.SNAPSHOT_FORMAT_VERSION}); upgrade slimvec to restore it.")
    members = meta.get("members")
    if not isinstance(members, list):
        raise _refuse(archive, f"{SNAPSHOT_FILE}: 'members' should be a list")
    for m in members:
        ok = isinstance(m, dict) and isinstance(m.get("name"), str) and (
            m.get("type") == "dir" or (m.get("type") == "file" and isinstance(m.get("size"), int)
                                       and isinstance(m.get("sha256"), str)))
        if not ok:
            raise _refuse(archive, f"{SNAPSHOT_FILE}: member entry {str(m)[:120]} should have "
                          "name, type ('file' with size and sha256, or 'dir')")
        _check_name(archive, m["name"])
    _check_sizes(archive, members, limits)
    return meta


def _check_sizes(archive: Path, members: list[dict[str, Any]], limits: RestoreLimits) -> None:
    """Names listed once, none under a file, sizes within ``limits``: before any data is read."""
    if len(members) > _MAX_MEMBERS:
        raise _refuse(archive, f"{SNAPSHOT_FILE} lists {len(members):,} members; an index holds "
                      f"far fewer (at most {_MAX_MEMBERS:,} are restored)")
    kinds: dict[str, str] = {}
    for m in members:
        if m["name"] in kinds:
            raise _refuse(archive, f"member {m['name']!r} is listed twice in {SNAPSHOT_FILE}")
        kinds[m["name"]] = m["type"]
    total = 0
    for m in members:
        parts = m["name"].split("/")
        for i in range(1, len(parts)):
            if kinds.get(under := "/".join(parts[:i])) == "file":
                raise _refuse(archive, f"member {m['name']!r} lies under {under!r}, which is "
                              "listed as a file: a path cannot be both a file and a folder")
        size = m.get("size", 0)
        if size < 0 or size > limits.max_member_bytes:
            raise _refuse(archive, f"member {m['name']!r} is listed at {size:,} bytes, above the "
                          f"cap of {limits.max_member_bytes:,} per file; if you trust the archive, "
                          "raise it (--max-member-size, $SLIMVEC_RESTORE_MAX_MEMBER)")
        total += size
    if total > limits.max_total_bytes:
        raise _refuse(archive, f"its members add up to {total:,} bytes, above the cap of "
                      f"{limits.max_total_bytes:,}; if you trust the archive, raise it "
                      "(--max-size, $SLIMVEC_RESTORE_MAX_TOTAL)")


def _check_origin(archive: Path, meta: dict[str, Any], trust_unsigned: bool) -> None:
    """Refuse an archive not signed with this installation's key, unless ``trust_unsigned``."""
    problem = pin.signature_problem(meta, pin.snapshot_key(create=False))
    if problem is None:
        return
    if trust_unsigned:
        log.warning("%s: %s; going on (trust_unsigned).", archive, problem)
        return
    raise UnsignedArchiveError(
        f"{archive}: {problem}. Nothing was restored: only archives signed with this "
        f"installation's snapshot key (${pin.KEY_ENV}, else the key file 'slimvec snapshot' creates) "
        "are restored as they are. If you trust where it comes from, pass --trust-unsigned "
        '(HTTP: "trust_unsigned": true; Python: trust_unsigned=True).')


def _open_tar(archive: Path) -> tuple[IO[bytes], tarfile.TarFile]:
    """The raw file (its position: compressed bytes read) and the tar read through it."""
    raw = open(archive, "rb")  # noqa: SIM115 - closed by the caller
    try:
        return raw, tarfile.open(fileobj=raw, mode="r:*")
    except _READ_ERRORS as exc:
        raw.close()
        raise _refuse(archive, f"not a readable tar archive ({type(exc).__name__}: {exc})") from exc


def verify_archive(archive: str | os.PathLike[str], *, trust_unsigned: bool = False,
                   limits: RestoreLimits | None = None) -> dict[str, Any]:
    """Check an archive completely without writing anything (the first pass of :func:`restore`).

    Parameters
    ----------
    archive : path
    trust_unsigned : bool
        Accept an archive that is unsigned or signed with another key (every other check stays).
    limits : RestoreLimits, optional
        Size and ratio caps (default :meth:`RestoreLimits.from_env`).

    Returns
    -------
    dict
        Its ``SNAPSHOT.json``.

    Raises
    ------
    UnsignedArchiveError
        Not signed with this installation's key (and not ``trust_unsigned``).
    PersistenceError
        The first problem found, naming the member.
    """
    archive = Path(archive)
    limits = limits or RestoreLimits.from_env()
    listed: dict[str, dict[str, Any]] = {}
    meta: dict[str, Any] | None = None
    seen: set[str] = set()
    raw, tar = _open_tar(archive)
    budget = _Budget(archive, raw, limits)
    with raw, tar:
        for ti in _members(archive, tar):
            _check_name(archive, ti.name)
            _check_type(archive, ti)
            if meta is None:
                if ti.name != SNAPSHOT_FILE or not ti.isfile() or ti.size > _MAX_META:
                    raise _refuse(archive, f"the first member is {ti.name!r}, not {SNAPSHOT_FILE}")
                buf = bytearray()
                _read_member(archive, tar, ti, buf.extend, budget)
                meta = _parse_meta(archive, bytes(buf), limits)
                _check_origin(archive, meta, trust_unsigned)
                listed = {m["name"]: m for m in meta["members"]}
                continue
            _check_listed(archive, ti, listed, seen)
            if ti.isfile():
                got = _read_member(archive, tar, ti, lambda _: None, budget)
                if got != listed[ti.name]["sha256"]:
                    raise _refuse(archive, f"member {ti.name!r}: SHA-256 differs from the one "
                                  f"{SNAPSHOT_FILE} records (the archive was modified or damaged)")
    if meta is None:
        raise _refuse(archive, f"the archive is empty (no {SNAPSHOT_FILE})")
    if missing := sorted(set(listed) - seen):
        raise _refuse(archive, f"member {missing[0]!r} listed in {SNAPSHOT_FILE} is missing "
                      f"({len(missing)} missing: the archive is truncated)")
    if "manifest.json" not in listed:
        raise _refuse(archive, "it holds no manifest.json")
    return meta


def _check_listed(archive: Path, ti: tarfile.TarInfo, listed: dict[str, dict[str, Any]],
                  seen: set[str]) -> None:
    entry = listed.get(ti.name)
    if entry is None:
        raise _refuse(archive, f"member {ti.name!r} is not listed in {SNAPSHOT_FILE}")
    if ti.name in seen:
        raise _refuse(archive, f"member {ti.name!r} appears twice")
    seen.add(ti.name)
    if (entry["type"] == "dir") != ti.isdir():
        raise _refuse(archive, f"member {ti.name!r} is a {'folder' if ti.isdir() else 'file'} "
                      f"but {SNAPSHOT_FILE} lists a {entry['type']}")
    if ti.isfile() and ti.size != entry["size"]:
        raise _refuse(archive, f"member {ti.name!r} holds {ti.size} bytes, {SNAPSHOT_FILE} "
                      f"lists {entry['size']}")


def _extract(archive: Path, tmp: Path, meta: dict[str, Any],
             progress: Callable[[int, int], None] | None, limits: RestoreLimits) -> None:
    """Second pass: write every member under ``tmp`` (exclusive creation, checksums again)."""
    listed = {m["name"]: m for m in meta["members"]}
    total, done = sum(m.get("size", 0) for m in listed.values()), 0
    raw, tar = _open_tar(archive)
    budget = _Budget(archive, raw, limits)
    with raw, tar:
        for ti in _members(archive, tar):
            if ti.name == SNAPSHOT_FILE:
                continue
            _check_name(archive, ti.name)
            _check_type(archive, ti)
            if (entry := listed.get(ti.name)) is None or (ti.isfile() and ti.size != entry["size"]):
                raise _refuse(archive, f"member {ti.name!r} is not listed in {SNAPSHOT_FILE} "
                              "as it is (the archive changed since it was checked)")
            try:
                got = _write_member(archive, tar, ti, tmp, budget)
            except SlimvecError:
                raise
            except OSError as exc:
                raise PersistenceError(f"{archive}: writing member {ti.name!r} failed ({exc}); "
                                       "nothing was restored. Free disk space, or check the "
                                       "target folder.") from exc
            if got is not None and got != entry["sha256"]:
                raise _refuse(archive, f"member {ti.name!r} changed between the check and the "
                              "extraction (SHA-256 differs)")
            done += ti.size
            if progress is not None:
                progress(done, total)


def _write_member(archive: Path, tar: tarfile.TarFile, ti: tarfile.TarInfo, tmp: Path,
                  budget: _Budget) -> str | None:
    """Write one member under ``tmp``; its SHA-256 (None for a folder)."""
    dest = tmp.joinpath(*ti.name.split("/"))
    for parent in reversed(dest.relative_to(tmp).parents):
        if (tmp / parent).is_symlink():
            raise _refuse(archive, f"member {ti.name!r} would be written through a link")
        if parent != Path(".") and (tmp / parent).exists() and not (tmp / parent).is_dir():
            raise _refuse(archive, f"member {ti.name!r} lies under {parent.as_posix()!r}, "
                          "which is a file")
    if ti.isdir():
        dest.mkdir(parents=True, exist_ok=True)
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = pin.SparseWriter(dest)  # exclusive, no link followed; zero runs stay holes
    try:
        return _read_member(archive, tar, ti, out.write, budget)
    finally:
        out.close()


def _target_state(target: Path, force: bool) -> bool:
    """True when ``target`` exists (as an empty folder, or any folder with ``force``)."""
    if target.is_symlink():
        raise ConfigError(f"{target} is a symbolic link; restore into a real folder path.")
    if not os.path.lexists(target):
        if not target.parent.is_dir():
            raise ConfigError(f"{target.parent} does not exist; create it first.")
        return False
    if not target.is_dir():
        raise ConfigError(f"{target} exists and is not a folder; choose another --index.")
    if any(target.iterdir()) and not force:
        raise ConfigError(f"{target} is not empty; restore into a new or empty folder, or pass "
                          "--force (Python: force=True) to replace what it holds.")
    return True


def restore(archive: str | os.PathLike[str], index_dir: str | os.PathLike[str], *,
            force: bool = False, progress: Callable[[int, int], None] | None = None,
            trust_unsigned: bool = False, limits: RestoreLimits | None = None, nested: str | None = None) -> Path:
    """Restore a snapshot into ``index_dir`` (see the module docstring).

    Parameters
    ----------
    archive : path
        An archive written by :func:`~slimvec.ops.snapshot.snapshot`.
    index_dir : path
        Target folder: new, empty, or (``force``) an index to replace. Its parent must exist.
    force : bool
        Replace a non-empty ``index_dir`` (refused while another process uses that index).
    progress : callable, optional
        ``progress(done, total)`` in bytes while extracting.
    trust_unsigned : bool
        Restore an archive that is unsigned or signed with another installation's key (every
        other check, and the check in a child process, still runs).
    limits : RestoreLimits, optional
        Size and ratio caps (default :meth:`RestoreLimits.from_env`).
    nested : str, optional
        Index folders at ``nested/*/`` of the archive (a collection's), each probed too.

    Returns
    -------
    Path
        ``index_dir``.

    Raises
    ------
    ConfigError
        A non-empty target without ``force``, a link or a file as target.
    UnsignedArchiveError
        Not signed with this installation's snapshot key, without ``trust_unsigned``.
    IndexProbeError
        The restored index crashed (e.g. a segfault), failed or hung when a child process
        opened and searched it.
    PersistenceError
        A hostile, truncated, oversized or tampered archive (the message names the member).
    IndexBusyError
        ``force`` over an index another process is using.
    """
    from slimvec.index.probe import ProbeFailed, probe_index

    archive, target = Path(archive), Path(index_dir)
    if not archive.is_file():
        raise ConfigError(f"{archive} is not a file; give the path of a snapshot archive.")
    _target_state(target, force)
    limits = limits or RestoreLimits.from_env()
    meta = verify_archive(archive, trust_unsigned=trust_unsigned, limits=limits)
    _remove_dead_leftovers(target)
    tmp = target.parent / f".{target.name}.restore-{os.getpid()}"
    try:
        tmp.mkdir()
        _extract(archive, tmp, meta, progress, limits)
        inner = sorted(p.parent for p in (tmp / nested).glob(f"*/{MANIFEST}")) if nested else []
        try:  # in a child process: a store file that crashes the engine must not crash us
            for folder in [tmp, *inner]:
                probe_index(folder)
        except ProbeFailed as exc:
            reason = exc.reason.replace(str(tmp), str(target))
            raise IndexProbeError(f"{archive}: the restored index {reason}; nothing was "
                                  "restored. Its files are damaged or were made to crash "
                                  "slimvec: restore another snapshot.") from exc
        _swap(tmp, target, force)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("restored %s into %s (%s documents)", archive, target, meta.get("count"))
    return target


def _swap(tmp: Path, target: Path, force: bool) -> None:
    """Rename the restored folder into place. Over an existing folder (``force``) the two are
    exchanged atomically (``renameat2(RENAME_EXCHANGE)``; the old one then lies at ``tmp`` and is
    deleted with it); where the kernel lacks it, the old one is renamed aside first."""
    if not _target_state(target, force):
        os.rename(tmp, target)
    else:
        with IndexLock(target, exclusive=True):  # nobody reads or writes it meanwhile
            if not _exchange(tmp, target):
                old = target.parent / f".{target.name}.old-{os.getpid()}"
                os.rename(target, old)
                try:
                    os.rename(tmp, target)
                except OSError:
                    os.rename(old, target)
                    raise
                os.rename(old, tmp)  # deleted with the temporary folder
    fsync_dir(target.parent)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux ``renameat2``); False where unsupported."""
    import ctypes
    import errno

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _remove_dead_leftovers(target: Path) -> None:
    """Remove the temporary folders of a restore into ``target`` whose process is gone (killed
    mid-way; a running one's are left alone)."""
    for path in target.parent.glob(f".{target.name}.restore-*"):
        pid = path.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid() or path.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            log.info("removing %s, left by a restore that was killed", path)
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue
