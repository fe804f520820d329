"""``/indexes/{name}/search``, ``/payloads`` and ``/reduce``: the read routes of an index."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fastapi import APIRouter

from slimvec.errors import ConfigError
from slimvec.service.indexes import points
from slimvec.service.limits import check_batch
from slimvec.service.models import ReduceIn, SearchIn, SearchOut
from slimvec.service.responses import PayloadsOut, ReduceOut
from slimvec.service.routes.request_args import queries
from slimvec.service.state import ServiceState

__all__ = ["search_router", "queries"]


def search_router(st: ServiceState, read: Any) -> APIRouter:
    """The read routes over the service state ``st`` (behind ``read``)."""
    r = APIRouter(tags=["search"])

    @r.post("/indexes/{name}/search", dependencies=[read], response_model=SearchOut)
    def search(name: str, body: SearchIn) -> dict[str, Any]:
        """Search with texts or full vectors; hits carry payloads."""
        served = st.registry.get(name)
        vecs = queries(st, served, body.texts, body.vectors)
        if not np.isfinite(vecs).all():
            raise ConfigError("Query vectors hold NaN or inf.")
        # before the reducer is fitted: exact search over the collected documents
        found_ids, found_scores, payloads_of = points.search(served, vecs, body.k, body.filter,
                                                             rescore=body.rescore)
        ids = found_ids.tolist()
        scores = [[float(s) if math.isfinite(s) else None for s in row]
                  for row in found_scores.tolist()]
        hits = []
        for qi, row in enumerate(ids):
            valid = [i for i in row if i >= 0]
            pays = payloads_of(valid) if valid else []  # the user's ids are in the payloads
            hits.append([_hit(i, scores[qi][j], p, body.payloads)
                         for j, (i, p) in enumerate(zip(valid, pays))])
        return {"ids": ids, "scores": scores, "hits": hits}

    @r.post("/indexes/{name}/payloads", dependencies=[read], response_model=PayloadsOut)
    def payloads(name: str, ids: list[int]) -> dict[str, Any]:
        """Stored payloads of store ids (``Index.payloads``)."""
        check_batch(len(ids), st.config.max_batch, "ids")
        index = st.registry.get(name).ready_index()
        return {"payloads": index.payloads([i for i in ids if 0 <= i < 2 ** 63])}

    @r.post("/indexes/{name}/reduce", dependencies=[read], response_model=ReduceOut)
    def reduce(name: str, body: ReduceIn) -> dict[str, Any]:
        """Texts or full vectors in, reduced vectors out (the index's fitted reducer)."""
        served = st.registry.get(name)
        vecs = queries(st, served, body.texts, body.vectors)
        if not np.isfinite(vecs).all():
            raise ConfigError("Vectors hold NaN or inf.")
        out = served.ready_index().reducer.transform(vecs)
        return {"dim_in": int(vecs.shape[1]), "dim_out": int(out.shape[1]),
                "vectors": np.asarray(out, dtype=np.float32).tolist()}

    return r


def _hit(sid: int, score: float | None, payload: dict[str, Any] | None, with_payload: bool
         ) -> dict[str, Any]:
    """One search hit, its ids named as ``slimvec search --json`` names them: ``id`` the user's
    (:func:`slimvec.ids.user_id`, the one mapping of ``SearchResult.source_ids`` and the CLI),
    ``store_id`` the store's; ``source_id`` repeats ``id`` for older clients. ``text`` is what
    the service stored for a document; a vector's own payload may hold ``text`` or
    ``source_id`` with other types, which stay in ``payload`` only (they made every search
    returning the row answer 500). ``payload`` and ``text`` only when ``with_payload``."""
    from slimvec.ids import user_id

    p = payload or {}
    uid = user_id(sid, p)
    text = p.get("text")
    return {"id": uid, "store_id": sid, "score": score, "source_id": uid,
            "text": text if isinstance(text, str) and with_payload else None,
            "payload": payload if with_payload else None}
