"""The HTTP routes (FastAPI). Handlers are thin: validate, authorise, call the registry."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from slimvec.errors import ConfigError, IndexBusyError, PersistenceError, SlimvecError
from slimvec.indexer.pipeline import IngestOptions
from slimvec.service.auth import Auth
from slimvec.service.config import ServiceConfig
from slimvec.service.jobs import Jobs
from slimvec.service.limits import BodyLimit, WriteSlots, check_batch
from slimvec.service.metrics import Metrics
from slimvec.service.models import (
    CalibrateIn, CreateIndex, DocumentsIn, JobIn, ReduceIn, SearchIn, SearchOut, VectorsIn, WriteOut,
)
from slimvec.service import points
from slimvec.service.qdrant_api import qdrant_router
from slimvec.service.routes_points import points_router
from slimvec.service.registry import (
    Busy, ConflictError, Encoders, IndexSpecIn, NotFound, Registry,
)
from slimvec.service.writer import WriterClosed
from slimvec.service.routes_rebuild import rebuild_router
from slimvec.service.routes_sync import sync_router

__all__ = ["create_app"]

log = logging.getLogger(__name__)


class _State:
    """What the routes share."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.encoders = Encoders(config.batch_wait_ms, config.max_query_batch,
                                 self.metrics.query_batch.observe)
        self.registry = Registry(config.root, self.encoders, self.metrics.on_commit,
                                 config.allowed_stores())
        self.jobs = Jobs(config.root, self.registry, config.allow_dirs,
                         config.job_checkpoint_seconds)
        self.slots = WriteSlots(config.queue_size)
        self.ready = threading.Event()
        self.started = time.time()
        self.metrics.track_sizes(self._sizes)

    def _sizes(self) -> dict[str, int]:
        out = {}
        for name in self.registry.names():
            try:
                out[name] = int(self.registry.get(name).info().get("count", 0))
            except SlimvecError:
                continue
        return out

    def startup(self) -> None:
        skip = self.jobs.pending_names()
        self.registry.open_all(skip)
        self.jobs.resume_all()
        self.ready.set()
        log.info("ready: %d index(es) under %s", len(self.registry.names()), self.config.root)

    def shutdown(self) -> None:
        self.jobs.stop()
        self.registry.close_all()
        self.encoders.close()


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
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


def create_app(config: ServiceConfig) -> FastAPI:
    """The service app over ``config.root`` (opens the indexes at startup)."""
    st = _State(config)
    auth = Auth(config.api_key, config.read_only_key)
    read, write = Depends(auth.read), Depends(auth.write)

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        import anyio

        await anyio.to_thread.run_sync(st.startup)
        yield
        await anyio.to_thread.run_sync(st.shutdown)

    # docs_url / redoc_url off: FastAPI's pages load their scripts from a CDN (blank offline);
    # /docs and /redoc are served below from assets the server ships (_offline_docs)
    app = FastAPI(title="slimvec", version=_version(), lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Fitted dimension reducers in front of vector stores, as a service.")
    app.state.slimvec = st
    from slimvec.service.routes_snapshot import snapshot_router  # issue 25 item 6
    app.include_router(snapshot_router(st, write, read))

    @app.exception_handler(SlimvecError)
    async def _slimvec_error(request: Request, exc: SlimvecError) -> JSONResponse:
        status = _status_of(exc)
        if status == 500:
            log.error("%s %s: %s", request.method, request.url.path, exc)
        retry = max(1, round(getattr(exc, "retry_after", 1)))  # a degraded writer's next attempt
        headers = {"Retry-After": str(retry)} if status in (409, 503) else None
        return _error(status, _redact(str(exc), config) if status == 503 else str(exc), headers)

    @app.exception_handler(PermissionError)
    async def _forbidden(request: Request, exc: PermissionError) -> JSONResponse:
        return _error(403, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for e in exc.errors()[:10]:
            loc = ".".join(str(x) for x in e.get("loc", ()))
            parts.append(f"{loc}: {e.get('msg')}")
        return _error(422, "Invalid request: " + "; ".join(parts))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"Internal error ({type(exc).__name__}); see the server log.")

    def _may_read(request: Request) -> bool:
        try:
            auth.level(request)
        except HTTPException:
            return False
        return True

    @app.middleware("http")
    async def _key_gate(request: Request, call_next: Any) -> Any:
        """With keys set, every path but OPEN_PATHS needs the read key: the docs, the OpenAPI
        schema, /reports/ and unknown paths included (routes still check write access)."""
        if auth.api_key and request.url.path not in OPEN_PATHS and not _may_read(request):
            return _error(401, "Missing or wrong API key: send 'Authorization: Bearer KEY' or "
                               "'api-key: KEY'.", {"WWW-Authenticate": "Bearer"})
        return await call_next(request)

    @app.middleware("http")
    async def _measure(request: Request, call_next: Any) -> Any:
        t0 = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            path = getattr(route, "path", "unmatched")
            st.metrics.requests.labels(path, request.method, str(status)).inc()
            st.metrics.latency.labels(path, request.method).observe(time.perf_counter() - t0)

    # ------------------------------------------------------------------ health
    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, Any]:
        """Alive; ``degraded`` (only when there are some) counts the indexes whose writer
        retries a failed commit (the process is alive and reads answer: still 200)."""
        degraded = 0
        for name in st.registry.names() if st.ready.is_set() else []:
            try:
                degraded += st.registry.get(name).health() == "degraded"
            except SlimvecError:
                continue
        return {"status": "ok", "degraded": degraded} if degraded else {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    def readyz(request: Request) -> JSONResponse:
        """Ready: encoders loaded and indexes open (503 until then). Without a key (when keys
        are set) only the counts of indexes by state; with one also the names and why the
        failed ones failed (paths relative to the root, secrets masked)."""
        if not st.ready.is_set():
            return JSONResponse({"status": "starting"}, status_code=503)
        # a degraded index still answers searches, so the server stays ready (200): taking it
        # out of a load balancer would cut its reads too; the count says writes are refused
        counts = {"ready": 0, "pending": 0, "busy": 0, "degraded": 0}
        names = st.registry.names()
        for name in names:
            try:
                state = st.registry.get(name).health()
            except SlimvecError:
                continue
            counts[state] = counts.get(state, 0) + 1
        errors = dict(st.registry.errors)
        body: dict[str, Any] = {"status": "ready", "counts": {**counts, "failed": len(errors)}}
        if _may_read(request):
            body.update(indexes=names, errors={k: _redact(v, config) for k, v in errors.items()})
        return JSONResponse(body)

    @app.get("/metrics", dependencies=[read], response_class=PlainTextResponse, tags=["health"])
    def metrics() -> PlainTextResponse:
        """Prometheus metrics."""
        st.metrics.queue_depth.set(st.slots.in_use)
        return PlainTextResponse(st.metrics.render(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    # ------------------------------------------------------------------ indexes
    @app.get("/indexes", dependencies=[read], tags=["indexes"])
    def list_indexes() -> dict[str, Any]:
        """Every served index with its info."""
        out = []
        for name in st.registry.names():
            try:
                out.append(st.registry.get(name).info())
            except SlimvecError:
                continue
        return {"indexes": out}

    @app.put("/indexes/{name}", dependencies=[write], tags=["indexes"], status_code=201)
    def create_index(name: str, body: CreateIndex) -> JSONResponse:
        """Create an index (200 when it exists with the same specs, 409 with others)."""
        check_batch(len(body.sample_vectors or []) + len(body.sample_texts or []),
                    config.max_batch, "sample rows")
        sample = None
        if body.sample_vectors:
            sample = np.asarray(body.sample_vectors, dtype=np.float32) if _regular(
                body.sample_vectors) else None
            if sample is None:
                raise ConfigError("sample_vectors rows must all have the same dimension.")
        spec = IndexSpecIn.from_request(recipe=body.recipe, reducer=body.reducer, store=body.store,
                                        keep_full=body.keep_full, encoder=body.encoder,
                                        fit_after=body.fit_after, default_recipe=config.recipe)
        served, new = st.registry.create(name, spec, sample, body.sample_texts)
        if new and body.payload_index:
            points.declare_payload_indexes(served, body.payload_index)
        return JSONResponse(served.info(), status_code=201 if new else 200)

    @app.get("/indexes/{name}", dependencies=[read], tags=["indexes"])
    def index_info(name: str) -> dict[str, Any]:
        """The fields of ``slimvec info --json``; a degraded index adds ``last_error`` (root
        and secrets masked), ``retries`` and ``next_retry``."""
        out = st.registry.get(name).info()
        if out.get("last_error"):
            out["last_error"] = _redact(out["last_error"], config)
        return out

    @app.delete("/indexes/{name}", dependencies=[write], tags=["indexes"])
    def delete_index(name: str) -> dict[str, Any]:
        """Close the index and delete its folder."""
        st.registry.delete(name)
        return {"deleted": name}

    # ------------------------------------------------------------------ writes
    def _write(name: str, rows: list[dict[str, Any]], kind: str, wait: bool) -> WriteOut:
        check_batch(len(rows), config.max_batch, kind)
        served = st.registry.get(name)
        source = f"{name}:{kind}:{uuid.uuid4().hex[:12]}"
        with st.slots:
            add = served.add_documents if kind == "documents" else served.add_vectors
            result, fut = add(rows, source)
            if fut is not None and wait:
                fut.result()
                result.committed = True
        return WriteOut(**result.__dict__)

    @app.post("/indexes/{name}/documents", dependencies=[write], tags=["write"],
              response_model=WriteOut)
    def add_documents(name: str, body: DocumentsIn,
                      wait: bool = Query(True, description="Answer after the commit.")) -> WriteOut:
        """Add documents ``{id?, text, payload?}``; bad rows come back in ``rejected``."""
        return _write(name, [d.model_dump() for d in body.documents], "documents", wait)

    @app.post("/indexes/{name}/vectors", dependencies=[write], tags=["write"],
              response_model=WriteOut)
    def add_vectors(name: str, body: VectorsIn, wait: bool = Query(True)) -> WriteOut:
        """Add full vectors with ids (the drop-in path of ``slimvec migrate``)."""
        return _write(name, [v.model_dump() for v in body.vectors], "vectors", wait)

    # ------------------------------------------------------------------ search / reduce
    def _queries(served: Any, texts: list[str] | None, vectors: list[list[float]] | None
                 ) -> np.ndarray:
        if (texts is None) == (vectors is None):
            raise ConfigError("Send exactly one of 'texts' or 'vectors'.")
        n = len(texts if texts is not None else vectors)
        check_batch(n, config.max_batch, "queries")
        if n == 0:
            raise ConfigError("No query: 'texts' / 'vectors' is empty.")
        if vectors is not None and not _regular(vectors):
            raise ConfigError("Query vectors must all have the same dimension.")
        return served.embed(texts, vectors)

    @app.post("/indexes/{name}/search", dependencies=[read], tags=["search"],
              response_model=SearchOut)
    def search(name: str, body: SearchIn) -> dict[str, Any]:
        """Search with texts or full vectors; hits carry payloads."""
        served = st.registry.get(name)
        vecs = _queries(served, body.texts, body.vectors)
        if not np.isfinite(vecs).all():
            raise ConfigError("Query vectors hold NaN or inf.")
        # before the reducer is fitted: exact search over the collected documents
        found_ids, found_scores, payloads_of = points.search(served, vecs, body.k, body.filter,
                                                             rescore=body.rescore)
        ids = found_ids.tolist()
        scores = [[float(s) if math.isfinite(s) else None for s in row]
                  for row in found_scores.tolist()]
        hits = []
        for qi, row in enumerate(ids):
            valid = [i for i in row if i >= 0]
            pays = payloads_of(valid) if body.payloads and valid else [None] * len(valid)
            hits.append([_hit(i, scores[qi][j], p, body.payloads)
                         for j, (i, p) in enumerate(zip(valid, pays))])
        return {"ids": ids, "scores": scores, "hits": hits}

    @app.post("/indexes/{name}/payloads", dependencies=[read], tags=["search"])
    def payloads(name: str, ids: list[int]) -> dict[str, Any]:
        """Stored payloads of store ids (``Index.payloads``)."""
        check_batch(len(ids), config.max_batch, "ids")
        index = st.registry.get(name).ready_index()
        return {"payloads": index.payloads([i for i in ids if 0 <= i < 2 ** 63])}

    @app.post("/indexes/{name}/reduce", dependencies=[read], tags=["search"])
    def reduce(name: str, body: ReduceIn) -> dict[str, Any]:
        """Texts or full vectors in, reduced vectors out (the index's fitted reducer)."""
        served = st.registry.get(name)
        vecs = _queries(served, body.texts, body.vectors)
        if not np.isfinite(vecs).all():
            raise ConfigError("Vectors hold NaN or inf.")
        out = served.ready_index().reducer.transform(vecs)
        return {"dim_in": int(vecs.shape[1]), "dim_out": int(out.shape[1]),
                "vectors": np.asarray(out, dtype=np.float32).tolist()}

    @app.post("/indexes/{name}/fit", dependencies=[write], tags=["write"])
    def fit(name: str) -> dict[str, Any]:
        """Fit the reducer now on the documents collected so far (an index created without a
        sample is otherwise fitted once ``fit_after`` documents arrived); 409 when it is fitted."""
        served = st.registry.get(name)
        with st.slots:
            return served.fit_now()

    @app.post("/indexes/{name}/calibrate", dependencies=[write], tags=["write"])
    def calibrate(name: str, body: CalibrateIn) -> dict[str, Any]:
        """Re-measure a rescore=auto index's rescoring depth on your queries (kept for its later
        calibrations), as ``slimvec calibrate`` does."""
        served = st.registry.get(name)
        vecs = _queries(served, body.texts, body.vectors)
        if not np.isfinite(vecs).all():
            raise ConfigError("Query vectors hold NaN or inf.")
        before = served.ready_index().manifest.rescore
        info = served.calibrate(vecs)
        return {"depth": info.depth, "previous_depth": before.depth if before else None,
                "recall": info.recall, "target": info.target, "k": info.k,
                "n_queries": info.n_queries, "n_corpus": info.n_corpus, "reached": info.reached,
                "status": info.status}

    # ------------------------------------------------------------------ jobs
    @app.post("/indexes/{name}/jobs", dependencies=[write], tags=["jobs"], status_code=202)
    def create_job(name: str, body: JobIn) -> dict[str, Any]:
        """Ingest a file on the server (under --allow-dir) in the background, resumably."""
        from slimvec.service.names import check_name

        check_name(name)
        st.registry.check_store(body.store)
        recipe = None
        if body.recipe is not None:
            from slimvec.recipe import merge_recipe, parse_recipe

            # a recipe over HTTP is a string, never a file on the server's disk
            recipe = str(parse_recipe(body.recipe))
            st.registry.check_store(merge_recipe(recipe, body.reducer, body.store,
                                                 option="recipe").store)
        opts = IngestOptions(reducer=body.reducer, store=body.store, encoder=body.encoder,
                             recipe=recipe, default_recipe=config.recipe,
                             text_column=body.text_column, id_column=body.id_column,
                             format=body.format, fit_sample=body.fit_sample,
                             batch_size=body.batch_size, progress=False)
        return st.jobs.submit(name, body.path, opts)

    @app.get("/jobs/{job_id}", dependencies=[read], tags=["jobs"])
    def job(job_id: str) -> dict[str, Any]:
        """State, rows done, rejected, docs/s of a job."""
        rec = st.jobs.get(job_id)
        if rec is None:
            raise HTTPException(404, f"No job {job_id[:40]!r}.")
        return rec

    app.include_router(rebuild_router(st, write))  # POST /indexes/{name}/rebuild (issue 25)
    app.include_router(sync_router(st, write))  # POST /indexes/{name}/sync (issue 25 item 4)
    _offline_docs(app, read)
    app.include_router(points_router(st, read, write))  # delete, payload, get, scroll, count
    app.include_router(qdrant_router(st, read, write))  # the Qdrant-compatible REST subset

    if config.reports is not None and Path(config.reports).is_dir():
        from fastapi.staticfiles import StaticFiles

        app.mount("/reports", StaticFiles(directory=str(config.reports), html=True),
                  name="reports")

    return _with_limit(app, config)


#: where the Swagger UI and ReDoc assets are served (behind the read key, as every path but
#: OPEN_PATHS)
DOCS_ASSETS = "/docs-assets"
#: what the docs pages may load from where: images, data, fonts only from this server
DOCS_CSP = "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; frame-src 'none'"
#: the one outside URL in ReDoc 2's script (an image drawn on every page)
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
#: the files of ``fastapi_offline/static`` the pages load
_DOCS_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def _offline_docs(app: FastAPI, read: Any) -> None:
    """``/docs`` (Swagger UI 5) and ``/redoc`` from the assets shipped by the ``fastapi-offline``
    package, mounted at :data:`DOCS_ASSETS`, so both render without internet. (Only its files are
    used; swagger-ui-bundle 1.1.0 ships Swagger UI 4, which refuses an OpenAPI 3.1 schema.)"""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import HTMLResponse, Response
    from fastapi.staticfiles import StaticFiles

    from slimvec.extras import require

    package = require("serve", "fastapi_offline", "the offline /docs and /redoc pages")
    static = Path(package.__file__).parent / "static"
    missing = [f for f in _DOCS_FILES if not (static / f).is_file()]
    if missing:
        raise ConfigError(f"The docs assets {missing} are missing from {static} (expected the "
                          "files of fastapi-offline 1.7): reinstall it with "
                          "pip install 'slimvec[serve]'.")
    # ReDoc always draws Redocly's logo from its CDN: the script is served with that image made
    # an empty data: URL (registered before the mount, so this route answers for the file)
    redoc_js = (static / "redoc.standalone.js").read_bytes().replace(_REDOC_LOGO, b"data:,")

    @app.get(f"{DOCS_ASSETS}/redoc.standalone.js", dependencies=[read], include_in_schema=False)
    def redoc_script() -> Response:
        return Response(redoc_js, media_type="text/javascript; charset=utf-8")

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(static)), name="docs-assets")
    openapi = app.openapi_url or "/openapi.json"

    def offline(page: HTMLResponse) -> HTMLResponse:
        # the scripts still name outside hosts (ReDoc's logo on cdn.redoc.ly, Swagger UI's
        # validator badge): the browser may fetch images, data and fonts from this server only
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page

    @app.get("/docs", dependencies=[read], include_in_schema=False)
    def docs() -> HTMLResponse:
        from fastapi.openapi.docs import swagger_ui_default_parameters

        return offline(get_swagger_ui_html(
            openapi_url=openapi, title=f"{app.title} - API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            # no badge from validator.swagger.io (it would send it the schema's URL)
            swagger_ui_parameters={**swagger_ui_default_parameters, "validatorUrl": None}))

    @app.get("/redoc", dependencies=[read], include_in_schema=False)
    def redoc() -> HTMLResponse:
        return offline(get_redoc_html(openapi_url=openapi, title=f"{app.title} - ReDoc",
                                      redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
                                      redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
                                      with_google_fonts=False))


#: the only paths that answer without a key when keys are set
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _redact(text: str, config: ServiceConfig) -> str:
    """``text`` with the root written ``ROOT``, URL credentials and every known key masked."""
    import os
    import re

    for root in sorted({str(config.root.resolve()), str(config.root.absolute())}, key=len,
                       reverse=True):
        text = text.replace(root, "ROOT")
    text = re.sub(r"(://)[^/@\s]+@", r"\1***@", text)
    for secret in (config.api_key, config.read_only_key, os.environ.get("QDRANT_API_KEY")):
        if secret:
            text = text.replace(secret, "***")
    return text


def _with_limit(app: FastAPI, config: ServiceConfig) -> FastAPI:
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


def _hit(sid: int, score: float | None, payload: dict[str, Any] | None, with_payload: bool
         ) -> dict[str, Any]:
    """One search hit. ``text`` and ``source_id`` are what the service stored for a document;
    a vector's own payload may hold those keys with other types, which stay in ``payload``
    only (they made every search returning the row answer 500)."""
    p = payload or {}
    source_id, text = p.get("source_id"), p.get("text")
    ok_id = isinstance(source_id, (int, str)) and not isinstance(source_id, bool)
    return {"id": sid, "score": score, "source_id": source_id if ok_id else None,
            "text": text if isinstance(text, str) else None,
            "payload": payload if with_payload else None}


def _regular(rows: list[list[float]]) -> bool:
    return len({len(r) for r in rows}) <= 1 and all(len(r) for r in rows)


def _version() -> str:
    from slimvec import __version__

    return __version__
