"""``/indexes/{name}/documents``, ``/vectors``, ``/fit`` and ``/calibrate``: the write routes of
an index (each takes a write slot: backpressure is 503 when they are all taken)."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from fastapi import APIRouter, Query

from slimvec.errors import ConfigError
from slimvec.service.limits import check_batch
from slimvec.service.models import CalibrateIn, DocumentsIn, VectorsIn, WriteOut
from slimvec.service.responses import CalibrateOut, IndexInfo
from slimvec.service.routes.request_args import queries
from slimvec.service.state import ServiceState

__all__ = ["write_router"]


def write_router(st: ServiceState, write: Any) -> APIRouter:
    """The write routes over the service state ``st`` (behind ``write``)."""
    r = APIRouter(tags=["write"])

    def _write(name: str, rows: list[dict[str, Any]], kind: str, wait: bool) -> WriteOut:
        check_batch(len(rows), st.config.max_batch, kind)
        served = st.writable(name)
        source = f"{name}:{kind}:{uuid.uuid4().hex[:12]}"
        with st.slots:
            add = served.add_documents if kind == "documents" else served.add_vectors
            result, fut = add(rows, source)
            if fut is not None and wait:
                fut.result()
                result.committed = True
        return WriteOut(**result.__dict__)

    @r.post("/indexes/{name}/documents", dependencies=[write], response_model=WriteOut)
    def add_documents(name: str, body: DocumentsIn,
                      wait: bool = Query(True, description="Answer after the commit.")) -> WriteOut:
        """Add documents ``{id?, text, payload?}``; bad rows come back in ``rejected``."""
        return _write(name, [d.model_dump() for d in body.documents], "documents", wait)

    @r.post("/indexes/{name}/vectors", dependencies=[write], response_model=WriteOut)
    def add_vectors(name: str, body: VectorsIn, wait: bool = Query(True)) -> WriteOut:
        """Add full vectors with ids (the drop-in path of ``slimvec migrate``)."""
        return _write(name, [v.model_dump() for v in body.vectors], "vectors", wait)

    @r.post("/indexes/{name}/fit", dependencies=[write], response_model=IndexInfo,
            response_model_exclude_unset=True)
    def fit(name: str) -> dict[str, Any]:
        """Fit the reducer now on the documents collected so far (an index created without a
        sample is otherwise fitted once ``fit_after`` documents arrived); 409 when it is fitted."""
        served = st.registry.get(name)
        with st.slots:
            return served.fit_now()

    @r.post("/indexes/{name}/calibrate", dependencies=[write], response_model=CalibrateOut)
    def calibrate(name: str, body: CalibrateIn) -> dict[str, Any]:
        """Re-measure a rescore=auto index's rescoring depth on your queries (kept for its later
        calibrations), as ``slimvec calibrate`` does."""
        served = st.registry.get(name)
        vecs = queries(st, served, body.texts, body.vectors)
        if not np.isfinite(vecs).all():
            raise ConfigError("Query vectors hold NaN or inf.")
        before = served.ready_index().manifest.rescore
        info = served.calibrate(vecs)
        return {"depth": info.depth, "previous_depth": before.depth if before else None,
                "recall": info.recall, "target": info.target, "k": info.k,
                "n_queries": info.n_queries, "n_corpus": info.n_corpus, "reached": info.reached,
                "status": info.status}

    return r
