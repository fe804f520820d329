"""The write journal of a Qdrant collection: one commit for every vector of a point.

A collection keeps a point in several stores, each with its own commit: the home index (ids,
payloads, the first dense vector), one index per further named vector, and the side shard of its
sparse and multivectors (:mod:`.named`, :mod:`.sparse`). A write of the collection is recorded
whole in its journal first (``ROOT/.qdrant/NAME.journal/SEQ.json``, written and fsynced before any
store is touched; filters resolved to ids), then applied store by store; its record is removed
once every store has committed it, and records leave in the order they came. A server that starts
with records left (it was killed mid-write) applies them again, in order, before it answers a
request.

Every operation is a set of last-writer-wins writes (a point's vectors and payload replaced,
payload keys set or removed, vectors or points deleted), and each store applies a collection's
writes in the order they were recorded, so applying the journal's records again over stores that
took part of them gives the state of the whole journal: a point is whole or absent after any
crash, never torn, stale or resurrected.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["Journal", "SIDE_KEYS", "multi_store", "native_write_refusal"]

log = logging.getLogger(__name__)

_SUFFIX = ".journal"
#: the settings keys of the vectors kept outside a collection's home index
SIDE_KEYS = ("sparse_vectors", "multi_vectors")


def multi_store(settings: dict[str, Any]) -> bool:
    """Whether a collection's points span several stores (named, sparse or multivectors)."""
    return len(settings.get("vectors") or ()) > 1 or any(settings.get(k) for k in SIDE_KEYS) \
        or bool(settings.get("no_dense"))


def native_write_refusal(folder: Path, name: str) -> str | None:
    """Why the native API may not write index ``name`` (``None``: it may): the index of a named
    vector, or the home of a collection whose points span several stores, is written through
    the Qdrant API alone, which changes every vector of a point in one journaled commit."""
    base, sep, _vname = name.partition("~")
    path = folder / f"{base}.json"
    if not path.is_file():
        return None
    if not sep and not multi_store(json.loads(path.read_text("utf-8"))):
        return None
    return (f"Index {name!r} holds a Qdrant collection's points, whose vectors are kept in "
            "several stores; write them through the Qdrant API (PUT /collections/"
            f"{base}/points, POST /collections/{base}/points/delete, .../points/payload), which "
            "changes all of a point's vectors and its payload in one commit.")


class Journal:
    """The journals of a server's Qdrant collections, under ``folder`` (``ROOT/.qdrant``).

    Parameters
    ----------
    folder : Path
        Where each collection's journal folder lives beside its settings.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._guard = threading.Lock()
        self._locks: dict[str, threading.RLock] = {}
        self._open: dict[str, list[tuple[int, list[Future[Any]]]]] = {}

    def path(self, name: str) -> Path:
        """The journal folder of collection ``name``."""
        return self.folder / f"{name}{_SUFFIX}"

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Hold collection ``name``'s write lock (its writes are recorded and applied in one
        order; reentrant)."""
        with self._guard:
            lock = self._locks.setdefault(name, threading.RLock())
        with lock:
            yield

    def records(self, name: str, skip: frozenset[int] = frozenset()) -> list[tuple[Path, dict[str, Any]]]:
        """The records left in collection ``name``'s journal, oldest first (those numbered in
        ``skip`` are not read)."""
        folder = self.path(name)
        out = []
        for p in sorted(folder.glob("*.json"), key=lambda p: int(p.stem)) if folder.is_dir() else []:
            if int(p.stem) in skip:
                continue
            try:
                out.append((p, json.loads(p.read_text("utf-8"))))
            except (OSError, ValueError):  # a record cut by a crash was never acknowledged
                log.warning("dropping the unreadable journal record %s", p)
                p.unlink(missing_ok=True)
        return out

    def names(self) -> list[str]:
        """The collections with a journal folder."""
        return sorted(p.name[:-len(_SUFFIX)] for p in self.folder.glob(f"*{_SUFFIX}") if p.is_dir())

    def write(self, name: str, op: dict[str, Any],
              apply: Callable[[dict[str, Any]], list[Future[Any]]], record: bool = True
              ) -> list[Future[Any]]:
        """Record ``op`` durably, then ``apply`` it (returning the futures of the commits it
        queued); the record leaves once they and every earlier record's are done. Call under
        :meth:`locked`. A failure while applying leaves the record, applied again by
        :meth:`replay` (at the next write of the collection, or at the next start). Without
        ``record`` (a collection in one store, whose commit is the point's) nothing is written,
        and the commits are still tracked for :meth:`drain`."""
        self.replay(name, apply)
        folder = self.path(name)
        seq = max((int(p.stem) for p in folder.glob("*.json")), default=0) + 1 if record else 0
        if record:
            folder.mkdir(parents=True, exist_ok=True)
            _write_durable(folder / f"{seq:012d}.json", op)
        futs = apply(op)
        with self._guard:
            self._open.setdefault(name, []).append((seq, futs))
        for f in futs:
            f.add_done_callback(lambda _f: self._settle(name))
        self._settle(name)
        return futs

    def replay(self, name: str, apply: Callable[[dict[str, Any]], list[Future[Any]]]) -> int:
        """Apply again, in order, the records no write of this process has under way (left by
        a crash or a failed write), wait for their commits and remove them; returns how many."""
        with self._guard:
            live = frozenset(seq for seq, _ in self._open.get(name, []))
        left = self.records(name, skip=live)  # a write under way is not read again
        for p, op in left:
            for f in apply(op):
                f.result()
            p.unlink(missing_ok=True)
        if left:
            log.info("collection %r: %d journal record(s) applied again", name, len(left))
        return len(left)

    def drain(self, name: str) -> None:
        """Wait until every write under way in collection ``name`` is committed (before a write
        that reads the collection: a filter, a payload path, existing vectors)."""
        with self._guard:
            futs = [f for _, fs in self._open.get(name, []) for f in fs]
        for f in futs:
            f.result()

    def forget(self, name: str) -> None:
        """Drop collection ``name``'s journal (the collection is deleted)."""
        import shutil

        with self._guard:
            self._open.pop(name, None)
        shutil.rmtree(self.path(name), ignore_errors=True)

    def _settle(self, name: str) -> None:
        """Remove the leading records whose commits are all done. At a failed one, every
        record stays on disk and none is under way any more: the next write (or start) applies
        them all again, in order."""
        with self._guard:
            q = self._open.get(name, [])
            while q and all(f.done() for f in q[0][1]):
                if any(f.exception() is not None for f in q[0][1]):
                    q.clear()
                    return
                seq, _ = q.pop(0)
                try:
                    os.unlink(self.path(name) / f"{seq:012d}.json")
                except FileNotFoundError:
                    pass


def _write_durable(path: Path, op: dict[str, Any]) -> None:
    """``op`` as one line of JSON at ``path``: a fsynced temporary file renamed into place."""
    from slimvec.persistence import fsync_dir

    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(op, separators=(",", ":"), allow_nan=False))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
