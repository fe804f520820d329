"""Qdrant's wire shapes as ``slimvec serve`` answers them: the envelope, the error, point ids.

The request and response bodies are qdrant-client's own pydantic models
(:mod:`qdrant_client.http.models`, a slimvec dependency), so what this API reads and writes is
what the client sends and parses. This module adds what those models do not say: which of their
fields slimvec serves (anything else is a :class:`QdrantError` 400 naming the feature, never
ignored) and how Qdrant's ids map onto slimvec's source ids.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable

from fastapi.responses import JSONResponse

__all__ = ["QdrantError", "envelope", "error_response", "point_id", "qdrant_id", "unsupported",
           "SOURCE_ID", "check_fields"]

#: the payload key where slimvec keeps a point's original id (the service's ``source_id``)
SOURCE_ID = "source_id"


class QdrantError(Exception):
    """An error answered in Qdrant's shape: ``{"status": {"error": MESSAGE}, "time": T}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def envelope(result: Any, started: float) -> JSONResponse:
    """Qdrant's success envelope ``{"result", "status": "ok", "time"}``."""
    return JSONResponse({"result": result, "status": "ok", "time": time.perf_counter() - started})


def error_response(status: int, message: str, started: float) -> JSONResponse:
    """Qdrant's error envelope: qdrant-client raises ``UnexpectedResponse`` on it."""
    return JSONResponse({"status": {"error": message}, "time": time.perf_counter() - started},
                        status_code=status)


def unsupported(feature: str, what_to_do: str = "") -> QdrantError:
    """A 400 naming a Qdrant feature slimvec does not serve."""
    return QdrantError(400, f"Bad request: {feature} is not supported by slimvec's Qdrant-compatible "
                            f"API{'; ' + what_to_do if what_to_do else ''}. See the README section "
                            "'Qdrant-compatible API' for what is served.")


def check_fields(body: dict[str, Any], allowed: Iterable[str], where: str) -> None:
    """Refuse (400) every non-null field of ``body`` outside ``allowed``: a Qdrant option slimvec
    does not implement is named, never silently accepted."""
    # an empty object or list asks for nothing (LangChain sends "sparse_vectors": {})
    extra = sorted(k for k, v in body.items()
                   if k not in set(allowed) and v is not None and v != {} and v != [])
    if extra:
        raise unsupported(f"{where} field(s) {', '.join(repr(k) for k in extra)}",
                          f"send only {', '.join(sorted(allowed))}")


def point_id(raw: Any) -> int | str:
    """A Qdrant point id (unsigned 64-bit integer or UUID) as slimvec's source id.

    Integers stay integers below 2**63 (they travel through JSON payloads and SQLite); larger
    ones are kept as their decimal string, which :func:`slimvec.ids.canonical_id` maps to the
    same store id as the integer. UUIDs in any of Qdrant's accepted spellings become the
    lowercase hyphenated form Qdrant returns.

    Raises
    ------
    QdrantError
        400 for anything else (negative, float, bool, a string that is not a UUID).
    """
    if isinstance(raw, bool):
        raise QdrantError(400, f"Bad request: point id {raw!r} is a boolean; expected an unsigned "
                               "integer or a UUID.")
    if isinstance(raw, int):
        if not 0 <= raw < 2 ** 64:
            raise QdrantError(400, f"Bad request: point id {raw} is outside 0..2**64-1; expected an "
                                   "unsigned integer or a UUID.")
        return raw if raw < 2 ** 63 else str(raw)
    if isinstance(raw, str):
        try:
            return str(uuid.UUID(raw))
        except ValueError:
            raise QdrantError(400, f"Bad request: point id {raw[:60]!r} is not a UUID; expected an "
                                   "unsigned integer or a UUID.") from None
    raise QdrantError(400, f"Bad request: point id {str(raw)[:60]!r} ({type(raw).__name__}); "
                           "expected an unsigned integer or a UUID.")


def qdrant_id(source_id: Any) -> int | str:
    """The id a point was written with, from the ``source_id`` slimvec stored (inverse of
    :func:`point_id`)."""
    if isinstance(source_id, str) and source_id.isdigit():
        return int(source_id)
    return source_id
