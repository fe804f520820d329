"""Payload indexes of a served index: the writer mutation that builds one, and the build of
those declared at creation once the reducer is fitted. Below both :mod:`.registry` (which builds
them after a fit) and :mod:`.points` (the routes' operations), so neither imports the other."""

from __future__ import annotations

from typing import Any

__all__ = ["payload_index_mutation", "build_declared_indexes"]


def payload_index_mutation(field: str, kind: str) -> Any:
    """A writer mutation building the index in the store (where it has them) and recording it
    in the manifest (``payload_index``, as ``slimvec ingest --payload-index`` does)."""
    from slimvec.index.lifecycle import PAYLOAD_INDEX_KEY

    def run(b: Any) -> bool:
        built = bool(b.store.create_payload_index(field, kind))
        declared = dict(b.manifest.extra.get(PAYLOAD_INDEX_KEY) or {})
        declared[field] = kind
        b.manifest.extra[PAYLOAD_INDEX_KEY] = declared
        return built

    return run


def build_declared_indexes(served: Any) -> None:
    """Build the payload indexes a pending index declared, once it is fitted (its writer runs)."""
    for field, kind in (served.spec.payload_index if served.spec else {}).items():
        served.writer.mutate(payload_index_mutation(field, kind)).result()
