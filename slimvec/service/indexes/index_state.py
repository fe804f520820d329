"""What a served index is and what one request did: the state enum, the service's errors
(404 / 409) and the write result. The lowest module of the registry: every other imports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from slimvec.errors import IndexBusyError, SlimvecError, StoreError

__all__ = ["IndexState", "NotFound", "Busy", "ConflictError", "WriteResult"]


class IndexState(str, Enum):
    """The state of a served index; the JSON (``info()["state"]``, ``/readyz`` counts) keeps the
    strings. ``state`` is one of the first four; ``DEGRADED`` is only what
    :meth:`~slimvec.service.indexes.served.ServedIndex.health` reports for a ready index whose writer
    retries a failed commit or is being reopened, ``FAILED`` what the service lists for an index
    it does not serve because it failed."""

    READY = "ready"
    """Fitted, open, its writer running."""
    PENDING = "pending"
    """Collecting the documents its reducer is fitted on (``ROOT/.pending/NAME``)."""
    BUSY = "busy"
    """A job, a restore or the rebuild's swap writes it; reads answer from its last commit
    when the store allows a second reader."""
    CLOSED = "closed"
    """Not open (shut down, deleted, or a failed open)."""
    DEGRADED = "degraded"
    """Ready, but writes answer 503 until its writer is back (reads still answer)."""
    FAILED = "failed"
    """Not served: it failed to open, or a restore of it was refused because it crashed the
    child process that checked it (``GET /indexes`` shows ``error``)."""

    def __str__(self) -> str:  # f-strings and messages show the value, as before the enum
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class NotFound(SlimvecError, LookupError):
    """No index of that name."""


class Busy(IndexBusyError):
    """The index cannot serve this now (a job writes it, or its reducer is not fitted yet)."""


class ConflictError(StoreError):
    """The request conflicts with the index's state (409)."""


@dataclass
class WriteResult:
    """What one write request did."""

    accepted: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    committed: bool = False
    pending_fit: bool = False
