"""``POST /indexes/{name}/jobs`` and ``GET /jobs/{job_id}``: ingest a file on the server (under
``--allow-dir``) in the background, resumably, and follow it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from slimvec.service.models import JobIn
from slimvec.service.responses import JobOut
from slimvec.service.routes.request_args import job_options
from slimvec.service.state import ServiceState

__all__ = ["jobs_router"]


def jobs_router(st: ServiceState, read: Any, write: Any) -> APIRouter:
    """The job routes over the service state ``st`` (``read`` / ``write``: the key gate)."""
    r = APIRouter(tags=["jobs"])

    @r.post("/indexes/{name}/jobs", dependencies=[write], status_code=202, response_model=JobOut,
            response_model_exclude_unset=True)
    def create_job(name: str, body: JobIn) -> dict[str, Any]:
        """Ingest a file on the server (under --allow-dir) in the background, resumably."""
        opts = job_options(st, name, body)
        return st.jobs.submit(name, body.path, opts)

    @r.get("/jobs/{job_id}", dependencies=[read], response_model=JobOut,
           response_model_exclude_unset=True)
    def job(job_id: str) -> dict[str, Any]:
        """State, rows done, rejected, docs/s of a job."""
        rec = st.jobs.get(job_id)
        if rec is None:
            raise HTTPException(404, f"No job {job_id[:40]!r}.")
        return rec

    return r
