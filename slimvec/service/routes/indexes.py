"""``/indexes`` and ``/indexes/{name}``: list, create, describe and delete served indexes."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from slimvec.buildspec import ENCODING_FIELDS
from slimvec.errors import ConfigError, SlimvecError
from slimvec.service.http_setup import redact
from slimvec.service.indexes import points
from slimvec.service.indexes.spec import ServiceSpec
from slimvec.service.limits import check_batch
from slimvec.service.models import CreateIndex
from slimvec.service.responses import DeletedIndex, IndexInfo, IndexList
from slimvec.service.routes.request_args import regular
from slimvec.service.state import ServiceState

__all__ = ["indexes_router"]


def indexes_router(st: ServiceState, read: Any, write: Any) -> APIRouter:
    """The index routes over the service state ``st`` (``read`` / ``write``: the key gate)."""
    r = APIRouter(tags=["indexes"])
    config = st.config

    @r.get("/indexes", dependencies=[read], response_model=IndexList,
           response_model_exclude_unset=True)
    def list_indexes() -> dict[str, Any]:
        """Every served index with its info, then those that failed (``state`` ``failed``,
        ``error``: why it failed to open, or why its restore was refused)."""
        out = []
        for name in st.registry.names():
            try:
                out.append(st.registry.get(name).info())
            except SlimvecError:
                continue
        for name in sorted(st.registry.errors):
            if (failed := st.registry.failed_info(name)) is not None:
                out.append({**failed, "error": redact(failed["error"], config)})
        return {"indexes": out}

    @r.put("/indexes/{name}", dependencies=[write], status_code=201, response_model=IndexInfo,
           response_model_exclude_unset=True)
    def create_index(name: str, body: CreateIndex) -> JSONResponse:
        """Create an index (200 when it exists with the same specs, 409 with others)."""
        check_batch(len(body.sample_vectors or []) + len(body.sample_texts or []),
                    config.max_batch, "sample rows")
        sample = None
        if body.sample_vectors:
            sample = np.asarray(body.sample_vectors, dtype=np.float32) if regular(
                body.sample_vectors) else None
            if sample is None:
                raise ConfigError("sample_vectors rows must all have the same dimension.")
        spec = ServiceSpec.from_request(recipe=body.recipe, reducer=body.reducer,
                                        store=body.store, keep_full=body.keep_full,
                                        encoder=body.encoder, fit_after=body.fit_after,
                                        default_recipe=config.recipe, metric=body.metric,
                                        **body.model_dump(include=set(ENCODING_FIELDS)))
        served, new = st.registry.create(name, spec, sample, body.sample_texts)
        if new and body.payload_index:
            points.declare_payload_indexes(served, body.payload_index)
        return JSONResponse(served.info(), status_code=201 if new else 200)

    @r.get("/indexes/{name}", dependencies=[read], response_model=IndexInfo,
           response_model_exclude_unset=True)
    def index_info(name: str) -> dict[str, Any]:
        """The fields of ``slimvec info --json``; a degraded index adds ``last_error`` (root
        and secrets masked), ``retries`` and ``next_retry``; one that failed is ``state``
        ``failed`` with its ``error``."""
        failed = st.registry.failed_info(name)
        if failed is not None:
            return {**failed, "error": redact(failed["error"], config)}
        out = st.registry.get(name).info()
        if out.get("last_error"):
            out["last_error"] = redact(out["last_error"], config)
        return out

    @r.delete("/indexes/{name}", dependencies=[write], response_model=DeletedIndex)
    def delete_index(name: str) -> dict[str, Any]:
        """Close the index and delete its folder (the home of a Qdrant collection: the whole
        collection, every vector's index, its side shard, settings and journal)."""
        st.delete_index(name)
        return {"deleted": name}

    return r
