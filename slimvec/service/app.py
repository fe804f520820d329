"""The FastAPI app: :func:`create_app` assembles the routers over one shared state.

Every route lives in an APIRouter module (``routes_*.py``, :mod:`.qdrant_api`) made by a
``*_router(state, ...)`` factory taking the shared :class:`~slimvec.service.state.ServiceState`
and the key-gate dependencies; handlers are thin (validate, authorise, call the registry) and
answer with the response models of :mod:`.responses`. The plumbing around them (errors, the key
gate, metrics, body limit, CORS) is :mod:`.http_setup`; the offline docs pages :mod:`.docs_pages`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI

from slimvec.service.auth import Auth
from slimvec.service.config import ServiceConfig
from slimvec.service.http_setup import install_errors, install_gates, install_outer
from slimvec.service.qdrant_api import qdrant_router
from slimvec.service.routes.docs_pages import offline_docs
from slimvec.service.routes.health import health_router
from slimvec.service.routes.indexes import indexes_router
from slimvec.service.routes.jobs import jobs_router
from slimvec.service.routes.points import points_router
from slimvec.service.routes.rebuild import rebuild_router
from slimvec.service.routes.search import search_router
from slimvec.service.routes.snapshot import snapshot_router
from slimvec.service.routes.sync import sync_router
from slimvec.service.routes.write import write_router
from slimvec.service.state import ServiceState

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(config: ServiceConfig) -> FastAPI:
    """The service app over ``config.root`` (opens the indexes at startup)."""
    st = ServiceState(config)
    auth = Auth(config.api_key, config.read_only_key)
    read, write = Depends(auth.read), Depends(auth.write)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio

        await anyio.to_thread.run_sync(st.startup)
        yield
        await anyio.to_thread.run_sync(st.shutdown)

    # docs_url / redoc_url off: FastAPI's pages load their scripts from a CDN (blank offline);
    # /docs and /redoc are served from assets the server ships (docs_pages.offline_docs)
    app = FastAPI(title="slimvec", version=_version(), lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Fitted dimension reducers in front of vector stores, as a service.")
    app.state.slimvec = st
    install_errors(app, config)
    install_gates(app, st, auth)

    routers: list[Any] = [
        snapshot_router(st, write, read),  # snapshot, restore, list (issue 25 item 6)
        health_router(st, read, auth),  # /healthz, /readyz, /metrics
        indexes_router(st, read, write),  # list, create, info, delete
        write_router(st, write),  # documents, vectors, fit, calibrate
        search_router(st, read),  # search, payloads, reduce
        jobs_router(st, read, write),  # ingest jobs
        rebuild_router(st, write),  # POST /indexes/{name}/rebuild (issue 25)
        sync_router(st, write),  # POST /indexes/{name}/sync (issue 25 item 4)
        points_router(st, read, write),  # delete, payload, get, scroll, count
        qdrant_router(st, read, write),  # the Qdrant-compatible REST subset
    ]
    for router in routers:
        app.include_router(router)
    offline_docs(app, read)

    if config.reports is not None and Path(config.reports).is_dir():
        from fastapi.staticfiles import StaticFiles

        app.mount("/reports", StaticFiles(directory=str(config.reports), html=True),
                  name="reports")

    return install_outer(app, config)


def _version() -> str:
    from slimvec._version import __version__

    return __version__
