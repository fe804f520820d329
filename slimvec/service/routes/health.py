"""``/healthz``, ``/readyz`` and ``/metrics``: liveness, readiness (counts of indexes by state)
and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from slimvec.errors import SlimvecError
from slimvec.service.auth import Auth
from slimvec.service.http_setup import may_read, redact
from slimvec.service.indexes.index_state import IndexState
from slimvec.service.responses import HealthOut, ReadyOut
from slimvec.service.state import ServiceState

__all__ = ["health_router"]

#: the states /readyz counts (always present, 0 or more), then ``failed``
_COUNTED = (IndexState.READY, IndexState.PENDING, IndexState.BUSY, IndexState.DEGRADED)


def health_router(st: ServiceState, read: Any, auth: Auth) -> APIRouter:
    """The health routes over the service state ``st`` (``/metrics`` behind ``read``)."""
    r = APIRouter(tags=["health"])

    # async: answered on the event loop, never queued behind busy requests in the thread pool
    # (issue 48 F5); the registry and state reads below take short locks only
    @r.get("/healthz", response_model=HealthOut, response_model_exclude_unset=True)
    async def healthz() -> dict[str, Any]:
        """Alive; ``degraded`` (only when there are some) counts the indexes whose writer
        retries a failed commit (the process is alive and reads answer: still 200)."""
        degraded = 0
        for name in st.registry.names() if st.ready.is_set() else []:
            try:
                degraded += st.registry.get(name).health() == IndexState.DEGRADED
            except SlimvecError:
                continue
        return {"status": "ok", "degraded": degraded} if degraded else {"status": "ok"}

    @r.get("/readyz", response_model=ReadyOut, response_model_exclude_unset=True)
    async def readyz(request: Request) -> JSONResponse:
        """Ready: encoders loaded and indexes open (503 until then). Without a key (when keys
        are set) only the counts of indexes by state; with one also the names and why the
        failed ones failed (paths relative to the root, secrets masked)."""
        if not st.ready.is_set():
            return JSONResponse({"status": "starting"}, status_code=503)
        # a degraded index still answers searches, so the server stays ready (200): taking it
        # out of a load balancer would cut its reads too; the count says writes are refused
        counts = {state.value: 0 for state in _COUNTED}
        names = st.registry.names()
        for name in names:
            try:
                state = st.registry.get(name).health()
            except SlimvecError:
                continue
            key = IndexState(state).value
            counts[key] = counts.get(key, 0) + 1
        errors = dict(st.registry.errors)
        body: dict[str, Any] = {"status": "ready", "counts": {**counts, "failed": len(errors)}}
        if may_read(auth, request):
            body.update(indexes=names, errors={k: redact(v, st.config) for k, v in errors.items()})
        return JSONResponse(body)

    @r.get("/metrics", dependencies=[read], response_class=PlainTextResponse)
    def metrics() -> PlainTextResponse:
        """Prometheus metrics."""
        st.metrics.queue_depth.set(st.slots.in_use)
        return PlainTextResponse(st.metrics.render(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    return r
