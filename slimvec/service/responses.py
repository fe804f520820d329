"""Response bodies of the native routes (pydantic), so the OpenAPI schema says what each answers.

Routes declare them with ``response_model_exclude_unset=True``: a key the handler did not send
stays absent (``/healthz`` without ``degraded``, an index's ``last_error``), exactly as before the
models. Models of open-ended records (an index's info, a job) name the fields clients rely on and
allow the rest (``extra="allow"``): ``slimvec info --json`` grows fields without a schema change.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slimvec.service.indexes.index_state import IndexState

__all__ = ["HealthOut", "ReadyOut", "IndexInfo", "IndexList", "DeletedIndex", "PayloadsOut",
           "ReduceOut", "CalibrateOut", "JobOut", "SnapshotOut", "SnapshotFile", "SnapshotList",
           "DeletedOut", "UpdatedOut", "DocumentsOut", "ScrollOut", "CountOut"]

Id = int | str


class _Open(BaseModel):
    """An answer: the fields it names, and whatever else the handler sent, unchanged (a
    response model never drops or refuses a key: the JSON stays what it was before the models)."""

    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------------- health
class HealthOut(_Open):
    status: str = Field(..., description="Always 'ok' when the process answers.")
    degraded: int | None = Field(None, description="Indexes whose writer retries a failed "
                                    "commit (only when there are some).")


class ReadyOut(_Open):
    """``/readyz``: 503 with ``{"status": "starting"}`` until the indexes are open."""

    status: str
    counts: dict[str, int] | None = Field(None, description="Indexes by state, and 'failed'.")
    indexes: list[str] | None = Field(None, description="With a key only.")
    errors: dict[str, str] | None = Field(None, description="Why the failed ones failed "
                                             "(with a key only; root and secrets masked).")


# ---------------------------------------------------------------------- indexes
class IndexInfo(_Open):
    """The fields of ``slimvec info --json`` plus ``name`` and ``state``; a pending index has
    ``pending`` / ``fit_after``, a degraded one ``last_error``, ``retries``, ``next_retry``, a
    failed one ``error``."""

    name: str | None = None
    index: str | None = Field(None, description="The folder, relative to the served root.")
    state: IndexState | None = None
    count: int | None = None
    encoder: str | None = None
    reducer: str | None = None
    store: str | None = None
    recipe: str | None = None
    pending: int | None = None
    fit_after: int | None = None
    last_error: str | None = None
    retries: int | None = None
    next_retry: str | None = None
    error: str | None = Field(None, description="Why an index in state 'failed' is not served.")


class IndexList(_Open):
    indexes: list[IndexInfo]


class DeletedIndex(_Open):
    deleted: str = Field(..., description="The name of the deleted index.")


# ---------------------------------------------------------------------- search / reduce
class PayloadsOut(_Open):
    payloads: list[dict[str, Any] | None]


class ReduceOut(_Open):
    dim_in: int
    dim_out: int
    vectors: list[list[float]]


class CalibrateOut(_Open):
    """The new ``rescore=auto`` depth and what it was measured on."""

    depth: int
    previous_depth: int | None = None
    recall: float | None = None
    target: float | None = None
    k: int
    n_queries: int
    n_corpus: int
    reached: bool | None = None
    status: str | None = None


# ---------------------------------------------------------------------- jobs
class JobOut(_Open):
    """A background job's record (an ingest job, or ``kind: rebuild``); ``GET /jobs/{id}``."""

    id: str
    index: str
    state: str = Field(..., description="queued, running, done, failed (ingest); rebuilding, "
                       "done, failed, interrupted (rebuild)")
    kind: str | None = None
    rows: int | None = None
    error: str | None = None
    created: float | None = None


# ---------------------------------------------------------------------- snapshots
class SnapshotOut(_Open):
    snapshot: str
    index: str
    count: int
    files: int
    bytes: int
    archive_bytes: int
    sha256: str


class SnapshotFile(_Open):
    snapshot: str
    bytes: int
    modified: str


class SnapshotList(_Open):
    snapshots: list[SnapshotFile]


# ---------------------------------------------------------------------- points
class DeletedOut(_Open):
    deleted: int


class UpdatedOut(_Open):
    updated: int


class DocumentsOut(_Open):
    documents: list[dict[str, Any] | None]


class ScrollOut(_Open):
    documents: list[dict[str, Any]]
    next_offset: int | None = None


class CountOut(_Open):
    count: int
