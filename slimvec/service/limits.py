"""Request limits: body size (413 with the limit), a bounded write queue (429 + Retry-After) and
caps on every size a request names (results, ids, candidates: :func:`check_size`), so that no
request's work grows with a number the client chose (issue 39, F4)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from fastapi import HTTPException

from slimvec.errors import ConfigError, SlimvecError

__all__ = ["BodyLimit", "WriteSlots", "check_batch", "check_size", "MAX_RESULTS", "MAX_IDS",
           "MAX_CANDIDATES", "MAX_REQUEST_CANDIDATES", "MAX_SEARCHES", "MAX_PREFETCH_DEPTH",
           "MAX_SCAN_WORK", "MAX_EXAMPLE_WORK", "HEAVY_PER_COLLECTION", "SHUTDOWN", "Deadline",
           "DeadlineExceeded", "request_deadline", "current_deadline", "check_deadline",
           "HeavySlots"]

#: results one query may ask for: ``k``, Qdrant's ``offset + limit``, a scroll page
MAX_RESULTS = 10_000
#: ids one request may name (get, retrieve, delete, payload changes)
MAX_IDS = 100_000
#: candidates one query may re-rank: ``k * rescore``
MAX_CANDIDATES = 100_000
#: candidates of all the queries of one request: ``queries * k * rescore depth``
MAX_REQUEST_CANDIDATES = 2_000_000
#: searches one Qdrant query request may run: every query of a batch and every prefetch at every
#: depth (issue 48 F5)
MAX_SEARCHES = 4_096
#: how deep prefetches may nest
MAX_PREFETCH_DEPTH = 8
#: points one request may run through the Python fallback filter (qdrant-client's evaluator,
#: about 30 us a point for a geo condition): distinct fallback filters x collection size
MAX_SCAN_WORK = 400_000
#: example vectors x points one request may score exactly (recommend best_score / sum_scores,
#: discover, context: about 5 us a context pair and point)
MAX_EXAMPLE_WORK = 2_000_000
#: heavy reads (fallback filters, exact example scoring, many prefetches) in flight per
#: collection; the next is answered 429 at once instead of waiting for a thread
HEAVY_PER_COLLECTION = 2
#: set when the server is asked to stop: every request deadline is then past
SHUTDOWN = threading.Event()


class BodyLimit:
    """ASGI middleware refusing bodies above ``max_bytes`` (by Content-Length, or while reading)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, int(max_bytes)

    def _message(self) -> bytes:
        return json.dumps({"detail": f"Request body larger than the limit of {self.max_bytes:,} "
                                     "bytes; send smaller batches (or raise --max-body-bytes)."}).encode()

    async def _reply(self, send: Any) -> None:
        body = self._message()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", []):
            if k == b"content-length":
                try:
                    too_big = int(v) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._reply(send)
                    return
        seen = 0
        started = False

        async def limited_receive() -> Any:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooBig()
            return msg

        async def tracking_send(msg: Any) -> None:
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooBig:
            if not started:
                await self._reply(send)


class _TooBig(Exception):
    pass


class WriteSlots:
    """At most ``size`` write requests in flight over all indexes; the next gets 429."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._sem = threading.BoundedSemaphore(self.size)
        self._lock = threading.Lock()
        self.in_use = 0

    def __enter__(self) -> WriteSlots:
        if not self._sem.acquire(blocking=False):
            raise HTTPException(429, f"The ingest queue is full ({self.size} write requests in "
                                     "flight); retry after the Retry-After delay.",
                                headers={"Retry-After": "1"})
        with self._lock:
            self.in_use += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self.in_use -= 1
        self._sem.release()


def check_batch(n: int, limit: int, what: str) -> None:
    """413 when a request carries more than ``limit`` items."""
    if n > limit:
        raise HTTPException(413, f"{n:,} {what} in one request; the limit is {limit:,}. Split the "
                                 "batch (or raise --max-batch).")


def check_size(value: int, cap: int, what: str, hint: str) -> None:
    """A :class:`ConfigError` (the native API's 422, the Qdrant API's 400) naming the cap when
    a size a request names is above it."""
    if value > cap:
        raise ConfigError(f"{what} is {value:,}, above the cap of {cap:,}; {hint}")


class DeadlineExceeded(SlimvecError):
    """A request stopped at its deadline (``status`` 408) or by the server's shutdown (503)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Deadline:
    """The deadline of one read request: :meth:`check` raises :class:`DeadlineExceeded` once it
    has passed or the server is stopping; ``scans`` keeps the request's evaluated fallback
    filters (one evaluation per distinct filter, whichever prefetch needs it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.until = float(seconds), time.monotonic() + float(seconds)
        self.scans: dict[Any, Any] = {}

    def check(self) -> None:
        if SHUTDOWN.is_set():
            raise DeadlineExceeded(503, "Service unavailable: the server is shutting down; the "
                                        "request was stopped. Retry once it is back.")
        if time.monotonic() > self.until:
            raise DeadlineExceeded(408, f"Timeout error: the request ran past its deadline of "
                                        f"{self.seconds:g} s and was stopped (the server's "
                                        "--query-timeout, env SLIMVEC_QUERY_TIMEOUT, or the "
                                        "request's timeout parameter); ask for less work: "
                                        "fewer prefetches or examples, a filter slimvec's "
                                        "language has.")


_DEADLINE: ContextVar[Deadline | None] = ContextVar("slimvec_deadline", default=None)


@contextmanager
def request_deadline(seconds: float) -> Iterator[Deadline]:
    """Run the block under a :class:`Deadline` of ``seconds`` (seen by :func:`check_deadline`)."""
    deadline = Deadline(seconds)
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> Deadline | None:
    """The deadline of the request being served on this thread (None outside one)."""
    return _DEADLINE.get()


def check_deadline() -> None:
    """The cooperative check of long loops: raises once the request's deadline has passed (a
    no-op outside a request with a deadline)."""
    deadline = _DEADLINE.get()
    if deadline is not None:
        deadline.check()


class HeavySlots:
    """At most ``size`` heavy reads in flight per collection; the next gets 429 at once."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._lock = threading.Lock()
        self._in: dict[str, int] = {}

    @contextmanager
    def take(self, name: str) -> Iterator[None]:
        with self._lock:
            if self._in.get(name, 0) >= self.size:
                raise HTTPException(429, f"Too many requests: {self.size} heavy queries (filters "
                                         "evaluated point by point, exact example scoring, many "
                                         f"prefetches) are in flight on collection {name!r}; "
                                         "retry after the Retry-After delay.",
                                    headers={"Retry-After": "1"})
            self._in[name] = self._in.get(name, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._in[name] -= 1
