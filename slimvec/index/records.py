"""The record of what each document of an index was: ``records.sqlite`` in the index folder.

``slimvec ingest SRC --sync`` keeps, per store id (the user's id mapped by
:func:`slimvec.ids.doc_id`), a content hash of everything that determines the document's stored
vector and payload: its text, its payload columns, its source id (all of
:func:`content_hash`'s input is the payload the pipeline stores) and the identity of the encoder
that turned the text into a vector (:func:`encoder_identity`, kept once in the ``meta`` table:
when it differs, every record is stale). The reducer and the store are not part of it: they are
fixed per index, and rebuilding an index with another recipe re-reduces the same full vectors.

Why a SQLite file and not the payload
-------------------------------------
- It is the same for the four stores (Qdrant keeps payloads in its segments, FAISS / hnswlib in a
  side table, remote Qdrant over HTTP): one lookup of a whole batch of ids, one query for "every
  recorded id this run has not seen" (the documents that left the source), without scrolling a
  store.
- The user's payloads stay the user's: no hidden hash field in search results and exports.

Durability: the table is written only by :class:`RecordTable.put` *after* a batch was encoded,
reduced and upserted, and committed by the index builder's commit *after* the store was flushed
(:meth:`slimvec.indexer.builder.IndexBuilder.commit` calls ``on_commit`` after ``store.flush()``).
So a record is never ahead of the store: a crash can leave a stored document without (or with an
older) record, which the next sync re-checks, but never a record of a document that is not
stored (LlamaIndex's bug of a hash written before the transform, which then skipped the failed
documents forever). Deletes go the same way round: the store forgets the ids and is flushed, then
the records are removed in the same commit.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import PersistenceError

__all__ = ["RECORDS", "RecordTable", "content_hash", "encoder_identity"]

RECORDS = "records.sqlite"
_CHUNK = 500  # SQLite's default limit of host parameters is 999


def content_hash(payload: dict[str, Any]) -> bytes:
    """16-byte BLAKE2b of a document's stored payload (text, source id and columns) as canonical
    JSON (sorted keys; NaN / Infinity written as such, other non-JSON values by ``repr``)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=repr)
    return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def encoder_identity(manifest: Any) -> str:
    """What turns a text into this index's full vector: encoder spec and model name, input
    dimension, the id rule and the columns the text and id are read from."""
    return json.dumps({"encoder": manifest.encoder, "encoder_name": manifest.encoder_name,
                       "dim_in": manifest.dim_in, "id_rule": manifest.id_rule,
                       "text_column": manifest.text_column, "id_column": manifest.id_column},
                      sort_keys=True)


class RecordTable:
    """``records.sqlite``: store id -> content hash, plus the ids seen by the running sync.

    Parameters
    ----------
    path : Path
        The SQLite file (``INDEX/records.sqlite``).
    identity : str
        :func:`encoder_identity` of the index. A table made with another identity is emptied
        (every document is then checked against its stored payload again).

    Notes
    -----
    Writes are transactions committed only by :meth:`commit`, which the index builder calls after
    the store is durable. The ids seen by the running sync live in a TEMP table (gone with the
    connection: a sync is a new pass over its source, never a resume).
    """

    def __init__(self, path: Path, identity: str) -> None:
        self.path = Path(path)
        self.reset = False
        try:
            self.db = sqlite3.connect(str(self.path), isolation_level="DEFERRED")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, "
                            "h BLOB NOT NULL)")
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self.db.execute("CREATE TEMP TABLE seen (id INTEGER PRIMARY KEY)")
            row = self.db.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
            if row is None or row[0] != identity:
                self.reset = row is not None
                self.db.execute("DELETE FROM records")
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('identity', ?)", (identity,))
            self.db.commit()
        except sqlite3.Error as exc:
            raise PersistenceError(
                f"Cannot use the sync record {path}: {exc}. Check that the index folder is "
                "writable; a damaged record can be deleted (the next --sync rebuilds it from the "
                "stored payloads, without encoding).") from exc

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def lookup(self, ids: Sequence[int]) -> dict[int, bytes]:
        """Recorded hashes of those of ``ids`` that have one."""
        out: dict[int, bytes] = {}
        for chunk in _chunks([int(i) for i in ids]):
            q = f"SELECT id, h FROM records WHERE id IN ({','.join('?' * len(chunk))})"
            out.update((int(i), bytes(h)) for i, h in self.db.execute(q, chunk))
        return out

    def see(self, ids: Iterable[int]) -> None:
        """Mark ids as present in the source being read."""
        self.db.executemany("INSERT OR IGNORE INTO temp.seen (id) VALUES (?)",
                            [(int(i),) for i in ids])

    def put(self, ids: Sequence[int], hashes: Sequence[bytes]) -> None:
        """Record the hashes of documents just upserted (durable at the next :meth:`commit`)."""
        self.db.executemany("INSERT OR REPLACE INTO records (id, h) VALUES (?, ?)",
                            [(int(i), h) for i, h in zip(ids, hashes, strict=True)])

    def forget(self, ids: Sequence[int]) -> None:
        """Remove the records of documents just deleted from the store (durable at commit)."""
        self.db.executemany("DELETE FROM records WHERE id = ?", [(int(i),) for i in ids])

    def unseen(self) -> np.ndarray:
        """Recorded ids the running sync has not seen in its source (sorted int64)."""
        rows = self.db.execute("SELECT id FROM records WHERE id NOT IN (SELECT id FROM temp.seen) "
                               "ORDER BY id").fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def is_seen(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ``ids`` seen by the running sync."""
        seen: set[int] = set()
        for chunk in _chunks([int(i) for i in ids]):
            q = f"SELECT id FROM temp.seen WHERE id IN ({','.join('?' * len(chunk))})"
            seen.update(int(r[0]) for r in self.db.execute(q, chunk))
        return np.array([int(i) in seen for i in ids], dtype=bool)

    def commit(self) -> None:
        """Make the recorded changes durable (the builder calls it after the store is)."""
        self.db.commit()

    def close(self) -> None:
        """Close without committing what was not committed."""
        self.db.rollback()
        self.db.close()


def _chunks(values: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start:start + _CHUNK]
