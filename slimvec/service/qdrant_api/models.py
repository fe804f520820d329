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
from collections.abc import Iterable
from typing import Any

from fastapi.responses import JSONResponse

__all__ = ["QdrantError", "envelope", "error_response", "point_id", "qdrant_id", "unsupported",
           "select_payload", "query_vector", "count_arg", "default_vector",
           "qfilter", "needs_scan", "must_parts", "selector", "dim_of",
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


def select_payload(payload: dict[str, Any], selector: Any) -> dict[str, Any] | None:
    """Qdrant's ``with_payload``: bool, a list of keys (payload paths), ``{"include": [...]}`` /
    ``{"exclude"}``."""
    if selector is None or selector is False:
        return None
    if selector is True:
        return payload
    # keys are Qdrant's payload paths (``nested.id``, ``l[].c``), applied as local mode does
    from qdrant_client.local.payload_value_extractor import exclude_payload, include_payload

    if isinstance(selector, list):
        return include_payload(payload, selector)
    if isinstance(selector, dict) and isinstance(selector.get("include"), list):
        return include_payload(payload, selector["include"])
    if isinstance(selector, dict) and isinstance(selector.get("exclude"), list):
        return exclude_payload(payload, selector["exclude"])
    raise QdrantError(400, f"Bad request: with_payload={str(selector)[:80]!r}; expected true, "
                           "false, a list of keys, {\"include\": [...]} or {\"exclude\": [...]}.")


def query_vector(query: Any) -> list[Any]:
    if isinstance(query, dict) and set(query) == {"nearest"}:
        query = query["nearest"]
    if isinstance(query, list) and query and not isinstance(query[0], (list, dict)):
        return query
    if query is None:
        raise unsupported("a query without a vector", "use points/scroll to list points")
    if isinstance(query, (int, str)):
        raise unsupported("query by point id", "send the vector itself")
    what = sorted(query)[0] if isinstance(query, dict) and query else type(query).__name__
    raise unsupported(f"query {what!r} (only a dense vector or {{\"nearest\": vector}} is served)")


def default_vector(value: Any) -> Any:
    """Qdrant's unnamed vector spelled as the vector named ``""`` (``{"": ...}``, as LangChain
    writes it) is the unnamed vector; other names stay (and are refused as named vectors)."""
    if isinstance(value, dict) and list(value) == [""]:
        return value[""]
    return value


def count_arg(body: dict[str, Any], key: str, default: int) -> int:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise QdrantError(400, f"Bad request: {key} must be a non-negative integer, got {value!r}.")
    return value


def qfilter(spec: Any, scan: Any = None) -> Any:
    """A Qdrant filter with its ``has_id`` values as the ids the points were written with.

    A filter using what slimvec's filter language lacks (geo, nested, values_count, full-text,
    min_should, has_vector) is refused, unless ``scan`` is given: a callable that
    evaluates it over the collection's points as Qdrant does and returns the filter selecting
    the matching ids."""
    from slimvec.errors import ConfigError
    from slimvec.filters import parse_filter

    try:
        flt = parse_filter(spec)
    except ConfigError as exc:
        if scan is None or "not supported" not in str(exc):
            raise
        return scan(spec, exc)
    return None if flt is None else flt.map_ids(point_id)


def needs_scan(spec: Any) -> bool:
    """Whether filter ``spec`` uses what slimvec's filter language lacks (so :func:`qfilter`
    hands it to its ``scan``); a filter that is wrong otherwise is refused where it is used."""
    from slimvec.errors import ConfigError
    from slimvec.filters import parse_filter

    try:
        parse_filter(spec)
    except ConfigError as exc:
        return "not supported" in str(exc)
    return False


def must_parts(spec: Any) -> list[Any]:
    """The conditions of a filter that is only a ``must`` (nested ``must``-only filters, as the
    propagated filters of prefetches, flattened); ``[spec]`` for any other filter, ``[]`` for
    none. Each part of a ``must`` can be evaluated alone, a fallback one once per request."""
    if not spec:
        return []
    if isinstance(spec, dict) and set(spec) == {"must"}:
        items = spec["must"] if isinstance(spec["must"], list) else [spec["must"]]
        return [c for item in items for c in must_parts(item)]
    return [spec]


def selector(body: dict[str, Any], scan: Any = None) -> tuple[list[Any] | None, Any]:
    """``points`` (ids) or ``filter`` of a delete / payload request (Qdrant also nests a filter
    as ``{"points": {"filter": ...}}``); ``scan`` as :func:`qfilter`."""
    sel = body.get("points")
    if isinstance(sel, dict):
        return selector({"filter": sel.get("filter"), "points": sel.get("points")}, scan)
    if sel is not None and body.get("filter") is not None:
        raise QdrantError(400, "Bad request: send 'points' or 'filter', not both.")
    if sel is not None:
        if not isinstance(sel, list):
            raise QdrantError(400, "Bad request: 'points' must be a list of point ids.")
        return [point_id(x) for x in sel], None
    if body.get("filter") is None:
        raise QdrantError(400, "Bad request: send 'points' (ids) or 'filter'.")
    # an empty filter ``{}`` selects every point, as Qdrant's (slimvec's parser reads it as none)
    return None, qfilter(body["filter"] or {"must": []}, scan)


def dim_of(served: Any) -> int:
    """The input dimension of a served index (0 before it has one)."""
    if served.state == "ready" and served.index is not None:
        return int(served.index.dim_in)
    return int((served.spec.dim_in if served.spec else None) or 0)
