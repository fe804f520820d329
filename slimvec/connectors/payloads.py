"""A small SQLite side table of payloads for stores without their own (FAISS, hnswlib)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Sequence

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

    def put(self, ids: Sequence[int], payloads: Sequence[dict[str, Any] | None]) -> None:
        """Insert or replace payloads (committed on :meth:`commit`)."""
        rows = [(int(i), json.dumps(p, ensure_ascii=False)) for i, p in zip(ids, payloads) if p is not None]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO payloads (id, doc) VALUES (?, ?)", rows)

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
