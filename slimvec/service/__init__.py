"""``slimvec serve``: an HTTP service over index folders (ingest, search, drop-in reduction).

An ASGI app (FastAPI on uvicorn) over the library, with no index logic of its own beyond HTTP:
the sibling routers of :mod:`.routes` and :mod:`.qdrant_api` answering with the models of
:mod:`.responses`, validation (:mod:`.models`), auth (:mod:`.auth`), limits and backpressure
(:mod:`.limits`), and what it keeps for the indexes it serves in :mod:`.indexes` (the registry,
each served index with its one long-lived writer, fit on arrival, creation specs, batched query
encoding, background jobs); Prometheus metrics in :mod:`.metrics`. :func:`create_app` assembles
the app, :func:`serve` runs it.
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
