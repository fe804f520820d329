"""The Qdrant REST routes of ``slimvec serve`` (the subset qdrant-client's REST transport calls).

Every route answers Qdrant's envelope ``{"result", "status", "time"}``; every failure, Qdrant's
error shape ``{"status": {"error": ...}, "time"}`` (qdrant-client raises ``UnexpectedResponse``).
Authentication is the service's key gate: Qdrant's ``api-key`` header (or ``Authorization:
Bearer``), the read key for reads, the write key for writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from slimvec.errors import ConfigError, IndexBusyError, SlimvecError
from slimvec.service.limits import HEAVY_PER_COLLECTION, DeadlineExceeded, HeavySlots, check_batch, check_deadline, request_deadline
from slimvec.service.qdrant_api.collection import create_vector_name, delete_vector_name, update_collection
from slimvec.service.qdrant_api.examples import request_cost
from slimvec.service.qdrant_api.groups import query_groups, search_groups
from slimvec.service.qdrant_api.kinds import facet
from slimvec.service.qdrant_api.matrix import matrix_offsets, matrix_pairs
from slimvec.service.qdrant_api.models import QdrantError, envelope, error_response, unsupported
from slimvec.service.qdrant_api.named import SEP
from slimvec.service.qdrant_api.translate import Collections

__all__ = ["qdrant_router"]

log = logging.getLogger(__name__)


def _qdrant_error(exc: Exception) -> tuple[int, str]:
    """The status and Qdrant-style message of an exception raised by a route."""
    from slimvec.service.indexes.registry import NotFound
    from slimvec.service.indexes.writer import WriterClosed

    if isinstance(exc, QdrantError):
        return exc.status, exc.message
    if isinstance(exc, DeadlineExceeded):
        return exc.status, str(exc)
    if isinstance(exc, HTTPException):  # Starlette's: FastAPI raises it for a body it cannot parse
        return exc.status_code, str(exc.detail)
    if isinstance(exc, RequestValidationError):
        parts = [f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg')}"
                 for e in exc.errors()[:5]]
        return 400, "Format error in JSON body: " + "; ".join(parts)
    if isinstance(exc, NotFound):
        return 404, f"Not found: {exc}"
    if isinstance(exc, IndexBusyError):
        return 409, f"Service busy: {exc}"
    if isinstance(exc, WriterClosed):
        return 503, f"Service unavailable: {exc}"
    if isinstance(exc, ConfigError):
        return 400, f"Bad request: {exc}"
    if isinstance(exc, PermissionError):
        return 403, f"Forbidden: {exc}"
    if isinstance(exc, SlimvecError):
        return 500, f"Service internal error: {exc}"
    log.exception("qdrant-compatible route failed")
    return 500, f"Service internal error: {type(exc).__name__}; see the server log."


class QdrantRoute(APIRoute):
    """An APIRoute whose every failure (validation and authorisation included) answers in
    Qdrant's error shape instead of the native API's ``{"detail"}``."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()
        # not resolved (as in Qdrant): a collection's creation, deletion and alias listing
        resolves = "{name}" in self.path and not self.path.endswith("/aliases") and not (
            self.path == "/collections/{name}" and (self.methods or set()) & {"PUT", "DELETE"})

        async def route(request: Request) -> Any:
            t0 = time.perf_counter()
            try:
                if resolves and (name := request.path_params.get("name")) is not None:
                    cols = getattr(getattr(request.app.state, "slimvec", None), "collections", None)
                    if cols is not None:  # an alias names its collection in every route
                        request.path_params["name"] = cols.aliases.resolve(name)
                return await handler(request)
            except Exception as exc:  # noqa: BLE001 - every error is answered in Qdrant's shape
                status, message = _qdrant_error(exc)
                return error_response(status, message, t0)

        return route


def qdrant_router(state: Any, read: Any, write: Any) -> APIRouter:
    """The Qdrant-compatible routes over the service's registry.

    Parameters
    ----------
    state : object
        The app's shared state (registry, config, write slots).
    read, write : fastapi.params.Depends
        The key gate's read and write dependencies.
    """
    cols = Collections(state)
    r = APIRouter(route_class=QdrantRoute, tags=["qdrant"])

    def ok(result: Any, t0: float) -> JSONResponse:
        return envelope(result, t0)

    @r.get("/", dependencies=[read])
    def root() -> JSONResponse:
        """Qdrant's version info (qdrant-client checks the version at start-up)."""
        from slimvec._version import __version__

        # the title qdrant-client's local mode and a Qdrant server answer; the body says slimvec
        return JSONResponse({"title": "qdrant - vector search engine", "version": QDRANT_VERSION,
                             "commit": None, "server": "slimvec", "slimvec_version": __version__})

    @r.get("/collections", dependencies=[read])
    def list_collections() -> JSONResponse:
        t0 = time.perf_counter()
        return ok({"collections": [{"name": n} for n in state.registry.names() if SEP not in n]}, t0)

    @r.put("/collections/{name}", dependencies=[write])
    def create_collection(name: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.create(name, body), t0)

    @r.get("/collections/{name}", dependencies=[read])
    def get_collection(name: str) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.info(name), t0)

    @r.get("/collections/{name}/exists", dependencies=[read])
    def collection_exists(name: str) -> JSONResponse:
        t0 = time.perf_counter()
        return ok({"exists": SEP not in name and name in state.registry.names()}, t0)

    @r.patch("/collections/{name}", dependencies=[write])
    def patch_collection(name: str, body: dict[str, Any] = Body(default_factory=dict)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(update_collection(cols, name, body or {}), t0)

    @r.put("/collections/{name}/points/vectors", dependencies=[write])
    def update_vectors(name: str, body: dict[str, Any] = Body(...),
                       wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.update_vectors(name, body, wait), t0)

    @r.post("/collections/{name}/points/vectors/delete", dependencies=[write])
    def delete_vectors(name: str, body: dict[str, Any] = Body(...),
                       wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.delete_vectors(name, body, wait), t0)

    @r.post("/collections/{name}/points/batch", dependencies=[write])
    def batch_update(name: str, body: dict[str, Any] = Body(...),
                     wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        ops = body.get("operations")
        if not isinstance(ops, list):
            raise QdrantError(400, "Bad request: send {\"operations\": [operation, ...]}.")
        return ok([_batch_op(cols, name, op, wait) for op in ops], t0)

    @r.delete("/collections/{name}", dependencies=[write])
    def delete_collection(name: str) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.delete(name), t0)

    @r.put("/collections/{name}/points", dependencies=[write])
    def upsert(name: str, body: dict[str, Any] = Body(...),
               wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.upsert(name, body, wait), t0)

    @r.post("/collections/{name}/points", dependencies=[read])
    def retrieve(name: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.retrieve(name, body), t0)

    @r.post("/collections/{name}/points/delete", dependencies=[write])
    def delete_points(name: str, body: dict[str, Any] = Body(...),
                      wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.delete_points(name, body), t0)

    @r.post("/collections/{name}/points/payload", dependencies=[write])
    def set_payload(name: str, body: dict[str, Any] = Body(...),
                    wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.set_payload(name, body, overwrite=False), t0)

    @r.put("/collections/{name}/points/payload", dependencies=[write])
    def overwrite_payload(name: str, body: dict[str, Any] = Body(...),
                          wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.set_payload(name, body, overwrite=True), t0)

    @r.post("/collections/{name}/points/payload/delete", dependencies=[write])
    def delete_payload(name: str, body: dict[str, Any] = Body(...),
                       wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.delete_payload(name, body), t0)

    @r.post("/collections/{name}/points/payload/clear", dependencies=[write])
    def clear_payload(name: str, body: dict[str, Any] = Body(...),
                      wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.clear_payload(name, body), t0)

    @r.put("/collections/{name}/index", dependencies=[write])
    def create_index(name: str, body: dict[str, Any] = Body(...),
                     wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.create_index(name, body), t0)

    @r.delete("/collections/{name}/index/{field}", dependencies=[write])
    def delete_index(name: str, field: str, wait: bool = Query(False)) -> JSONResponse:
        t0 = time.perf_counter()
        return ok(cols.delete_index(name, field), t0)

    _query_routes(r, cols, state, read)
    _groups_then_the_rest(r, cols, read, write)  # the unsupported catch-all last
    return r


def _query_routes(r: APIRouter, cols: Collections, state: Any, read: Any) -> None:
    """The read routes that may cost a lot (query, query/batch, count, scroll): each under a
    deadline and a budget (issue 48 F5)."""
    heavy = HeavySlots(HEAVY_PER_COLLECTION)

    def budgeted(name: str, bodies: list[Any], timeout: int | None, run: Callable[[], Any],
                 t0: float) -> JSONResponse:
        """``run()`` (a read of collection ``name``) under the request's deadline (the server's
        ``query_timeout``, or Qdrant's ``timeout`` parameter when shorter), its budget checked
        before any work (:func:`request_cost`), in one of the collection's heavy slots when it
        is heavy (issue 48 F5)."""
        seconds = state.config.query_timeout if not timeout else min(state.config.query_timeout,
                                                                     timeout)
        with request_deadline(seconds):
            with heavy.take(name) if request_cost(cols, name, bodies) else nullcontext():
                return envelope(run(), t0)

    @r.post("/collections/{name}/points/query", dependencies=[read])
    def query(name: str, body: dict[str, Any] = Body(...),
              timeout: int | None = Query(None, ge=1)) -> JSONResponse:
        t0 = time.perf_counter()
        return budgeted(name, [body], timeout, lambda: cols.query(name, body), t0)

    @r.post("/collections/{name}/points/query/batch", dependencies=[read])
    def query_batch(name: str, body: dict[str, Any] = Body(...),
                    timeout: int | None = Query(None, ge=1)) -> JSONResponse:
        t0 = time.perf_counter()
        searches = body.get("searches")
        if not isinstance(searches, list):
            raise QdrantError(400, "Bad request: send {\"searches\": [query, ...]}.")
        check_batch(len(searches), state.config.max_batch, "searches")

        def run() -> list[Any]:
            out = []
            for s in searches:
                check_deadline()
                out.append(cols.query(name, s))
            return out

        return budgeted(name, searches, timeout, run, t0)

    @r.post("/collections/{name}/points/count", dependencies=[read])
    def count(name: str, body: dict[str, Any] = Body(default_factory=dict),
              timeout: int | None = Query(None, ge=1)) -> JSONResponse:
        t0 = time.perf_counter()
        return budgeted(name, [body or {}], timeout, lambda: cols.count(name, body or {}), t0)

    @r.post("/collections/{name}/points/scroll", dependencies=[read])
    def scroll(name: str, body: dict[str, Any] = Body(default_factory=dict),
               timeout: int | None = Query(None, ge=1)) -> JSONResponse:
        t0 = time.perf_counter()
        return budgeted(name, [body or {}], timeout, lambda: cols.scroll(name, body or {}), t0)


def _qdrant_version() -> str:
    """The Qdrant version announced at ``GET /``: the release of the installed qdrant-client,
    whose models define every shape served here (the client accepts a server within one minor
    version of its own)."""
    from importlib.metadata import version

    major, minor = version("qdrant-client").split(".")[:2]
    return f"{major}.{minor}.0"


QDRANT_VERSION = _qdrant_version()


#: ``points/batch`` operations and the translation method serving each (``overwrite`` flag)
_BATCH_OPS = {"upsert": ("upsert", None), "delete": ("delete_points", None),
              "set_payload": ("set_payload", False), "overwrite_payload": ("set_payload", True),
              "delete_payload": ("delete_payload", None), "clear_payload": ("clear_payload", None),
              "update_vectors": ("update_vectors", None), "delete_vectors": ("delete_vectors", None)}


def _batch_op(cols: Collections, name: str, op: Any, wait: bool) -> dict[str, Any]:
    """One operation of ``POST points/batch`` (``{"upsert": {...}}``, ``{"delete": {...}}``...),
    applied in order; an operation not served refuses the rest of the batch."""
    if not isinstance(op, dict) or len(op) != 1:
        raise QdrantError(400, "Bad request: each operation is an object with one key "
                               f"({', '.join(_BATCH_OPS)}).")
    kind, body = next(iter(op.items()))
    if kind not in _BATCH_OPS:
        raise unsupported(f"batch operation {kind!r}", f"send {', '.join(_BATCH_OPS)}")
    if not isinstance(body, dict):
        raise QdrantError(400, f"Bad request: operation {kind!r} must hold an object.")
    body = {k: v for k, v in body.items() if k != "shard_key" or v is None}
    method, overwrite = _BATCH_OPS[kind]
    if method in ("upsert", "update_vectors", "delete_vectors"):
        return dict(getattr(cols, method)(name, body, wait))
    if method == "set_payload":
        return cols.set_payload(name, body, overwrite=bool(overwrite))
    return dict(getattr(cols, method)(name, body))


def _groups_then_the_rest(r: APIRouter, cols: Collections, read: Any, write: Any) -> None:
    """The query-group, facet, search-matrix and alias routes (``groups.py``, ``kinds.py``,
    ``matrix.py``, ``aliases.py``), then every other Qdrant path's refusal (declared
    last: its catch-all paths would shadow any route after them)."""

    @r.post("/collections/{name}/points/query/groups", dependencies=[read])
    def query_points_groups(name: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(query_groups(cols, name, body), t0)

    @r.post("/collections/{name}/points/search/groups", dependencies=[read])
    def search_points_groups(name: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(search_groups(cols, name, body), t0)

    @r.post("/collections/{name}/points/search/matrix/pairs", dependencies=[read])
    def search_matrix_pairs(name: str, body: dict[str, Any] = Body(default_factory=dict)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(matrix_pairs(cols, name, body or {}), t0)

    @r.post("/collections/{name}/points/search/matrix/offsets", dependencies=[read])
    def search_matrix_offsets(name: str, body: dict[str, Any] = Body(default_factory=dict)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(matrix_offsets(cols, name, body or {}), t0)

    @r.post("/collections/aliases", dependencies=[write])
    def update_aliases(body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(cols.aliases.apply(body, lambda: [n for n in cols.st.registry.names() if SEP not in n]), t0)

    @r.get("/aliases", dependencies=[read])
    def all_aliases() -> JSONResponse:
        return envelope(cols.aliases.listing(), time.perf_counter())

    @r.get("/collections/{name}/aliases", dependencies=[read])
    def collection_aliases(name: str) -> JSONResponse:
        return envelope(cols.aliases.listing(name), time.perf_counter())

    @r.put("/collections/{name}/vectors/{vname}", dependencies=[write])
    def add_vector_name(name: str, vname: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(create_vector_name(cols, name, vname, body), t0)

    @r.delete("/collections/{name}/vectors/{vname}", dependencies=[write])
    def drop_vector_name(name: str, vname: str) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(delete_vector_name(cols, name, vname), t0)

    @r.post("/collections/{name}/facet", dependencies=[read])
    def facet_counts(name: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        t0 = time.perf_counter()
        return envelope(facet(cols, name, body), t0)

    _unsupported_rest(r, read)


def _unsupported_rest(r: APIRouter, read: Any) -> None:
    """Every other Qdrant path and method answers Qdrant's error envelope: a 400 naming the
    endpoint (never a silent success), or 404 for a path Qdrant does not have."""
    every = ["GET", "POST", "PUT", "PATCH", "DELETE"]

    @r.api_route("/collections", methods=["POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
    @r.api_route("/collections/{name}", methods=["POST"], include_in_schema=False)
    @r.api_route("/collections/{name}/{rest:path}", methods=every, include_in_schema=False)
    @r.api_route("/aliases{rest:path}", methods=every, include_in_schema=False)
    @r.api_route("/cluster{rest:path}", methods=every, include_in_schema=False)
    @r.api_route("/snapshots{rest:path}", methods=every, include_in_schema=False)
    @r.api_route("/telemetry{rest:path}", methods=every, include_in_schema=False)
    @r.api_route("/locks{rest:path}", methods=every, include_in_schema=False)
    @r.api_route("/issues{rest:path}", methods=every, include_in_schema=False)
    def other_qdrant_path(request: Request) -> JSONResponse:
        raise unsupported(f"{request.method} {request.url.path}")
