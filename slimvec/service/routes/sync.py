"""``POST /indexes/{name}/sync``: ``slimvec ingest SRC --sync`` as a background job (issue 25
item 4 in the service).

The job makes the index equal to a file on the server (under ``--allow-dir``): documents whose
content is unchanged are not re-encoded, changed ones are, and documents whose id left the file
are deleted only after the whole file was read and everything new committed; a file read with
errors deletes nothing unless ``force`` (:mod:`slimvec.ops.sync`). Into a served index it
writes through the index's writer, so searches answer all along
(:mod:`slimvec.service.indexes.jobserve`). ``GET /jobs/{id}`` shows its phase and rows as it goes, and
once done its ``summary``: added / updated / unchanged / deleted (and ``not_deleted`` when
``force`` was needed).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from slimvec.service.models import JobIn
from slimvec.service.responses import JobOut
from slimvec.service.routes.request_args import job_options

__all__ = ["sync_router", "SyncIn"]


class SyncIn(JobIn):
    """Sync an index with a file on the server, as ``slimvec ingest SRC --sync`` does."""

    force: bool = Field(False, description="delete the documents that left the file even when "
                                           "the file had unreadable rows or no document")


def sync_router(st: Any, write: Any) -> APIRouter:
    """The sync route over the service state ``st`` (registry, jobs, config), behind ``write``."""
    router = APIRouter()

    @router.post("/indexes/{name}/sync", dependencies=[write], tags=["jobs"], status_code=202,
                 response_model=JobOut)
    def sync_index(name: str, body: SyncIn) -> dict[str, Any]:
        """Make index ``name`` equal to a file on the server (under --allow-dir) in the
        background: unchanged documents are skipped, changed ones re-encoded, and documents
        whose id left the file deleted once everything new is committed. Returns the job
        (``GET /jobs/{id}``: its ``summary`` says added / updated / unchanged / deleted)."""
        opts = job_options(st, name, body, sync=True, force=body.force)
        return st.jobs.submit(name, body.path, opts)

    return router
