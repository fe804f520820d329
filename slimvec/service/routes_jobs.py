"""``POST /indexes/{name}/jobs`` and ``GET /jobs/{job_id}``: ingest a file on the server (under
``--allow-dir``) in the background, resumably, and follow it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from slimvec.indexer.pipeline import IngestOptions
from slimvec.service.models import JobIn
from slimvec.service.names import check_name
from slimvec.service.responses import JobOut
from slimvec.service.state import ServiceState

__all__ = ["jobs_router", "job_options"]


def job_options(st: ServiceState, name: str, body: JobIn, **extra: Any) -> IngestOptions:
    """A job request's ingest options (checked name, store and recipe; ``extra``: e.g. sync)."""
    check_name(name)
    st.registry.check_store(body.store)
    recipe = None
    if body.recipe is not None:
        from slimvec.recipe import merge_recipe, parse_recipe

        # a recipe over HTTP is a string, never a file on the server's disk
        recipe = str(parse_recipe(body.recipe))
        st.registry.check_store(merge_recipe(recipe, body.reducer, body.store,
                                             option="recipe").store)
    return IngestOptions(reducer=body.reducer, store=body.store, encoder=body.encoder,
                         recipe=recipe, default_recipe=st.config.recipe,
                         text_column=body.text_column, id_column=body.id_column,
                         format=body.format, fit_sample=body.fit_sample,
                         batch_size=body.batch_size, progress=False, **extra)


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
