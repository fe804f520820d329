"""Delete, payload update, get / scroll and filtered search of an index (issue 25 items 1-3).

Documents are addressed by the user's own ids (the ``id`` column given at ingest): each is
mapped to its store id with :func:`slimvec.ids.doc_id` under the index's ``id_rule``, exactly as
the ingest did, so ``"a-17"``, ``17`` and ``"17"`` address what the ingest of that id stored.

Every mutation goes through the index's writer discipline (:class:`Mutation`): the exclusive
:class:`~slimvec.index.locking.IndexLock` for its duration (a running ingest or another writer
makes it fail at once with :class:`~slimvec.errors.IndexBusyError`); the manifest's store
checksums are cleared before the first store file changes and recorded again, with the exact
count, once everything is flushed. A crash in between leaves a manifest without store checksums
(as a running ingest does), never one whose checksums refuse the files. Deletes go to the store
first, then to the full-vector side file: candidates always come from the store, so a crash
between the two never brings a deleted document back.

Filtered search chooses its execution by selectivity, as Qdrant's query planner does: the matching
ids are counted first (Qdrant filter, or the SQLite payload table); when at most
:func:`exact_threshold` match, their kept full vectors are scanned exactly (exact results);
otherwise the store's own filtered search fetches ``k * rescore`` candidates among them, which
the full vectors re-rank.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.buildspec import PAYLOAD_INDEX_KINDS, parse_payload_indexes
from slimvec.connectors import store_class
from slimvec.connectors.base import SearchResult
from slimvec.errors import ConfigError
from slimvec.filters import Filter, parse_filter
from slimvec.ids import doc_id

log = logging.getLogger(__name__)

__all__ = ["Mutation", "compact_full", "parse_payload_indexes", "PAYLOAD_INDEX_KINDS", "declare_payload_index", "store_ids", "resolve_filter", "exact_threshold", "filter_path", "filtered_search", "post_filtered",
           "exact_scan", "scan_limit", "records", "scroll_page", "COMPACT_RATIO"]

#: tombstones (FAISS positions, full-vector rows) over live rows past which a mutation compacts
COMPACT_RATIO = 0.2
#: manifest key (kept by Manifest.extra) of the declared payload indexes: {field: kind}
PAYLOAD_INDEX_KEY = "payload_index"


def declare_payload_index(target: Any, field: str, kind: str) -> bool:
    """Build payload index ``field`` / ``kind`` in ``target.store`` (where the store has them) and
    record it in ``target.manifest`` (written at the caller's commit): the one place for
    ``Index.create_payload_index``, the writer's declared indexes (:attr:`BuildSpec.payload_index`)
    and the service's. Returns whether the store built one."""
    kind = parse_payload_indexes([f"{field}:{kind}"])[field]
    built = bool(target.store.create_payload_index(field, kind))
    target.manifest.extra[PAYLOAD_INDEX_KEY] = {**(target.manifest.extra.get(PAYLOAD_INDEX_KEY) or {}),
                                                field: kind}
    return built


def store_ids(index: Any, ids: Sequence[Any] | Any, user_ids: bool = True) -> np.ndarray:
    """Store ids (int64) of the user's ``ids`` (``user_ids=False``: they already are store ids)."""
    if isinstance(ids, (str, bytes, int, np.integer)):
        ids = [ids]
    if not user_ids:
        out = np.asarray(list(ids), dtype=np.int64).ravel()
        if (out < 0).any():
            raise ConfigError("Store ids must be non-negative integers.")
        return out
    rule = int(index.manifest.id_rule)
    return np.asarray([doc_id(i, rule=rule) for i in ids], dtype=np.int64)


def resolve_filter(index: Any, flt: Any, user_ids: bool = True) -> Filter | None:
    """Parse a filter (dict, JSON text or Filter); its ``has_id`` values become store ids. A
    filter given as JSON (text or a dict) is parsed once (:func:`_resolved`, a small cache: a
    service's queries repeat their tenant or language filter; parsing took ~35 us of a 1 ms
    search)."""
    rule = int(index.manifest.id_rule) if user_ids else None
    try:
        text = flt if isinstance(flt, str) else json.dumps(flt) if isinstance(flt, dict) else None
    except (TypeError, ValueError):  # not JSON (a numpy value): parsed as given
        text = None
    return _resolved(text, rule) if text is not None else _resolve(parse_filter(flt), rule)


@lru_cache(maxsize=256)
def _resolved(text: str, rule: int | None) -> Filter | None:
    return _resolve(parse_filter(text), rule)


def _resolve(parsed: Filter | None, rule: int | None) -> Filter | None:
    if parsed is None or rule is None:
        return parsed
    return parsed.map_ids(lambda i: doc_id(i, rule=rule))


class Mutation:
    """The writer discipline of one mutating operation on an open :class:`~slimvec.Index`."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self._lock: Any = None
        self._had_reader_lock = False

    def __enter__(self) -> Mutation:
        from slimvec.index.locking import IndexLock
        from slimvec.index.manifest import Manifest

        idx = self.index
        if idx._lock is not None:  # a Qdrant Edge reader's shared lock: upgrade it
            idx._lock.release()
            idx._lock, self._had_reader_lock = None, True
        try:
            self._lock = IndexLock(idx.folder, exclusive=True).acquire()
        except BaseException:
            self._restore_reader_lock()
            raise
        idx.manifest = Manifest.read(idx.folder)
        self._recorded = bool(idx.manifest.store_sha256)
        if self._recorded:  # store files are about to change
            idx.manifest.store_sha256 = {}
            idx.manifest.write(idx.folder)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        from slimvec.index.layout import store_checksums

        idx = self.index
        try:
            if exc_type is None:
                idx.store.flush()
                if idx.full_vectors is not None:
                    idx.full_vectors.commit()
                _maybe_compact(idx)
                idx.manifest.count = int(idx.store.count())
                if self._recorded and store_class(idx.manifest.store).snapshot_files:
                    # closed first, as IndexBuilder.finish does: SQLite folds its WAL into
                    # payloads.sqlite on close, which would change the file after its checksum
                    from slimvec.connectors import make_store
                    from slimvec.index.layout import store_folder

                    idx.store.close()
                    idx.manifest.store_sha256 = store_checksums(idx.folder, idx.manifest)
                    idx.store = make_store(idx.manifest.store, store_folder(idx.folder)).open()
                idx.manifest.write(idx.folder)
        finally:
            self._lock.release()
            self._restore_reader_lock()

    def _restore_reader_lock(self) -> None:
        if self._had_reader_lock:
            from slimvec.index.locking import IndexLock

            self.index._lock = IndexLock(self.index.folder, exclusive=False).acquire()
            self._had_reader_lock = False


def _maybe_compact(idx: Any) -> None:
    full = idx.full_vectors
    if full is not None and full.dead_rows() > COMPACT_RATIO * max(len(full), 1):
        compact_full(idx)


#: prefix of the folders a compacted full-vector side file is written to
_PREFIX = "full-c"


def _stray(folder: Path, keep: str | None) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()
            and (p.name.startswith(_PREFIX) or p.name == "full") and p.name != keep]


def compact_full(index: Any) -> int:
    """Rewrite the index's full-vector side file without dead rows; returns the rows dropped.

    Into a new folder beside the old one; the manifest is pointed at it (one atomic write: the
    commit point), then the old folder is removed; a crash leaves either the old folder in use and
    a stray new one, or the new one in use and a stray old one, which the next compaction removes.

    The caller holds the exclusive index lock (:class:`slimvec.index.lifecycle.Mutation`).
    """
    full = index.full_vectors
    m = index.manifest
    if full is None or m.full is None or not m.full.dir:
        return 0
    full.commit()
    dropped = full.dead_rows()
    for p in _stray(index.folder, m.full.dir):  # leftovers of an interrupted compaction
        shutil.rmtree(p)
    n = 1 + max([int(p.name[len(_PREFIX):]) for p in index.folder.iterdir()
                 if p.name.startswith(_PREFIX) and p.name[len(_PREFIX):].isdigit()] or [0])
    new_dir = f"{_PREFIX}{n}"
    new = full.compact_into(index.folder / new_dir)
    new.close()
    old_dir = m.full.dir
    full.close()
    index._full = None
    m.full.dir = new_dir
    m.write(index.folder)  # the commit point
    shutil.rmtree(index.folder / old_dir, ignore_errors=True)
    log.info("%s: full vectors compacted (%d dead rows dropped) into %s", index.folder, dropped, new_dir)
    return dropped


def target_ids(index: Any, ids: Any, flt: Any, user_ids: bool) -> np.ndarray:
    """The store ids an operation addresses: exactly one of ``ids`` / ``filter``."""
    if (ids is None) == (flt is None):
        raise ConfigError("Give exactly one of ids=[...] (the ids given at ingest) or filter={...} "
                          "(Qdrant filter JSON).")
    if ids is not None:
        return np.unique(store_ids(index, ids, user_ids))
    return index.store.filter_ids(resolve_filter(index, flt, user_ids))


#: kept full-vector bytes a filtered search scans exactly rather than searching the graph: 1 MiB,
#: about 1,400 float16 MiniLM rows. Measured on the filtered suite's 8,000 MiniLM vectors (default
#: recipe, one thread, a busy machine): the exact scan took 4.9 ms at 800 matches and 36 ms at
#: 2,000 against 11-16 ms for FAISS's filtered graph search at any selectivity (issue 37;
#: docs/benchmarks/filtered.md)
EXACT_SCAN_BYTES = 1 << 20


def exact_threshold(n_total: int, k: int, depth: int, row_bytes: int = 768, costs: Any = None) -> int:
    """Most matching documents a filtered search scans exactly instead of searching the graph.

    With ``costs`` (the index's recorded :class:`~slimvec.index.search_costs.SearchCosts`): where
    the estimated exact scan stops being cheaper than the graph search
    (:func:`~slimvec.index.search_costs.cost_scan_limit`), at least ``k``. Without (an index built
    before them): ``max(4 * k * depth, n_total // 100, EXACT_SCAN_BYTES // row_bytes, 256)``: below ``4 * k *
    depth`` matches, a graph search would rescore about a quarter or more of them anyway; an
    exact scan of 1 % of the index's full vectors costs about what one HNSW search does, and up
    to :data:`EXACT_SCAN_BYTES` of kept rows (``row_bytes`` each) are cheaper to gather and score
    than a filtered graph search (Qdrant's planner switches to a plain scan below its
    ``full_scan_threshold``, also counted in bytes of vectors, for the same reason).
    """
    if costs is not None:
        from slimvec.index.search_costs import cost_scan_limit

        return max(cost_scan_limit(costs, int(n_total)), int(k))
    return max(4 * int(k) * max(int(depth), 1), int(n_total) // 100,
               EXACT_SCAN_BYTES // max(int(row_bytes), 1), 256)


def exact_scan(index: Any, vectors: np.ndarray, allowed: np.ndarray, k: int) -> SearchResult:
    """Exact k nearest among ``allowed`` store ids by the kept full vectors (a side file:
    :meth:`~slimvec.connectors.fullvectors.FullVectors.scan`, scored by FAISS; kept in the store:
    fetched from it and scored here)."""
    full = index.full_vectors
    n = len(vectors)
    if full is not None:
        return full.scan(vectors, allowed, k)
    out = SearchResult.empty(n, k)
    if not len(allowed):
        return out
    q = np.asarray(vectors, dtype=np.float32)
    metric = index.manifest.metric
    if metric == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    best_s = np.full((n, 0), -np.inf, dtype=np.float32)
    best_i = np.full((n, 0), -1, dtype=np.int64)
    for lo in range(0, len(allowed), 8192):
        chunk = allowed[lo:lo + 8192]
        vecs, found = index.store.get_full(chunk.tolist())
        vecs, chunk = vecs[found], chunk[found]
        if metric == "cosine":
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        scores = (-((q[:, None, :] - vecs[None]) ** 2).sum(-1) if metric == "l2" else q @ vecs.T)
        best_s = np.concatenate([best_s, scores.astype(np.float32)], axis=1)
        best_i = np.concatenate([best_i, np.broadcast_to(chunk, scores.shape)], axis=1)
        if best_s.shape[1] > k:
            top = np.argpartition(-best_s, k - 1, axis=1)[:, :k]
            rows = np.arange(n)[:, None]
            best_s, best_i = best_s[rows, top], best_i[rows, top]
    order = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
    rows = np.arange(n)[:, None]
    width = order.shape[1]
    out.ids[:, :width], out.scores[:, :width] = best_i[rows, order], best_s[rows, order]
    return out


def filter_path(index: Any, n_allowed: int, k: int, depth: int | None) -> str:
    """The path :func:`filtered_search` takes for ``n_allowed`` matches: ``exact scan`` (the
    index keeps full vectors and few match) or ``store filter`` (the store's filtered search,
    re-ranked from the full vectors when ``depth`` is given); the benchmarks record it."""
    return _plan(index, n_allowed, k, depth)["path"]


def scan_limit(index: Any, k: int, depth: int | None) -> int | None:
    """The most matches the planner scans exactly (:func:`exact_threshold`, from the costs the
    index recorded at build when it has them); None: no kept full vectors to scan."""
    full = index.manifest.full
    if index.full_vectors is None and not (full is not None and full.in_store):
        return None
    row_bytes = int(index.dim_in) * (2 if full is not None and full.dtype == "float16" else 4)
    costs = index.manifest.search_costs if index.full_vectors is not None else None
    return exact_threshold(index.store.count(), k, depth or 1, row_bytes, costs)


def _estimates(index: Any, n_allowed: int) -> dict[str, float] | None:
    """The recorded costs' estimate of each path for ``n_allowed`` matches (us), or None."""
    costs = index.manifest.search_costs
    return None if costs is None else dict(_estimated(costs, int(n_allowed), index.store.count()))


@lru_cache(maxsize=256)
def _estimated(costs: Any, n_allowed: int, n: int) -> tuple[tuple[str, float], ...]:
    return (("exact scan", round(costs.scan_us(n_allowed), 1)),
            ("graph", round(costs.graph_search_us(n_allowed, n), 1)))


def _plan(index: Any, n_allowed: int, k: int, depth: int | None) -> dict[str, Any]:
    limit = scan_limit(index, k, depth)
    if limit is None:
        return {"path": "store filter", "matches": n_allowed, "threshold": None,
                "why": "no kept full vectors to scan"}
    plan = {"path": "exact scan" if n_allowed <= limit else "store filter", "matches": n_allowed,
            "threshold": limit, "estimate_us": _estimates(index, n_allowed)}
    plan["why"] = (f"{n_allowed} matches <= {limit}: scanning their full vectors is exact and cheaper "
                   "than a filtered graph search" if n_allowed <= limit
                   else f"{n_allowed} matches > {limit}: the store's filtered search")
    return plan


#: a filter estimated to match at least this share of the documents is a broad one:
#: searched unfiltered and post-filtered (:func:`post_filtered`)
BROAD_SHARE = 0.2
#: a post-filtered search fetches this many times the candidates it expects to need
POST_MARGIN = 1.25


def post_filtered(index: Any, vectors: np.ndarray, reduced: np.ndarray, k: int, depth: int | None,
                  flt: Filter, params: dict[str, Any]) -> tuple[SearchResult, np.ndarray] | None:
    """A broad filter (estimated share of matches >= :data:`BROAD_SHARE`, from the in-memory
    payload index, :meth:`~slimvec.connectors.payloads.PayloadTableStore.filter_share`): the store's
    unfiltered search for ``k x depth / share x`` :data:`POST_MARGIN` candidates, each looked up
    in the payload index, the first ``k x depth`` that match re-ranked. None (the planner's other
    paths) for other filters. Also returns the rows (a bool mask) that kept fewer than ``k x
    depth`` of the fetched candidates while documents outside them were left (the estimate was
    too high, or the query's neighbourhood matches less often than the corpus): the planner
    answers those again by its other paths, so one such query does not send a batch there."""
    store = index.store
    estimate = getattr(store, "filter_share", None)  # stores with in-memory payload indexes
    share = estimate(flt) if estimate is not None else None
    full = index.manifest.full
    if share is None or share < BROAD_SHARE or (full is not None and full.in_store):
        return None
    width, n, limit = k * int(depth or 1), store.count(), scan_limit(index, k, depth)
    if limit is not None and share * n <= limit:  # few enough to scan exactly
        return None
    fetch = min(n, math.ceil((width * POST_MARGIN + 10) / share))
    found = store.search(reduced, fetch, **params)
    ids = found.ids
    ok = ids >= 0
    ok[ok] = store.filter_test(flt, ids[ok])
    short = (ok.sum(axis=1) < width) & (fetch < n)
    n_short = int(short.sum())
    out = SearchResult.empty(len(ids), width)
    for row in range(len(ids)):
        cols = np.flatnonzero(ok[row])[:width]
        out.ids[row, :len(cols)], out.scores[row, :len(cols)] = ids[row, cols], found.scores[row, cols]
    index.last_filter_plan = {"path": "post filter", "share": round(float(share), 4), "fetch": fetch,
                              "native": False, "threshold": limit,
                              "estimate_us": _estimates(index, int(share * n)),
                              "why": f"an estimated {share:.0%} of documents "
                              f"match: {fetch} nearest unfiltered, the first {width} that match kept",
                              "short_queries": n_short}
    log.debug("filtered search: post filter (%s; %d queries short)", index.last_filter_plan["why"], n_short)
    if depth is None:
        out.ids, out.scores = out.ids[:, :k], out.scores[:, :k]
        return out, short
    return index.full_vectors.rerank(vectors, out, k), short


def filtered_search(index: Any, vectors: np.ndarray, reduced: np.ndarray, k: int,
                    depth: int | None, flt: Filter, params: dict[str, Any]) -> SearchResult:
    """The planner: a broad filter post-filters the unfiltered search (:func:`post_filtered`);
    else count the matches (the store's own count, or the ids from the in-memory payload index),
    scan few exactly, else the store's filtered search (+ rescoring). The plan is logged at DEBUG
    and kept as ``index.last_filter_plan`` (``info()`` and ``search --json`` show it): the path,
    the costs estimated from the index's recorded ones (``estimate_us``, :mod:`.search_costs`)
    and the time this search took a query (``actual_us``)."""
    t0 = time.perf_counter()
    one_read = getattr(getattr(index.store, "_payloads", None), "one_read", None)  # FAISS / hnswlib
    with one_read() if one_read is not None else contextlib.nullcontext():  # one version check a search
        kept = _kept_plan(index, flt, k, depth)
        broad = None if kept is not None else post_filtered(index, vectors, reduced, k, depth, flt, params)
        if broad is None:
            out = _planned(index, vectors, reduced, k, depth, flt, params, kept or True)  # True: keep it
        else:
            out, short = broad
            if short.any():  # those queries' candidates held too few matches: the other paths answer them
                plan = index.last_filter_plan
                rest = _planned(index, vectors[short], reduced[short], k, depth, flt, params)
                out.ids[short], out.scores[short] = rest.ids, rest.scores
                index.last_filter_plan = {**plan, "short_path": index.last_filter_plan["path"]}
    index.last_filter_plan["actual_us"] = round((time.perf_counter() - t0) * 1e6 / max(len(vectors), 1), 1)
    return out


def _kept_plan(index: Any, flt: Filter, k: int, depth: int | None) -> tuple[Any, dict[str, Any]] | None:
    """The selection and plan of the last filtered search that was not post-filtered, when it had
    the same filter object, ``k``, depth, scan limit and :data:`BROAD_SHARE`, the same manifest and
    costs, and the store's ``filter_token`` of the filter is still the object it was (no write
    since, same live ids): a repeated filter skips the share estimate, the count and the plan."""
    token = getattr(index.store, "filter_token", None)
    last = getattr(index, "_last_plan", None)
    if token is None or last is None or last[0] is not flt or last[2] is not index.manifest \
            or last[3] is not index.manifest.search_costs \
            or last[1] != (k, depth, BROAD_SHARE, scan_limit(index, k, depth)):
        return None
    got = token(flt)
    return (last[5], last[6]) if got is not None and got is last[4] else None


def _planned(index: Any, vectors: np.ndarray, reduced: np.ndarray, k: int, depth: int | None,
             flt: Filter, params: dict[str, Any], kept: Any = None) -> SearchResult:
    """The counted paths; ``kept``: :func:`_kept_plan`'s answer, or True to keep this one's."""
    if isinstance(kept, tuple):
        selection, plan = kept[0], _copied(kept[1])
    else:
        n_allowed, selection = index.store.plan_filter(flt)
        plan = _plan(index, n_allowed, k, depth)
        plan["native"] = not isinstance(selection, np.ndarray)
        token = getattr(index.store, "filter_token", None)
        got = token(flt) if kept and token is not None else None
        if got is not None:
            index._last_plan = (flt, (k, depth, BROAD_SHARE, plan["threshold"]), index.manifest,
                                index.manifest.search_costs, got, selection, _copied(plan))
    index.last_filter_plan = plan
    log.debug("filtered search: %s (%s)", plan["path"], plan["why"])
    if plan["path"] == "exact scan":
        allowed = index.store.filter_ids(flt) if plan["native"] else selection
        return exact_scan(index, vectors, allowed, k)
    if depth is None:
        return index.store.search(reduced, k, filter=selection, **params)
    if index.manifest.full is not None and index.manifest.full.in_store:
        return index.store.search_rescored(reduced, vectors, k, k * int(depth), filter=selection, **params)
    candidates = index.store.search(reduced, k * int(depth), filter=selection, **params)
    return index.full_vectors.rerank(vectors, candidates, k)


def _copied(plan: dict[str, Any]) -> dict[str, Any]:
    est = plan.get("estimate_us")
    return {**plan, "estimate_us": dict(est)} if est is not None else dict(plan)


def records(index: Any, sids: Sequence[int]) -> list[dict[str, Any] | None]:
    """``{"id": user id, "store_id": int, "payload": {...}}`` per store id (None when absent)."""
    from slimvec.ids import user_id

    sids = [int(i) for i in sids]
    out: list[dict[str, Any] | None] = []
    for sid, payload in zip(sids, index.store.get_payloads(sids)):
        if payload is None:
            out.append(None if not _live(index, sid) else {"id": sid, "store_id": sid, "payload": {}})
            continue
        out.append({"id": user_id(sid, payload), "store_id": sid, "payload": payload})
    return out


def _live(index: Any, sid: int) -> bool:
    return bool(len(index.store._known([sid])))


def scroll_page(index: Any, limit: int, offset: Any, flt: Filter | None
                ) -> tuple[list[dict[str, Any]], int | None]:
    """One page of :func:`records` in store-id order from ``offset`` (a store id)."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise ConfigError(f"limit must be a positive integer (records per page), got {limit!r}.")
    ids = index.store.filter_ids(flt)
    start = 0 if offset is None else int(np.searchsorted(ids, int(offset)))
    page = ids[start:start + int(limit)]
    nxt = int(ids[start + int(limit)]) if start + int(limit) < len(ids) else None
    return [r for r in records(index, page.tolist()) if r is not None], nxt


def set_fields_check(fields: Any) -> dict[str, Any]:
    """``fields`` as a dict of JSON values, or a ConfigError saying what came."""
    if isinstance(fields, str):
        import json

        try:
            fields = json.loads(fields)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"Payload fields are not valid JSON ({exc.msg}); give an object such "
                              'as {"lang": "en"}.') from exc
    if not isinstance(fields, Mapping):
        raise ConfigError(f"Payload fields must be a JSON object (field -> value), got "
                          f"{type(fields).__name__}.")
    return dict(fields)
