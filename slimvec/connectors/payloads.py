"""A small SQLite side table of payloads for stores without their own (FAISS, hnswlib)."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import StoreError

log = logging.getLogger(__name__)

__all__ = ["PayloadTable", "PayloadTableStore", "scan_filter", "select_filter"]


def _datetime_micros(value: Any) -> int | None:
    from slimvec.filter_syntax import datetime_micros

    return datetime_micros(value) if isinstance(value, str) else None


class _Pin(threading.local):
    """Per thread: the depth of nested :meth:`PayloadTable.one_read` blocks, and whether the
    version was checked in the outermost (a context manager itself: no generator per search)."""

    depth = 0
    checked = False

    def __enter__(self) -> None:
        self.depth += 1
        if self.depth == 1:
            self.checked = False

    def __exit__(self, *exc: Any) -> None:
        self.depth -= 1


class PayloadTable:
    """id -> JSON payload, in ``payloads.sqlite`` next to an index file (WAL mode)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        # a datetime range's SQL (slimvec.connectors.payload_sql) reads strings the way Qdrant does
        self._db.create_function("slimvec_datetime", 1, _datetime_micros, deterministic=True)
        self._db.execute("CREATE TABLE IF NOT EXISTS payloads (id INTEGER PRIMARY KEY, doc TEXT)")
        self._db.commit()
        self._has_deleted: bool | None = None
        #: the in-memory payload index (issue 37), built at the first filter, then kept current
        self._mem: Any = None
        self._mem_version = -1
        self._pin = _Pin()  # per thread: inside one_read, and whether the version was checked
        #: fields filters read that have no payload index (reported by ``info``)
        self.unindexed: set[str] = set()

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
            if self._mem is not None:
                for i, doc in rows:
                    self._mem.put(int(i), json.loads(doc))

    def put(self, ids: Sequence[int], payloads: Sequence[dict[str, Any] | None]) -> None:
        """Insert or replace payloads (committed on :meth:`commit`)."""
        self.put_rows(self.encode(ids, payloads))

    def adopt(self, path: Path) -> None:
        """Insert or replace every row of the payload table at ``path`` (another store's, closed),
        committed here."""
        with self._lock:
            self._db.commit()  # ATTACH needs no open transaction
            self._db.execute("ATTACH DATABASE ? AS adopted", (str(path),))
            try:
                self._db.execute("INSERT OR REPLACE INTO payloads (id, doc) "
                                 "SELECT id, doc FROM adopted.payloads")
                if self._mem is not None:
                    for i, doc in self._db.execute("SELECT id, doc FROM adopted.payloads"):
                        self._mem.put(int(i), json.loads(doc))
                self._db.commit()
            finally:
                self._db.execute("DETACH DATABASE adopted")

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

    # ------------------------------------------------ lifecycle operations (issue 25)
    def delete(self, ids: Sequence[int]) -> None:
        """Remove the payload rows of ``ids`` (committed on :meth:`commit`)."""
        with self._lock:
            self._db.executemany("DELETE FROM payloads WHERE id = ?", [(int(i),) for i in ids])
            if self._mem is not None:
                self._mem.remove(ids)

    def rows(self, batch: int = 2000) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every (id, payload) row in id order, read ``batch`` rows at a time."""
        last = -1
        while True:
            with self._lock:
                got = self._db.execute("SELECT id, doc FROM payloads WHERE id > ? ORDER BY id LIMIT ?",
                                       (last, batch)).fetchall()
            if not got:
                return
            for i, doc in got:
                yield int(i), json.loads(doc)
            last = int(got[-1][0])

    def update(self, ids: Sequence[int], fields: dict[str, Any], overwrite: bool = False) -> None:
        """Merge ``fields`` into the payloads of ``ids`` (``overwrite``: replace them whole).

        An id without a payload row gets ``fields`` as its payload. Committed on :meth:`commit`.
        """
        wanted = [int(i) for i in ids]
        current = [None] * len(wanted) if overwrite else self.get(wanted)
        self.put(wanted, [{**(c or {}), **fields} for c in current])

    def delete_keys(self, ids: Sequence[int], keys: Sequence[str]) -> None:
        """Remove top-level ``keys`` from the payloads of ``ids``."""
        wanted = [int(i) for i in ids]
        docs = self.get(wanted)
        rows = [(i, {k: v for k, v in d.items() if k not in keys}) for i, d in zip(wanted, docs)
                if d is not None]
        self.put([i for i, _ in rows], [d for _, d in rows])

    def matching_ids(self, where: str, params: Sequence[Any]) -> np.ndarray:
        """Ids of the rows satisfying an SQL ``where`` clause over ``payloads`` (from
        :func:`slimvec.connectors.payload_sql.filter_sql`, values bound as ``params``), sorted."""
        with self._lock:  # no ORDER BY: SQLite would walk the table in id order to avoid a
            # sort instead of reading the expression indexes (32 ms against 0.1 ms at 8k rows)
            got = self._db.execute(f"SELECT id FROM payloads WHERE {where}", list(params))
            return np.sort(np.fromiter((r[0] for r in got), dtype=np.int64))

    def row_ids(self) -> np.ndarray:
        """Every id with a payload row, sorted."""
        with self._lock:
            got = self._db.execute("SELECT id FROM payloads ORDER BY id")
            return np.fromiter((r[0] for r in got), dtype=np.int64)

    def create_index(self, field: str) -> bool:
        """Create the expression index of a top-level payload ``field`` (what filters on it read
        first, see :mod:`slimvec.connectors.payload_sql`); False when the field cannot have one
        (a dotted path, or characters a JSON path cannot spell). Committed on :meth:`commit`."""
        from slimvec.connectors.payload_sql import index_sql

        made = index_sql(field)
        if made is None:
            return False
        with self._lock:
            self._db.execute(made[1])
            self._mem = None  # built again with the new field at the next filter
        return True

    def indexed_fields(self) -> list[str]:
        """The fields with an expression index (:meth:`create_index`), read back from the
        schema: each index's JSON path, checked against the name :func:`index_sql` gives it."""
        from slimvec.connectors.payload_sql import index_sql

        with self._lock:
            got = self._db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                                   "AND name LIKE 'payload_idx_%'").fetchall()
        out = []
        for name, sql in got:
            m = re.search(r"""json_extract\(doc, '\$\."((?:[^"]|'')*)"'\)""", sql or "")
            field = m.group(1).replace("''", "'") if m else ""
            made = index_sql(field) if field else None
            if made is not None and made[0] == name:
                out.append(field)
        return sorted(out)

    def one_read(self) -> _Pin:
        """Within the block (one search, on this thread), :meth:`memory_index` checks once whether
        another connection committed: a filtered search asks it two to four times (the share
        estimate, the count, the per-candidate test), each a ``PRAGMA data_version`` (issue 51)."""
        return self._pin

    def memory_index(self) -> Any:
        """The in-memory payload index of the declared fields
        (:class:`~slimvec.connectors.payload_index.PayloadIndex`), or None when none is declared.

        Built from the rows this connection sees at the first call, then kept current by
        :meth:`put_rows` / :meth:`delete`; built again when another connection committed since
        (``PRAGMA data_version``), e.g. a writer process beside this reader.
        """
        from slimvec.connectors.payload_index import PayloadIndex

        pin = self._pin
        if pin.depth and pin.checked and self._mem is not None:  # checked already in this search
            return self._mem if self._mem.fields else None
        with self._lock:
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        pin.checked = bool(pin.depth)
        if self._mem is not None and version == self._mem_version:
            return self._mem if self._mem.fields else None
        fields = self.indexed_fields()
        mem = PayloadIndex(fields)
        if fields:
            with self._lock:  # whole, so that no write of another thread falls in between
                for i, doc in self._db.execute("SELECT id, doc FROM payloads"):
                    mem.put(int(i), json.loads(doc))
            log.debug("%s: payload index of %s built", self.path, ", ".join(fields))
        self._mem, self._mem_version = mem, version
        return mem if fields else None

    def _deleted_table(self) -> None:
        if not self._has_deleted:
            with self._lock:
                self._db.execute("CREATE TABLE IF NOT EXISTS deleted (id INTEGER PRIMARY KEY)")
            self._has_deleted = True

    def mark_deleted(self, ids: Sequence[int]) -> None:
        """Record tombstones of ``ids`` (stores whose engine cannot list its deleted ids)."""
        self._deleted_table()
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO deleted (id) VALUES (?)", [(int(i),) for i in ids])

    def unmark_deleted(self, ids: Sequence[int]) -> None:
        """Forget tombstones of ``ids`` (they were upserted again)."""
        if self._has_deleted is False:
            return
        if self._has_deleted is None and not self.deleted_ids():
            return
        with self._lock:
            self._db.executemany("DELETE FROM deleted WHERE id = ?", [(int(i),) for i in ids])

    def deleted_ids(self) -> set[int]:
        """Every tombstoned id."""
        with self._lock:
            exists = self._db.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                                      "name='deleted'").fetchone()
            self._has_deleted = exists is not None
            if not exists:
                return set()
            return {int(r[0]) for r in self._db.execute("SELECT id FROM deleted")}

    def commit(self) -> None:
        """Make written payloads durable, in ``payloads.sqlite`` itself.

        The WAL is checkpointed into the file and truncated here, because the index records the
        file's SHA-256 at each commit: left in the WAL, the rows would be copied into the file by
        whichever connection closes last, a reader that was open across this commit included,
        and the file would then differ from its recorded checksum (a false "corrupted").
        """
        with self._lock:
            self._db.commit()
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:  # a reader mid-query: the next commit checkpoints what is left
                log.info("%s: WAL checkpoint deferred (a reader was busy)", self.path)

    def close(self) -> None:
        """Commit and close."""
        with self._lock:
            self._db.commit()
            self._db.close()


def scan_filter(table: PayloadTable, live: np.ndarray, flt: Any) -> np.ndarray:
    """Ids of ``live`` (sorted int64) whose payload in ``table`` matches the filter ``flt``,
    evaluated in Python.

    One pass over the payload rows in id order evaluating :meth:`slimvec.filters.Filter.matches`
    (ids without a payload row are evaluated on ``{}``). The path of the filters SQL cannot say
    exactly (:func:`select_filter`), and the reference the SQL path is tested against.
    """
    if flt is None:
        return live
    live_set = set(live.tolist())
    keep: list[int] = []
    seen: set[int] = set()
    for i, doc in table.rows():
        if i in live_set:
            seen.add(i)
            if flt.matches(i, doc):
                keep.append(i)
    keep.extend(i for i in live_set - seen if flt.matches(i, {}))
    return np.asarray(sorted(keep), dtype=np.int64)


def _hint_unindexed(table: PayloadTable, flt: Any, mem: Any) -> None:
    """Log once per field that filters on it read the payload table, naming ``--payload-index``."""
    new = flt.keys() - table.unindexed
    for key in sorted(new - mem.fields.keys() if mem is not None and new else new):
        table.unindexed.add(key)
        log.info("Filters on payload field %r read the SQLite payload table (slow at many "
                 "matches): declare a payload index, --payload-index %s:keyword|integer|float|bool|datetime "
                 "(or Index.create_payload_index).", key, key)


def select_filter(table: PayloadTable, live: np.ndarray, flt: Any, sql: bool = True,
                  indexed: bool = True) -> np.ndarray:
    """Ids of ``live`` (sorted int64) whose payload matches ``flt``: one SQL query over the
    payload JSON (:func:`slimvec.connectors.payload_sql.filter_sql`, served by the expression
    indexes of declared fields) when the filter translates, else :func:`scan_filter`.

    Ids without a payload row are evaluated on ``{}`` in Python (once, unless the filter reads
    ids with ``has_id``; not at all when ``{}`` cannot match). ``sql=False`` forces the Python
    evaluation. With payload indexes declared, the in-memory index answers the conditions on
    them (:meth:`PayloadTable.memory_index`; ``indexed=False``: not) and this path the rest.
    """
    from slimvec.filters import Filter, HasId

    if flt is None:
        return live
    mem = table.memory_index() if sql and indexed else None
    if indexed:
        _hint_unindexed(table, flt, mem)
    if mem is not None and mem.covers(flt):
        return mem.select(flt, live, lambda c: select_filter(table, live, Filter(must=(c,)),
                                                             sql=sql, indexed=False))
    from slimvec.connectors.payload_sql import filter_sql

    query = filter_sql(flt) if sql else None
    if query is None:
        return scan_filter(table, live, flt)
    found = np.intersect1d(table.matching_ids(*query), live, assume_unique=True)
    by_id = any(isinstance(c, HasId) for c in flt.conditions())
    if by_id or flt.matches(-1, {}):  # ids without a payload row may match: find them
        bare = np.setdiff1d(live, table.row_ids(), assume_unique=True)
        if by_id:
            bare = np.asarray([i for i in bare.tolist() if flt.matches(i, {})], dtype=np.int64)
        found = np.union1d(found, bare)
    return found.astype(np.int64)


class PayloadTableStore:
    """Payload updates of a store whose payloads live in a :class:`PayloadTable` (FAISS, hnswlib):
    listed first in the store's bases so these override :class:`~slimvec.connectors.base.VectorStore`'s
    refusals. The store provides ``_known`` (its live ids among those given), ``_payloads`` and
    ``_dirty`` (set when something must be written at the next flush)."""

    _payloads: PayloadTable | None
    _dirty: bool
    #: annotated only (no definition here, which would shadow VectorStore._known in the MRO)
    _known: Callable[[Sequence[int] | np.ndarray], np.ndarray]
    count: Callable[[], int]
    ids: Callable[[], np.ndarray]

    def set_payload(self, ids: Sequence[int] | np.ndarray, fields: Mapping[str, Any],
                    overwrite: bool = False) -> int:
        """Merge ``fields`` into the payloads of the stored ``ids`` (``overwrite``: replace each
        payload); unknown ids are ignored; durable at the store's flush. Returns the ids updated."""
        known = self._known(ids).tolist()
        assert self._payloads is not None
        self._payloads.update(known, dict(fields), overwrite)
        if known:
            self._dirty = True
        return len(known)

    def delete_payload_keys(self, ids: Sequence[int] | np.ndarray, keys: Sequence[str]) -> int:
        """Remove top-level payload ``keys`` of the stored ``ids``; returns how many are stored."""
        known = self._known(ids).tolist()
        assert self._payloads is not None
        self._payloads.delete_keys(known, list(keys))
        if known:
            self._dirty = True
        return len(known)

    def filter_share(self, flt: Any) -> float | None:
        """The share of live ids ``flt`` matches, estimated by the in-memory payload index
        (:meth:`~slimvec.connectors.payload_index.PayloadIndex.share`); None without one."""
        assert self._payloads is not None
        mem = self._payloads.memory_index() if flt is not None else None
        return None if mem is None or not mem.covers(flt) else mem.share(flt, int(self.count()))

    def filter_token(self, flt: Any) -> Any:
        """An object that stays the same (``is``) while what the planner learns of ``flt`` (its
        matches among the live ids, its share) cannot change: the in-memory payload index's kept
        answer of it (:meth:`~slimvec.connectors.payload_index.PayloadIndex.kept`); None without."""
        assert self._payloads is not None
        mem = self._payloads.memory_index()
        return None if mem is None else mem.kept(flt, self.ids())

    def filter_test(self, flt: Any, ids: np.ndarray) -> np.ndarray:
        """Which of the live ``ids`` match ``flt``: looked up per id in the in-memory payload
        index where there is one (the rest through :func:`select_filter`)."""
        from slimvec.filters import Filter

        assert self._payloads is not None
        table, mem = self._payloads, self._payloads.memory_index()
        live = self.ids()
        if mem is None or not mem.covers(flt):
            return np.isin(ids, select_filter(table, live, flt))
        return mem.test(flt, np.asarray(ids, dtype=np.int64), lambda c: select_filter(
            table, live, Filter(must=(c,)), indexed=False))

    def create_payload_index(self, field: str, kind: str) -> bool:
        """An SQLite expression index on ``json_extract(doc, '$."field"')`` in the payload table,
        which filtered searches on ``field`` read first (:func:`select_filter`); False for a
        field that cannot have one (a dotted path, or ``"`` / ``\\`` / control characters)."""
        assert self._payloads is not None
        made = self._payloads.create_index(field)
        if made:
            self._dirty = True
        return made
