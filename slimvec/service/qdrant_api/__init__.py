"""A Qdrant-compatible REST subset in ``slimvec serve`` (issue 26).

``models`` (envelope, errors, ids), ``translate`` (Qdrant operations as calls on the served
indexes), ``routes`` (the FastAPI router :func:`qdrant_router`, included by ``create_app``).
"""

from slimvec.service.qdrant_api.routes import qdrant_router

__all__ = ["qdrant_router"]
