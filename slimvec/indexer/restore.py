"""Restore an index from a snapshot archive (:func:`restore`, also :mod:`slimvec.indexer.snapshot`).

An archive is untrusted input. Before anything is written, a first pass over it checks that:

- the first member is ``SNAPSHOT.json`` of a known format version;
- every member is a regular file or a folder (no symbolic or hard link, device, FIFO) whose name
  is a plain relative path (no absolute path, ``..``, ``.``, backslash, empty or control
  characters), listed once in ``SNAPSHOT.json``, with the listed size and SHA-256;
- every listed member is present (a truncated archive names the member it stopped in).

A second pass extracts into a temporary folder beside the target (files created exclusively,
links never followed, checksums checked again), the restored index is opened
(:func:`slimvec.open`), and the folder is renamed into place. Any failure removes the temporary
folder: nothing is left behind.
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
from pathlib import Path
from typing import Any, Callable, Iterator

from slimvec.errors import ConfigError, PersistenceError
from slimvec.indexer.locking import IndexLock
from slimvec.indexer.snapshot_pin import (
    SNAPSHOT_FILE, SNAPSHOT_FORMAT, SNAPSHOT_FORMAT_VERSION, SparseWriter,
)

__all__ = ["restore", "verify_archive", "ArchiveError"]

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_MAX_META = 64 << 20
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError)


class ArchiveError(PersistenceError):
    """An archive refused before anything was written (hostile, truncated or tampered)."""


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
    if ti.isfile() or ti.isdir():
        return
    kind = ("a symbolic link" if ti.issym() else "a hard link" if ti.islnk() else
            "a device file" if ti.isdev() else "a FIFO" if ti.isfifo() else f"of type {ti.type!r}")
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
                 sink: Callable[[bytes], None]) -> str:
    h = hashlib.sha256()
    try:
        fh = tar.extractfile(ti)
        assert fh is not None
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            sink(chunk)
    except _READ_ERRORS as exc:
        raise _refuse(archive, f"member {ti.name!r} is truncated or damaged "
                      f"({type(exc).__name__}: {exc})") from exc
    return h.hexdigest()


def _parse_meta(archive: Path, body: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(body)
    except ValueError as exc:
        raise _refuse(archive, f"{SNAPSHOT_FILE} is not JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != SNAPSHOT_FORMAT:
        raise _refuse(archive, f"{SNAPSHOT_FILE} does not describe a {SNAPSHOT_FORMAT!r}")
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise _refuse(archive, f"{SNAPSHOT_FILE}: format_version should be a positive int, got "
                      f"{version!r}")
    if version > SNAPSHOT_FORMAT_VERSION:
        raise PersistenceError(f"{archive}: snapshot format {version} is newer than this slimvec "
                               f"reads ({SNAPSHOT_FORMAT_VERSION}); upgrade slimvec to restore it.")
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
    return meta


def verify_archive(archive: str | os.PathLike[str]) -> dict[str, Any]:
    """Check an archive completely without writing anything (the first pass of :func:`restore`).

    Returns
    -------
    dict
        Its ``SNAPSHOT.json``.

    Raises
    ------
    PersistenceError
        The first problem found, naming the member.
    """
    archive = Path(archive)
    listed: dict[str, dict[str, Any]] = {}
    meta: dict[str, Any] | None = None
    seen: set[str] = set()
    try:
        tar = tarfile.open(archive, "r:*")
    except _READ_ERRORS as exc:
        raise _refuse(archive, f"not a readable tar archive ({type(exc).__name__}: {exc})") from exc
    with tar:
        for ti in _members(archive, tar):
            _check_name(archive, ti.name)
            _check_type(archive, ti)
            if meta is None:
                if ti.name != SNAPSHOT_FILE or not ti.isfile() or ti.size > _MAX_META:
                    raise _refuse(archive, f"the first member is {ti.name!r}, not {SNAPSHOT_FILE}")
                buf = bytearray()
                _read_member(archive, tar, ti, buf.extend)
                meta = _parse_meta(archive, bytes(buf))
                listed = {m["name"]: m for m in meta["members"]}
                continue
            _check_listed(archive, ti, listed, seen)
            if ti.isfile():
                got = _read_member(archive, tar, ti, lambda _: None)
                if got != listed[ti.name]["sha256"]:
                    raise _refuse(archive, f"member {ti.name!r}: SHA-256 differs from the one "
                                  f"{SNAPSHOT_FILE} records (the archive was modified or damaged)")
    if meta is None:
        raise _refuse(archive, f"the archive is empty (no {SNAPSHOT_FILE})")
    missing = sorted(set(listed) - seen)
    if missing:
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
             progress: Callable[[int, int], None] | None) -> None:
    """Second pass: write every member under ``tmp`` (exclusive creation, checksums again)."""
    listed = {m["name"]: m for m in meta["members"]}
    total = sum(m.get("size", 0) for m in listed.values())
    done = 0
    with tarfile.open(archive, "r:*") as tar:
        for ti in _members(archive, tar):
            if ti.name == SNAPSHOT_FILE:
                continue
            _check_name(archive, ti.name)
            _check_type(archive, ti)
            if ti.name not in listed:
                raise _refuse(archive, f"member {ti.name!r} is not listed in {SNAPSHOT_FILE}")
            dest = tmp.joinpath(*ti.name.split("/"))
            for parent in reversed(dest.relative_to(tmp).parents):
                if (tmp / parent).is_symlink():
                    raise _refuse(archive, f"member {ti.name!r} would be written through a link")
            if ti.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            out = SparseWriter(dest)  # exclusive, no link followed; zero runs stay holes
            try:
                got = _read_member(archive, tar, ti, out.write)
            finally:
                out.close()
            if got != listed[ti.name]["sha256"]:
                raise _refuse(archive, f"member {ti.name!r} changed between the check and the "
                              "extraction (SHA-256 differs)")
            done += ti.size
            if progress is not None:
                progress(done, total)


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
            force: bool = False, progress: Callable[[int, int], None] | None = None) -> Path:
    """Restore a snapshot into ``index_dir`` (see the module docstring).

    Parameters
    ----------
    archive : path
        An archive written by :func:`~slimvec.indexer.snapshot.snapshot`.
    index_dir : path
        Target folder: new, empty, or (``force``) an index to replace. Its parent must exist.
    force : bool
        Replace a non-empty ``index_dir`` (refused while another process uses that index).
    progress : callable, optional
        ``progress(done, total)`` in bytes while extracting.

    Returns
    -------
    Path
        ``index_dir``.

    Raises
    ------
    ConfigError
        A non-empty target without ``force``, a link or a file as target.
    PersistenceError
        A hostile, truncated or tampered archive (the message names the member), or a restored
        index that does not open.
    IndexBusyError
        ``force`` over an index another process is using.
    """
    from slimvec.indexer.index import open_index

    archive, target = Path(archive), Path(index_dir)
    if not archive.is_file():
        raise ConfigError(f"{archive} is not a file; give the path of a snapshot archive.")
    _target_state(target, force)
    meta = verify_archive(archive)
    _remove_dead_leftovers(target)
    tmp = target.parent / f".{target.name}.restore-{os.getpid()}"
    try:
        tmp.mkdir()
        _extract(archive, tmp, meta, progress)
        try:
            open_index(tmp).close()
        except Exception as exc:
            raise PersistenceError(f"{archive}: the restored index does not open ({exc}); nothing "
                                   "was restored.") from exc
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
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
