"""The writes of a Qdrant collection, each one journaled operation over all of a point's stores.

A write request is checked whole first (a refused request writes nothing), its filter resolved to
ids, then recorded in the collection's :class:`~.journal.Journal` and applied to every store (the
side shard, each named vector's index, the home last) by :meth:`CollectionWrites.apply`, which
is also what a restart runs on the records a crash left. Operations (JSON, as recorded):

- ``{"op": "write", "rows": [[id, {vector name: vector}, payload]], "whole", "only"}``: an upsert
  (``whole``: the point replaces what it was) or ``update_vectors`` (only the given vectors);
- ``{"op": "delete", "ids"}``, ``{"op": "delete_vectors", "ids", "names", "rows"}``;
- ``{"op": "payload", "ids", "payload", "overwrite"}``, ``{"op": "payload_each", "rows"}`` (a
  whole new payload per point), ``{"op": "delete_keys", "ids", "keys"}``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from slimvec.ids import doc_id
from slimvec.service.indexes import points
from slimvec.service.limits import MAX_IDS, check_size
from slimvec.service.qdrant_api.journal import Journal, multi_store
from slimvec.service.qdrant_api.models import QdrantError, check_fields, point_id, qfilter, selector
from slimvec.service.qdrant_api.named import NO_VECTOR, check_point, exposed, records_of, vector_configs
from slimvec.service.qdrant_api.sparse import SparseShards

__all__ = ["CollectionWrites"]

log = logging.getLogger(__name__)

Row = tuple[Any, dict[str, Any], dict[str, Any]]


def _chunks(ids: list[Any]) -> list[list[Any]]:
    return [ids[at:at + MAX_IDS] for at in range(0, len(ids), MAX_IDS)]


def _status(futs: list[Future[Any]], wait: bool) -> dict[str, Any]:
    if wait:
        for f in futs:
            f.result()
    pending = not wait and any(not f.done() for f in futs)
    return {"operation_id": 0, "status": "acknowledged" if pending else "completed"}


class CollectionWrites:
    """The write half of :class:`~slimvec.service.qdrant_api.translate.Collections`."""

    st: Any
    sparse: SparseShards
    journal: Journal
    settings: Callable[[str], dict[str, Any]]
    served: Callable[[str], Any]
    vindex: Callable[[str, Any], tuple[Any, dict[str, Any]]]
    each_index: Callable[[str], list[Any]]
    scan: Callable[[str], Any]
    _save: Callable[[str, dict[str, Any]], None]

    # ------------------------------------------------------------------ requests
    def commit(self, name: str, op: dict[str, Any], wait: bool) -> dict[str, Any]:
        """Record and apply ``op`` on collection ``name`` (under its write lock); a collection
        kept in one store (its home alone) needs no journal: that store's commit is the point's."""
        self.served(name)
        with self.journal.locked(name):
            return _status(self.journal.write(name, op, lambda o: self.apply(name, o),
                                              record=multi_store(self.settings(name))), wait)

    def write_points(self, name: str, rows: list[Row], wait: bool, whole: bool = True) -> dict[str, Any]:
        """Write checked ``(id, vectors, payload)`` rows (``whole``: an upsert)."""
        return self.commit(name, {"op": "write", "rows": [list(r) for r in rows], "whole": whole,
                                  "only": None}, wait)

    def _selected(self, name: str, body: dict[str, Any]) -> list[Any]:
        """The point ids of a request's ``points`` or ``filter`` (resolved now; call under the
        collection's lock, after :meth:`Journal.drain`)."""
        ids, flt = selector(body, self.scan(name))
        if ids is not None:
            check_size(len(ids), MAX_IDS, "The number of ids", "split the request.")
            return ids
        return [r["id"] for r in records_of(self.served(name), None, flt)]

    def _resolved(self, name: str, body: dict[str, Any], make: Callable[[list[Any]], dict[str, Any]],
                  wait: bool = True) -> dict[str, Any]:
        with self.journal.locked(name):
            self.journal.drain(name)
            return self.commit(name, make(self._selected(name, body)), wait)

    def delete_points(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /collections/NAME/points/delete``: ``{"points": [ids]}`` or ``{"filter"}``."""
        check_fields(body, ("points", "filter"), "delete points")
        return self._resolved(name, body, lambda ids: {"op": "delete", "ids": ids})

    def set_payload(self, name: str, body: dict[str, Any], overwrite: bool) -> dict[str, Any]:
        """``POST`` (merge) / ``PUT`` (overwrite) ``/collections/NAME/points/payload``; with
        ``key`` the payload is set at that JSON path of each point (Qdrant's path rules, as
        qdrant-client's local mode applies them)."""
        check_fields(body, ("payload", "points", "filter", "key"), "set payload")
        payload = body.get("payload") or {}
        if not isinstance(payload, dict):
            raise QdrantError(400, "Bad request: 'payload' must be an object.")
        check_point(vector_configs(self.settings(name)), 0, None, payload)
        if body.get("key") is None:
            return self._resolved(name, body, lambda ids: {
                "op": "payload", "ids": ids, "payload": payload, "overwrite": overwrite})
        from copy import deepcopy

        from qdrant_client.local.json_path_parser import parse_json_path
        from qdrant_client.local.payload_value_setter import set_value_by_key

        try:
            keys = parse_json_path(body["key"])
        except (ValueError, TypeError) as exc:
            raise QdrantError(400, f"Bad request: key {body['key']!r} is not a payload path ({exc}).") from None

        def each(ids: list[Any]) -> dict[str, Any]:
            rows = []
            for rec in records_of(self.served(name), ids, None):
                new = deepcopy(rec["payload"])
                set_value_by_key(payload=new, keys=keys, value=deepcopy(payload))
                rows.append([rec["id"], new])
            return {"op": "payload_each", "rows": rows}

        return self._resolved(name, body, each)

    def delete_payload(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /collections/NAME/points/payload/delete``: remove ``keys``."""
        check_fields(body, ("keys", "points", "filter"), "delete payload")
        keys = body.get("keys")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise QdrantError(400, "Bad request: 'keys' must be a list of payload keys.")
        return self._resolved(name, body, lambda ids: {"op": "delete_keys", "ids": ids, "keys": keys})

    def clear_payload(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /collections/NAME/points/payload/clear``: an empty payload."""
        check_fields(body, ("points", "filter"), "clear payload")
        return self._resolved(name, body, lambda ids: {
            "op": "payload", "ids": ids, "payload": {}, "overwrite": True})

    def update_vectors(self, name: str, body: dict[str, Any], wait: bool) -> dict[str, Any]:
        """``PUT /collections/NAME/points/vectors``: new vectors of existing points (their other
        vectors and payloads kept); an unknown id is a 404, as Qdrant's."""
        check_fields(body, ("points", "update_filter"), "update vectors")
        rows = body.get("points")
        if not isinstance(rows, list) or not all(isinstance(p, dict) for p in rows):
            raise QdrantError(400, "Bad request: send {\"points\": [{\"id\", \"vector\"}, ...]}.")
        cfg, sp = exposed(self.settings(name))
        with self.journal.locked(name):
            self.journal.drain(name)
            olds = points.get(self.served(name), [point_id(p.get("id")) for p in rows])
            flt = qfilter(body.get("update_filter"), self.scan(name))
            out: list[Row] = []
            for p, old in zip(rows, olds):
                if old is None:
                    raise QdrantError(404, f"Not found: No point with id {p.get('id')} found")
                pid, vecs, _ = check_point(cfg, p.get("id"), p.get("vector"), None, sp)
                if flt is None or flt.matches(pid, old["payload"]):
                    out.append((pid, vecs, old["payload"]))
            return self.write_points(name, out, wait, whole=False)

    def delete_vectors(self, name: str, body: dict[str, Any], wait: bool) -> dict[str, Any]:
        """``POST /collections/NAME/points/vectors/delete``: remove the ``vector`` names of the
        selected points (the points, their payloads and other vectors stay)."""
        check_fields(body, ("points", "filter", "vector"), "delete vectors")
        cfg, sp = exposed(self.settings(name))
        names = body.get("vector")
        if not isinstance(names, list) or not names:
            raise QdrantError(400, "Bad request: 'vector' must be a list of vector names.")
        for vname in names:
            if not isinstance(vname, str) or vname not in {**cfg, **sp}:
                raise QdrantError(400, f"Wrong input: Not existing vector name error: {vname!r}")

        def make(ids: list[Any]) -> dict[str, Any]:
            home = next(iter(vector_configs(self.settings(name))))
            rows = ([[r["id"], r["payload"]] for r in records_of(self.served(name), ids, None)]
                    if home in names and home in cfg else [])
            return {"op": "delete_vectors", "ids": ids, "names": list(dict.fromkeys(names)),
                    "rows": rows}

        return self._resolved(name, body, make, wait)

    # ------------------------------------------------------------------ applying
    def apply(self, name: str, op: dict[str, Any]) -> list[Future[Any]]:
        """Apply one journaled operation to every store of collection ``name`` (the side shard
        first, the home last); returns the futures of the commits still under way."""
        kind = op["op"]
        if kind == "write":
            return self._apply_write(name, op["rows"], op["whole"], op.get("only"))
        ids = op.get("ids") or []
        s = self.settings(name)
        sp = exposed(s)[1]
        if kind == "delete":
            if sp:
                self.sparse.delete(name, [doc_id(i) for i in ids])
            for served in self.each_index(name):
                for part in _chunks(ids):
                    points.delete(served, ids=part)
        elif kind == "delete_vectors":
            return self._apply_delete_vectors(name, op)
        elif kind in ("payload", "delete_keys"):
            for served in self.each_index(name):
                for part in _chunks(ids):
                    if kind == "payload":
                        points.set_payload(served, op["payload"], ids=part, overwrite=op["overwrite"])
                    else:
                        points.delete_payload_keys(served, op["keys"], ids=part)
        elif kind == "payload_each":
            for served in self.each_index(name):
                for pid, new in op["rows"]:
                    points.set_payload(served, new, ids=[pid], overwrite=True)
        else:
            raise ValueError(f"unknown journal operation {kind!r}")
        return []

    def _apply_delete_vectors(self, name: str, op: dict[str, Any]) -> list[Future[Any]]:
        cfg, sp = exposed(self.settings(name))
        futs: list[Future[Any]] = []
        for vname in op["names"]:
            if vname in sp:
                self.sparse.delete(name, [doc_id(i) for i in op["ids"]], [vname])
            elif vname != next(iter(cfg)):
                for part in _chunks(op["ids"]):
                    points.delete(self.vindex(name, vname)[0], ids=part)
            else:
                futs += self._apply_write(name, [[pid, {}, pay] for pid, pay in op["rows"]],
                                          True, vname)
        return futs

    def _apply_write(self, name: str, rows: list[Any], whole: bool, only: str | None
                     ) -> list[Future[Any]]:
        """Write ``(id, vectors, payload)`` rows: each name's index, the home last. ``whole``
        (an upsert): a point replaces what it was, so the home gets a flagged zero vector for a
        point without the first vector, and the other indexes lose the points without theirs;
        otherwise (``update_vectors``) only the given vectors are written. ``only``: write that
        name's index alone."""
        s = self.settings(name)
        cfg = vector_configs(s)
        home = next(iter(cfg))
        sp = exposed(s)[1]
        if sp and only is None:
            self.sparse.write(name, [(doc_id(pid), {k: (tuple(v[k]) if "size" not in sp[k] else v[k])
                                                    for k in sp if k in v})
                                     for pid, v, _ in rows], whole)
            rows = [(pid, {k: x for k, x in v.items() if k not in sp}, pay) for pid, v, pay in rows]
        if whole and not s.get("holes") and any(home not in v for _, v, _ in rows):
            s["holes"] = True  # from now on the home's searches leave out the flagged rows
            self._save(name, s)
        source = f"{name}:qdrant:{uuid.uuid4().hex[:12]}"
        futs: list[Future[Any]] = []
        for vname in [only] if only is not None else list(cfg)[1:] + [home]:
            served = self.vindex(name, vname)[0]
            items = [{"id": pid, "vector": v[vname], "payload": pay} for pid, v, pay in rows
                     if vname in v]
            lacking = [pid for pid, v, _ in rows if vname not in v] if whole else []
            if lacking and vname == home:
                zero = [0.0] * int(cfg[home]["size"])
                items += [{"id": pid, "vector": zero, "payload": {**pay, NO_VECTOR: True}}
                          for pid, v, pay in rows if home not in v]
            elif lacking:
                gone = [r["id"] for r in points.get(served, lacking) if r is not None]
                if gone:
                    points.delete(served, ids=gone)
            if not items:
                continue
            with self.st.slots:
                result, fut = served.add_vectors(items, source)
            if result.rejected:  # checked before it was recorded: a store's own refusal
                log.error("collection %r: the index of vector %r refused %d point(s) the "
                          "request's checks passed: %s", name, vname, len(result.rejected),
                          result.rejected[:3])
            if isinstance(fut, Future):
                futs.append(fut)
            elif fut is not None:  # a pending index's group fsync: durable once it returns
                fut.result()
        return futs
