"""The ingest producer's batches: documents read, encoded a window ahead, checked for duplicate ids.

The encoder works on the next window of batches (one encoder call over ``ENCODE_WINDOW``
documents: sentence-transformers sorts it by length, so its batches pad little) in a worker thread
while the builder reduces and writes this one; each batch is still committed on its own. Split
out of :mod:`slimvec.indexer.pipeline` (issue 24 item 2).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.ids import doc_ids
from slimvec.indexer.checks import DuplicateTracker, truncation_rejects
from slimvec.indexer.sources import Document, Reject, SourceSpec, iter_batches, stored_payload
from slimvec.indexer.writer import IngestSummary, VectorBatch

__all__ = ["DocumentStream", "ENCODE_WINDOW"]


class DocumentStream:
    """The batches of one ingest from a start row (see the module docstring).

    Parameters
    ----------
    source : SourceSpec
    encoder : Encoder
        Loaded; used from one worker thread only (a fast tokenizer is not safe to share).
    batch_size : int
        Documents per batch.
    cached : dict
        Vectors already encoded for the fit sample, by row (used once, then dropped).
    tracker : DuplicateTracker
        Its state is committed with the builder's commits.
    summary : IngestSummary
        ``encode_seconds`` is added to it.
    id_rule : int
        The index's id rule (:func:`slimvec.ids.doc_ids`).
    """

    def __init__(self, source: SourceSpec, encoder: Any, batch_size: int,
                 cached: dict[int, np.ndarray], tracker: DuplicateTracker,
                 summary: IngestSummary, id_rule: int) -> None:
        self.source, self.encoder, self.batch_size = source, encoder, batch_size
        self.cached, self.tracker, self.summary, self.id_rule = cached, tracker, summary, id_rule
        self.id_field = source.id_column or "id"

    def encode(self, window: list[list[Document]]) -> list[tuple[np.ndarray, list[Reject]]]:
        """Encode a window of batches in one encoder call; their vectors and truncation
        warnings, batch by batch."""
        t0 = time.perf_counter()
        truncated = [truncation_rejects(self.encoder, docs, self.source.path,
                                        self.source.text_column) for docs in window]
        flat = [d for docs in window for d in docs]
        vecs = encode_batch(self.encoder, flat, self.cached)
        self.summary.encode_seconds += time.perf_counter() - t0
        out, lo = [], 0
        for docs, trunc in zip(window, truncated):
            out.append((vecs[lo:lo + len(docs)], trunc))
            lo += len(docs)
        return out

    def check(self, ids: np.ndarray, docs: list[Document]) -> list[Reject]:
        """Duplicate-id warnings of a batch, as it goes to the builder (not when it is read
        ahead: the tracker must not run ahead of the store)."""
        return self.tracker.check(ids, docs, self.source.path, self.id_field)

    def batches(self, start_row: int) -> Iterator[VectorBatch]:
        """The batches from source row ``start_row`` on, in order."""
        path = self.source.path
        window: list[list[Document]] = []
        metas: list[tuple[np.ndarray, list[Reject], int]] = []
        with _Ahead(self.encode) as ahead:
            for docs, rejects, next_row in iter_batches(self.source, self.batch_size, start_row):
                window.append(docs)
                metas.append((doc_ids([d.id for d in docs], self.id_rule), rejects, next_row))
                if sum(len(w) for w in window) < ENCODE_WINDOW:
                    continue
                yield from _split(ahead.push(window, metas), path, self.check)
                window, metas = [], []
            if window:
                yield from _split(ahead.push(window, metas), path, self.check)
            yield from _split(ahead.drain(), path, self.check)


#: documents encoded in one call in the stream (several batches; each is committed on its own)
ENCODE_WINDOW = 2048


def _split(done: tuple[list[list[Document]], Any, Any] | None, source: str,
           check: Callable[[np.ndarray, list[Document]], list[Reject]]) -> Iterator[VectorBatch]:
    """The batches of one encoded window, in order (``check`` adds duplicate-id warnings)."""
    if done is None:
        return
    window, metas, encoded = done
    for docs, (ids, rejects, next_row), (vecs, truncated) in zip(window, metas, encoded):
        warnings = check(ids, docs)
        yield VectorBatch(ids, vecs, [stored_payload(d) for d in docs], rejects + warnings + truncated,
                          next_row,
                          rows=[d.row for d in docs], lines=[d.line for d in docs], source=source)


class _Ahead:
    """Run ``work(docs)`` for the next window in a worker thread while the caller handles this one.

    ``push`` submits a window and returns the previous one as ``(docs, meta, work result)``;
    ``drain`` returns the last. Batches come back in order; on exit an unfinished batch is waited
    for (torch releases the GIL while encoding, so the overlap is real on a multi-core machine).
    """

    def __init__(self, work: Callable[[Any], Any]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._work = work
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slimvec-encode")
        self._pending: tuple[Any, Any, Any] | None = None

    def __enter__(self) -> "_Ahead":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def push(self, docs: Any, meta: Any) -> tuple[Any, Any, Any] | None:
        done = self.drain()
        self._pending = (docs, meta, self._pool.submit(self._work, docs))
        return done

    def drain(self) -> tuple[Any, Any, Any] | None:
        if self._pending is None:
            return None
        docs, meta, future = self._pending
        self._pending = None
        return docs, meta, future.result()


def encode_batch(encoder: Any, docs: list[Document], cached: dict[int, np.ndarray]) -> np.ndarray:
    """Encode a batch, reusing vectors already computed for the fit sample."""
    out = np.empty((len(docs), encoder.dim), dtype=np.float32)
    if not docs:
        return out
    todo = [i for i, d in enumerate(docs) if d.row not in cached]
    for i, d in enumerate(docs):
        if d.row in cached:
            out[i] = cached.pop(d.row)
    if todo:
        out[todo] = encoder.encode([docs[i].text for i in todo])
    return out
