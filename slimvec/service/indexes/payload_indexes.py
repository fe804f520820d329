"""The writer mutation that builds a payload index of a served index (below :mod:`.points`, the
routes' operations). Indexes declared at creation are part of the build spec
(:attr:`~slimvec.buildspec.BuildSpec.payload_index`): the writer builds them with the store."""

from __future__ import annotations

from typing import Any

__all__ = ["payload_index_mutation"]


def payload_index_mutation(field: str, kind: str) -> Any:
    """A writer mutation building the index in the store (where it has them) and recording it
    in the manifest (:func:`slimvec.index.lifecycle.declare_payload_index`)."""
    from slimvec.index.lifecycle import declare_payload_index

    return lambda b: declare_payload_index(b, field, kind)
