"""Dynamic batching of query encoding: concurrent searches' texts are encoded together.

A request hands its texts to :meth:`QueryBatcher.encode`; one worker thread takes the first waiting
request, gathers whatever else arrives within ``wait_ms`` (up to ``max_batch`` texts), encodes them
in one forward pass and hands each request its rows. With ``wait_ms=0`` every request encodes on
its own thread (no batching), for comparison.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

__all__ = ["QueryBatcher"]

log = logging.getLogger(__name__)


class QueryBatcher:
    """Encode query texts of concurrent requests together.

    Parameters
    ----------
    encode : callable
        ``encode(list_of_texts) -> ndarray (n, dim)`` (the encoder's ``encode``).
    wait_ms : float
        How long the first request of a batch waits for others (0: no batching).
    max_batch : int
        Most texts per forward pass.
    on_batch : callable, optional
        Called with the size of each encoded batch (metrics).
    """

    def __init__(self, encode: Callable[[list[str]], np.ndarray], wait_ms: float = 2.0,
                 max_batch: int = 64, on_batch: Callable[[int], None] | None = None) -> None:
        self._encode = encode
        self.wait_s = max(0.0, float(wait_ms)) / 1000.0
        self.max_batch = int(max_batch)
        self._on_batch = on_batch or (lambda n: None)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        if self.wait_s > 0:
            self._thread = threading.Thread(target=self._loop, name="query-batcher", daemon=True)
            self._thread.start()

    def encode(self, texts: Sequence[str], timeout: float | None = 60.0) -> np.ndarray:
        """Vectors of ``texts`` (float32, shape (n, dim)), encoded with other requests' texts."""
        texts = list(texts)
        if self._thread is None or len(texts) >= self.max_batch:
            self._on_batch(len(texts))
            return self._encode(texts)
        fut: Future = Future()
        self._queue.put((texts, fut))
        return fut.result(timeout)

    def close(self) -> None:
        """Stop the worker (requests still queued are encoded first)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(5)
            self._thread = None

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            items = [first]
            n = len(first[0])
            deadline = time.monotonic() + self.wait_s
            stop = False
            while n < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    item = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                items.append(item)
                n += len(item[0])
            self._run(items)
            if stop:
                return

    def _run(self, items: list[tuple[list[str], Future]]) -> None:
        texts = [t for ts, _ in items for t in ts]
        try:
            vecs = self._encode(texts)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting request
            for _, fut in items:
                fut.set_exception(exc)
            return
        self._on_batch(len(texts))
        i = 0
        for ts, fut in items:
            fut.set_result(vecs[i:i + len(ts)])
            i += len(ts)
