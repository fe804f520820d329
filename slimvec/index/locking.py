"""Inter-process locks on an index folder.

One writer at a time: ``slimvec ingest`` (and ``migrate``) hold an exclusive lock on
``INDEX/.lock`` for the whole run. A reader of a store that cannot be opened while another process
writes it (Qdrant Edge and qdrant-client's local mode take the store's files for themselves, and a
Qdrant Edge shard opened during a write can even damage the writer's files) holds a shared lock
while the index is open, so a search started during an ingest fails at once with
:class:`~slimvec.errors.IndexBusyError` ("index is being written") instead of reading a moving
target. Stores that publish snapshots by atomic rename (FAISS, hnswlib) are read without a lock.

``.lock`` is opened without following links: a planted ``.lock`` link is refused
(:class:`~slimvec.index.safefs.LinkError`), never truncated through.

Locks are ``flock`` locks: the kernel drops them when the process dies, so a ``kill -9`` never
leaves a stale lock behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any

from slimvec.errors import IndexBusyError, PersistenceError
from slimvec.index.safefs import LinkError, open_nofollow

__all__ = ["IndexLock", "LOCK_NAME", "is_being_written", "CommitGuard"]

LOCK_NAME = ".lock"


class IndexLock:
    """An ``flock`` on ``FOLDER/.lock``, exclusive (writer) or shared (reader).

    Parameters
    ----------
    folder : path
        Index folder (created if missing when ``exclusive``).
    exclusive : bool
        Writer lock when true, reader lock otherwise.

    Raises
    ------
    IndexBusyError
        On :meth:`acquire` when another process holds a conflicting lock.
    """

    def __init__(self, folder: str | os.PathLike[str], exclusive: bool) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.exclusive = exclusive
        self._fd: int | None = None

    def acquire(self) -> IndexLock:
        """Take the lock without waiting; returns self."""
        try:
            if self.exclusive:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except LinkError:
            raise
        except OSError as exc:
            if not self.exclusive and exc.errno in (errno.EACCES, errno.EROFS, errno.ENOENT):
                self._fd = None  # a read-only index folder cannot be written by anyone
                return self
            raise PersistenceError(
                f"Cannot create the lock file {self.path}: {exc.strerror or exc}. Check that the "
                "folder is writable and the disk is not full."
            ) from exc
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            folder = self.path.parent
            if self.exclusive:
                raise IndexBusyError(
                    f"{folder}: the index is being written or read by another process; wait for "
                    "that ingest to finish (or close the other reader) and retry."
                ) from None
            raise IndexBusyError(
                f"{folder}: the index is being written by another process; retry when the ingest "
                "finishes (its store cannot be opened during a write)."
            ) from None
        if self.exclusive:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        _unlock(self._fd)
        self._fd = None

    def __enter__(self) -> IndexLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __del__(self) -> None:  # pragma: no cover - safety net
        try:
            self.release()
        except Exception:
            pass


def is_being_written(folder: str | os.PathLike[str]) -> bool:
    """True when another process holds the writer lock of ``folder``."""
    path = Path(folder) / LOCK_NAME
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe lock
    return False


class CommitGuard:
    """An ``flock`` on the index folder itself: held exclusive by a writer while it commits,
    shared by a snapshot while it pins the committed files (:mod:`slimvec.ops.snapshot`).

    The folder's own inode is locked, so no file is added to the index; ``flock`` locks are per
    open file description, so a writer thread and a snapshot thread of one process (the service)
    exclude each other too. The writer waits (a snapshot holds it for milliseconds: opening
    files, not copying them); a snapshot waits at most ``timeout`` seconds.

    Parameters
    ----------
    folder : path
        Index folder (must exist).
    exclusive : bool
        Commit (writer) when true, pin (snapshot) otherwise.
    timeout : float or None
        Seconds to wait for the lock; ``None``: wait as long as it takes.
    """

    def __init__(self, folder: str | os.PathLike[str], exclusive: bool,
                 timeout: float | None = None) -> None:
        self.folder = Path(folder)
        self.exclusive = exclusive
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> CommitGuard:
        import time

        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        mode = fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH
        try:
            if self.timeout is None:
                fcntl.flock(fd, mode)
            else:
                deadline = time.monotonic() + self.timeout
                while True:
                    try:
                        fcntl.flock(fd, mode | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise IndexBusyError(
                                f"{self.folder}: a commit did not finish within {self.timeout:g} "
                                "s; retry when the writer is less busy.") from None
                        time.sleep(0.005)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        _unlock(self._fd)
        self._fd = None


def _unlock(fd: int | None) -> None:
    """Unlock and close a lock's file descriptor (nothing for None): one release for
    :class:`IndexLock` and :class:`CommitGuard`."""
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
