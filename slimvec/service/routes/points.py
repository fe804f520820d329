"""Native routes of the point operations (issue 25 item 7): delete, payload updates, get, scroll
and count of a served index, by the user's own ids or by a filter (Qdrant's filter JSON subset,
:mod:`slimvec.filters`). Each is one call of :mod:`slimvec.service.indexes.points`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from slimvec.service.indexes import points
from slimvec.service.responses import CountOut, DeletedOut, DocumentsOut, ScrollOut, UpdatedOut

__all__ = ["points_router"]

UserId = int | str


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SelectIn(_In):
    """Documents by the user's ids (the ``id`` given when they were added) or by filter."""

    ids: list[UserId] | None = Field(None, max_length=100_000)
    filter: dict[str, Any] | None = None


class PayloadIn(SelectIn):
    """Payload fields to set (merged; ``overwrite``: the whole payload replaced)."""

    fields: dict[str, Any]
    overwrite: bool = False


class DeleteKeysIn(SelectIn):
    keys: list[str] = Field(..., max_length=1000)


class GetIn(_In):
    ids: list[UserId] = Field(..., max_length=100_000)


class ScrollIn(_In):
    """A page of documents in store-id order; ``offset`` is the ``next_offset`` of the page
    before (none: the first page)."""

    limit: int = Field(100, ge=1, le=10_000)
    offset: int | None = Field(None, ge=0, le=2 ** 63 - 1)  # a store id
    filter: dict[str, Any] | None = None


class CountIn(_In):
    filter: dict[str, Any] | None = None


def points_router(state: Any, read: Any, write: Any) -> APIRouter:
    """The point routes over the service's registry (``read`` / ``write``: the key gate)."""
    r = APIRouter(tags=["points"])

    @r.post("/indexes/{name}/delete", dependencies=[write], response_model=DeletedOut)
    def delete(name: str, body: SelectIn) -> dict[str, Any]:
        """Delete documents by ids or filter; answered once the deletion is committed."""
        with state.slots:
            return {"deleted": points.delete(state.writable(name), body.ids, body.filter)}

    @r.post("/indexes/{name}/payload", dependencies=[write], response_model=UpdatedOut)
    def set_payload(name: str, body: PayloadIn) -> dict[str, Any]:
        """Set (merge) or overwrite payload fields by ids or filter, without re-encoding."""
        with state.slots:
            return {"updated": points.set_payload(state.writable(name), body.fields, body.ids,
                                                  body.filter, body.overwrite)}

    @r.post("/indexes/{name}/payload/delete", dependencies=[write], response_model=UpdatedOut)
    def delete_keys(name: str, body: DeleteKeysIn) -> dict[str, Any]:
        """Remove payload keys by ids or filter."""
        with state.slots:
            return {"updated": points.delete_payload_keys(state.writable(name), body.keys,
                                                          body.ids, body.filter)}

    @r.post("/indexes/{name}/get", dependencies=[read], response_model=DocumentsOut)
    def get(name: str, body: GetIn) -> dict[str, Any]:
        """Documents ``{id, store_id, payload}`` of the user's ids (null where unknown)."""
        return {"documents": points.get(state.registry.get(name), body.ids)}

    @r.post("/indexes/{name}/scroll", dependencies=[read], response_model=ScrollOut)
    def scroll(name: str, body: ScrollIn) -> dict[str, Any]:
        """One page of documents (matching ``filter``) and ``next_offset`` (null at the end)."""
        docs, nxt = points.scroll(state.registry.get(name), body.limit, body.offset, body.filter)
        return {"documents": docs, "next_offset": nxt}

    @r.post("/indexes/{name}/count", dependencies=[read], response_model=CountOut)
    def count(name: str, body: CountIn) -> dict[str, Any]:
        """Documents (matching ``filter``), exact."""
        return {"count": points.count(state.registry.get(name), body.filter)}

    return r
