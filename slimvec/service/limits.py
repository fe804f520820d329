"""Request limits: body size (413 with the limit), a bounded write queue (429 + Retry-After) and
caps on every size a request names (results, ids, candidates: :func:`check_size`), so that no
request's work grows with a number the client chose (issue 39, F4)."""

from __future__ import annotations

import json
import threading
from typing import Any

from fastapi import HTTPException

from slimvec.errors import ConfigError

__all__ = ["BodyLimit", "WriteSlots", "check_batch", "check_size", "MAX_RESULTS", "MAX_IDS",
           "MAX_CANDIDATES", "MAX_REQUEST_CANDIDATES"]

#: results one query may ask for: ``k``, Qdrant's ``offset + limit``, a scroll page
MAX_RESULTS = 10_000
#: ids one request may name (get, retrieve, delete, payload changes)
MAX_IDS = 100_000
#: candidates one query may re-rank: ``k * rescore``
MAX_CANDIDATES = 100_000
#: candidates of all the queries of one request: ``queries * k * rescore depth``
MAX_REQUEST_CANDIDATES = 2_000_000


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
