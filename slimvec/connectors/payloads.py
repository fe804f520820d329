"""A small SQLite side table of payloads for stores without their own (FAISS, hnswlib)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Sequence

from slimvec.errors import StoreError

__all__ = ["PayloadTable"]


class PayloadTable:
    """id -> JSON payload, in ``payloads.sqlite`` next to an index file (WAL mode)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS payloads (id INTEGER PRIMARY KEY, doc TEXT)")
        self._db.commit()

    @staticmethod
    def encode(ids: Sequence[int], payloads: Sequence[dict[str, Any] | None]
               ) -> list[tuple[int, str]]:
        """The rows :meth:`put_rows` writes; raises :class:`StoreError` before anything is written
        when a payload is not UTF-8 JSON (a store encodes first, then adds its vectors, so a
        refused batch leaves no vector without its payload)."""
        rows = []
        for i, p in zip(ids, payloads):
            if p is None:
                continue
            try:
                doc = json.dumps(p, ensure_ascii=False, allow_nan=False)
                doc.encode("utf-8")
            except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError included
                raise StoreError(f"The payload of id {int(i)} cannot be stored as UTF-8 JSON "
                                 f"({type(exc).__name__}: {str(exc)[:200]}); nothing of this "
                                 "batch was written. Fix or drop that payload.") from exc
            rows.append((int(i), doc))
        return rows

    def put_rows(self, rows: list[tuple[int, str]]) -> None:
        """Insert or replace rows of :meth:`encode` (committed on :meth:`commit`)."""
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO payloads (id, doc) VALUES (?, ?)", rows)

    def put(self, ids: Sequence[int], payloads: Sequence[dict[str, Any] | None]) -> None:
        """Insert or replace payloads (committed on :meth:`commit`)."""
        self.put_rows(self.encode(ids, payloads))

    def get(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Payloads of ids in order; ``None`` when absent."""
        wanted = [int(i) for i in ids]
        found: dict[int, dict[str, Any]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                q = f"SELECT id, doc FROM payloads WHERE id IN ({','.join('?' * len(chunk))})"
                for i, doc in self._db.execute(q, chunk):
                    found[i] = json.loads(doc)
        return [found.get(i) for i in wanted]

    def commit(self) -> None:
        """Make written payloads durable."""
        with self._lock:
            self._db.commit()

    def close(self) -> None:
        """Commit and close."""
        with self._lock:
            self._db.commit()
            self._db.close()
