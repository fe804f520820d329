"""What searches of a served index read: its store behind the writer's lock, and the index as
of the writer's last commit (moved out of :mod:`slimvec.service.indexes.writer`, which re-exports them).
"""

from __future__ import annotations

import threading
from typing import Any

from slimvec.index.folder import Index

__all__ = ["LiveIndex", "LockedStore"]


class LockedStore:
    """Proxy of an opened store serialising every call through ``lock``."""

    def __init__(self, store: Any, lock: threading.RLock) -> None:
        self.inner = store
        self.lock = lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                return attr(*args, **kwargs)

        return call


class LiveIndex(Index):
    """An :class:`~slimvec.index.folder.Index` searched while the service writes it.

    A ``--keep-full`` side file opened for reading sees only the rows committed when it was
    opened; this index reopens it after each commit of the writer (:meth:`committed`), so a
    rescored search finds the rows added while the server runs.
    """

    def __init__(self, folder: Any, manifest: Any, reducer: Any, store: Any,
                 lock: threading.RLock) -> None:
        super().__init__(folder, manifest, reducer, store)
        self._rw = lock
        self._commits = 0
        self._live_full: Any = None
        self._live_seen = -1

    def committed(self) -> None:
        """The writer committed: the next rescore reopens the side file."""
        self._commits += 1

    @property
    def full_vectors(self) -> Any:
        """The side file as of the last commit (``None`` without one)."""
        info = self.manifest.full
        if info is None or not info.dir:
            return None
        with self._rw:
            if self._live_full is None or self._live_seen != self._commits:
                from slimvec.connectors.fullvectors import FullVectors

                self._live_full = FullVectors.open(self.folder / info.dir)
                self._live_seen = self._commits
            return self._live_full
