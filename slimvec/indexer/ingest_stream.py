"""The ingest producer's batches: documents read, encoded ahead, checked for duplicate ids.

A reader thread reads and checks rows and groups them into windows; an encoder thread encodes a
window in one call (``ENCODE_WINDOW`` documents or more: sentence-transformers sorts it by length,
so its passes pad little); the caller (the builder) reduces, writes and commits each batch on its
own. Bounded queues sit between the three (issue 36 item 2). Split out of
:mod:`slimvec.indexer.pipeline` (issue 24 item 2).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from slimvec.ids import doc_ids
from slimvec.indexer.interrupt import stop_requested
from slimvec.indexer.writer import IngestSummary, VectorBatch
from slimvec.sources.checks import DuplicateTracker, truncation_rejects
from slimvec.sources.readers import Document, Reject, SourceSpec, iter_batches, stored_payload

__all__ = ["DocumentStream", "ENCODE_WINDOW", "encode_window"]


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

    def encode(self, window: list[list[Document]], halted: Callable[[], bool] | None = None
               ) -> list[tuple[np.ndarray, list[Reject]]]:
        """Encode a window of batches (sorted by length, as one encoder call would); their
        vectors and truncation warnings, batch by batch. ``halted`` is asked between passes
        (:func:`encode_batch`)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        truncated = [truncation_rejects(self.encoder, docs, self.source.path,
                                        self.source.text_column) for docs in window]
        flat = [d for docs in window for d in docs]
        vecs = encode_batch(self.encoder, flat, self.cached, halted)
        self.summary.encode_seconds += time.perf_counter() - t0
        self.summary.encode_cpu_seconds += time.thread_time() - c0
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
        """The batches from source row ``start_row`` on, in order.

        Three threads: a reader (rows read, checked, ids derived, grouped into windows of
        :data:`ENCODE_WINDOW` documents), the encoder, and the caller, which writes and commits.
        Bounded queues of :data:`QUEUE_WINDOWS` windows between them: the encoder waits only when
        the reader has nothing ready or the writer is that far behind, never for one commit.
        A stop asked of the commit loop (Ctrl-C) ends the batches at once when the writer is
        waiting for a window, and the encoder within :data:`STOP_PASSES` passes (issue 52).
        """
        window_docs = encode_window(self.encoder)
        halt = threading.Event()  # set when a stage is left: the encoder stops between passes
        with _Stage(self._read_windows(start_row, window_docs), "slimvec-read", halt) as read, \
                _Stage(self._encoded(read, halt), "slimvec-encode", halt,
                       poll=stop_requested) as encoded:
            for done in encoded:
                yield from _split(done, self.source.path, self.check)

    def _read_windows(self, start_row: int, window_docs: int) -> Iterator[tuple[Any, Any]]:
        window: list[list[Document]] = []
        metas: list[tuple[np.ndarray, list[Reject], int]] = []
        size = 0
        for docs, rejects, next_row in iter_batches(self.source, self.batch_size, start_row):
            window.append(docs)
            metas.append((doc_ids([d.id for d in docs], self.id_rule), rejects, next_row))
            size += len(docs)
            if size >= window_docs:
                yield window, metas
                window, metas, size = [], [], 0
        if window:
            yield window, metas

    def _encoded(self, windows: Iterable[tuple[Any, Any]], halt: threading.Event
                 ) -> Iterator[tuple[Any, Any, Any]]:
        for window, metas in windows:
            yield window, metas, self.encode(window, lambda: halt.is_set() or stop_requested())


#: documents encoded in one call on a CPU (several batches; each is committed on its own)
ENCODE_WINDOW = 2048
#: windows a stage may hold ready for the next (reader -> encoder -> writer)
QUEUE_WINDOWS = 4
#: forward passes of a window encoded between two looks at a stop (Ctrl-C): a window of 2,048
#: long texts took 52 s on a CPU, one pass of 32 takes about a second
STOP_PASSES = 1


def encode_window(encoder: Any) -> int:
    """Documents per encoder call: :data:`ENCODE_WINDOW`, or at least 16 forward passes of the
    encoder's batch (a CUDA encoder takes hundreds of texts per pass)."""
    return max(ENCODE_WINDOW, 16 * int(getattr(encoder, "batch_size", 0) or 0))


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


class _Stage:
    """Run an iterator in its own thread, ``QUEUE_WINDOWS`` items ahead of the consumer.

    Items come out in order; an exception in the thread is raised in the consumer at the point it
    happened. Leaving the block (the consumer stopped: an interrupt, an error, the end) sets
    ``stop`` (shared by the stages of one stream), which stops the thread at its next item, and
    waits for it, so nothing runs on after the writer has gone. ``poll``: while the consumer
    waits for an item, the items end as soon as it returns True (a stop was asked).
    """

    _END = object()

    def __init__(self, items: Iterator[Any], name: str, stop: threading.Event | None = None,
                 poll: Callable[[], bool] | None = None) -> None:
        import queue

        self._items, self._poll = items, poll
        self._queue: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=QUEUE_WINDOWS)
        self._stop = stop or threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _put(self, item: Any) -> bool:
        import queue

        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._put((True, item)):
                    return
            self._put((True, self._END))
        except BaseException as exc:  # handed to the consumer, raised there
            self._put((False, exc))

    def __enter__(self) -> _Stage:
        self._thread.start()
        return self

    def __iter__(self) -> Iterator[Any]:
        import queue

        while True:
            try:
                ok, item = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._poll is not None and self._poll():
                    return
                continue
            if not ok:
                if isinstance(item, _Halted):
                    return
                raise item
            if item is self._END:
                return
            yield item

    def __exit__(self, *exc: Any) -> None:
        import queue

        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.1)
            except queue.Empty:
                pass
        self._thread.join()
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


class _Halted(Exception):
    """The encoder stopped between passes: a stop was asked (the consumer ends its items)."""


def encode_batch(encoder: Any, docs: list[Document], cached: dict[int, np.ndarray],
                 halted: Callable[[], bool] | None = None) -> np.ndarray:
    """Encode a batch, reusing vectors already computed for the fit sample.

    With ``halted``, the texts are sorted by length, as the encoder sorts one call's, and
    encoded :data:`STOP_PASSES` forward passes at a time, asking ``halted`` before each: the
    same passes, each padded as little, and a stop waits for one pass, not the whole window.

    Raises
    ------
    _Halted
        ``halted()`` said so before the texts were all encoded.
    """
    out = np.empty((len(docs), encoder.dim), dtype=np.float32)
    if not docs:
        return out
    todo = [i for i, d in enumerate(docs) if d.row not in cached]
    for i, d in enumerate(docs):
        if d.row in cached:
            out[i] = cached.pop(d.row)
    if not todo:
        return out
    if halted is None:
        out[todo] = encoder.encode([docs[i].text for i in todo])
        return out
    step = STOP_PASSES * max(1, int(getattr(encoder, "batch_size", 0) or 32))
    todo = [todo[j] for j in np.argsort([-len(docs[i].text) for i in todo], kind="stable")]
    for lo in range(0, len(todo), step):
        if halted():
            raise _Halted
        part = todo[lo:lo + step]
        out[part] = encoder.encode([docs[i].text for i in part])
    return out
