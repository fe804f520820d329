"""``slimvec serve``: an HTTP service over index folders (ingest, search, drop-in reduction).

An ASGI app (FastAPI on uvicorn) over the library, with no index logic of its own beyond HTTP:
the routes in APIRouter modules (``routes_*.py``, :mod:`.qdrant_api`) answering with the models
of :mod:`.responses`, validation (:mod:`.models`, :mod:`.names`), auth (:mod:`.auth`), limits and
backpressure (:mod:`.limits`), one long-lived writer per index (:mod:`.writer`), the open indexes
(:mod:`.registry`: :mod:`.served`, :mod:`.served_pending`, their states in
:mod:`.index_state`, creation specs in :mod:`.spec`), dynamic batching of query encoding
(:mod:`.batching`, :mod:`.encoders`), background ingest jobs (:mod:`.jobs`) and Prometheus
metrics (:mod:`.metrics`). :func:`create_app` assembles the app, :func:`serve` runs it.
"""

from __future__ import annotations

from slimvec.service.config import ServiceConfig

__all__ = ["ServiceConfig", "create_app", "serve"]


def create_app(config: ServiceConfig):  # noqa: ANN201 - FastAPI is an optional dependency
    """The FastAPI app serving ``config.root`` (see :mod:`slimvec.service.app`)."""
    from slimvec.extras import require_extra

    require_extra("serve", "slimvec.service")
    from slimvec.service.app import create_app as _create

    return _create(config)


def serve(config: ServiceConfig) -> None:
    """Run the service until SIGTERM / SIGINT (see :mod:`slimvec.service.server`)."""
    from slimvec.extras import require_extra

    require_extra("serve", "slimvec.service")
    from slimvec.service.server import serve as _serve

    _serve(config)
