"""The app's HTTP plumbing around the routes: errors to status codes (one JSON shape,
``{"detail": ...}``), the key gate, request metrics, the body limit and CORS."""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from slimvec.errors import ConfigError, IndexBusyError, PersistenceError, SlimvecError
from slimvec.service.auth import Auth
from slimvec.service.config import ServiceConfig
from slimvec.service.indexes.index_state import Busy, ConflictError, NotFound
from slimvec.service.indexes.writer import WriterClosed
from slimvec.service.limits import BodyLimit
from slimvec.service.state import ServiceState

__all__ = ["install_errors", "install_gates", "install_outer", "may_read", "redact", "error",
           "OPEN_PATHS"]

log = logging.getLogger(__name__)

#: the only paths that answer without a key when keys are set
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error body of the service."""
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


def _status_of(exc: Exception) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, (Busy, ConflictError, IndexBusyError)):
        return 409
    if isinstance(exc, WriterClosed):
        return 503
    if isinstance(exc, PermissionError) and not isinstance(exc, PersistenceError):
        return 403
    if isinstance(exc, ConfigError):
        return 422
    return 500


def install_errors(app: FastAPI, config: ServiceConfig) -> None:
    """Exceptions to answers: a library error by its kind, a validation error as one line, any
    other as a 500 that names only its type (the traceback goes to the log)."""

    @app.exception_handler(SlimvecError)
    async def _slimvec_error(request: Request, exc: SlimvecError) -> JSONResponse:
        status = _status_of(exc)
        if status == 500:
            log.error("%s %s: %s", request.method, request.url.path, exc)
        retry = max(1, round(getattr(exc, "retry_after", 1)))  # a degraded writer's next attempt
        headers = {"Retry-After": str(retry)} if status in (409, 503) else None
        return error(status, redact(str(exc), config) if status == 503 else str(exc), headers)

    @app.exception_handler(PermissionError)
    async def _forbidden(request: Request, exc: PermissionError) -> JSONResponse:
        return error(403, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for e in exc.errors()[:10]:
            loc = ".".join(str(x) for x in e.get("loc", ()))
            parts.append(f"{loc}: {e.get('msg')}")
        return error(422, "Invalid request: " + "; ".join(parts))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error(500, f"Internal error ({type(exc).__name__}); see the server log.")


def may_read(auth: Auth, request: Request) -> bool:
    """Whether ``request`` carries the read (or write) key."""
    try:
        auth.level(request)
    except HTTPException:
        return False
    return True


def install_gates(app: FastAPI, st: ServiceState, auth: Auth) -> None:
    """The key gate and the request metrics, as one plain ASGI middleware (two of Starlette's
    ``@app.middleware("http")`` cost a task and a stream each per request: issue 40, the floor of
    a small collection's ``count``)."""
    app.add_middleware(_Gates, st=st, auth=auth)


class _Gates:
    """Metrics around everything; with keys set, every path but OPEN_PATHS needs the read key:
    the docs, the OpenAPI schema, /reports/ and unknown paths included (routes still check write
    access)."""

    def __init__(self, app: Any, st: ServiceState, auth: Auth) -> None:
        self.app, self.st, self.auth = app, st, auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, status = time.perf_counter(), [500]

        async def sent(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            if (self.auth.api_key and scope["path"] not in OPEN_PATHS
                    and not may_read(self.auth, Request(scope))):
                await error(401, "Missing or wrong API key: send 'Authorization: Bearer KEY' or "
                                 "'api-key: KEY'.", {"WWW-Authenticate": "Bearer"})(scope, receive, sent)
                return
            await self.app(scope, receive, sent)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            self.st.metrics.requests.labels(path, scope["method"], str(status[0])).inc()
            self.st.metrics.latency.labels(path, scope["method"]).observe(time.perf_counter() - t0)


def install_outer(app: FastAPI, config: ServiceConfig) -> FastAPI:
    """The body limit, and CORS outermost when origins are configured."""
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    if config.cors_origins:
        # outermost: a preflight carries no key, so it is answered before the key gate; the
        # request that follows still needs its key. No credentials: keys travel in headers.
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins),
                           allow_credentials=False, allow_methods=["*"],
                           allow_headers=["authorization", "api-key", "content-type"],
                           max_age=600)
    return app


def redact(text: str, config: ServiceConfig) -> str:
    """``text`` with the root written ``ROOT``, URL credentials and every known key masked."""
    for root in sorted({str(config.root.resolve()), str(config.root.absolute())}, key=len,
                       reverse=True):
        text = text.replace(root, "ROOT")
    text = re.sub(r"(://)[^/@\s]+@", r"\1***@", text)
    for secret in (config.api_key, config.read_only_key, os.environ.get("QDRANT_API_KEY")):
        if secret:
            text = text.replace(secret, "***")
    return text
