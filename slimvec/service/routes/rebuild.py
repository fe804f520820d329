"""``POST /indexes/{name}/rebuild``: change a served index's recipe from its kept full vectors.

The job runs :func:`slimvec.ops.rebuild.rebuild` in a thread. Meanwhile the index answers
searches from the old index (opened read-only in place of its writer: writes answer 503 "no
writer; retry later" until the swap, so none is lost in the old folder); at the swap the service
reopens the index, now the new one, with its writer. The job's record (``GET /jobs/{id}``) gives
its phase (:data:`~slimvec.ops.rebuild.PHASES`) and rows as it goes, then the summary.

A server stopped mid-rebuild leaves the old index complete in place (or the new one, after the
swap) and the journal beside it: the same request again resumes the build or finishes the swap.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from slimvec.errors import SlimvecError
from slimvec.persistence import write_json_atomic
from slimvec.service.indexes.index_state import IndexState
from slimvec.service.responses import JobOut

__all__ = ["RebuildIn", "rebuild_router"]

log = logging.getLogger(__name__)


class RebuildIn(BaseModel):
    """``POST /indexes/{name}/rebuild``: the new recipe (a string, never a file on the server)."""

    model_config = ConfigDict(extra="forbid")

    recipe: str = Field(..., max_length=500,
                        description="REDUCER|STORE[|rescore=R|auto,keep_full=...] (docs/recipes.md)")
    sample: int = Field(10_000, ge=2, le=10_000_000,
                        description="Kept vectors sampled to fit the new reducer.")


def rebuild_router(st: Any, write: Any) -> APIRouter:
    """The rebuild route over the service state ``st`` (registry, jobs), behind ``write``."""
    router = APIRouter()
    _mark_interrupted(st)

    @router.post("/indexes/{name}/rebuild", dependencies=[write], tags=["jobs"],
                 status_code=202, response_model=JobOut, response_model_exclude_unset=True)
    def rebuild_index(name: str, body: RebuildIn) -> dict[str, Any]:
        """Rebuild index ``name`` with a new recipe from its kept full vectors, in the
        background (no text is re-encoded); searches answer from the old index until the swap.
        Returns the job (``GET /jobs/{id}``)."""
        from slimvec.ops.rebuild import refuse_without_kept
        from slimvec.recipe import parse_recipe
        from slimvec.service.indexes.registry import Busy

        recipe = parse_recipe(body.recipe)
        st.registry.check_store(recipe.store)
        served = st.registry.get(name)
        with served.lock:
            if served.state == "busy":  # a job writing through the writer still serves reads
                raise Busy(f"Index {name!r} is being written by {served.busy_reason}; rebuild it "
                           "when that finishes.")
            index = served.ready_index()  # 409 while pending or busy
            if getattr(served, "rebuilding", False):
                raise Busy(f"Index {name!r} is already being rebuilt.")
            refuse_without_kept(served.folder, index.manifest)
            served.rebuilding = True
        rec = {"id": uuid.uuid4().hex[:16], "kind": "rebuild", "index": name,
               "recipe": str(recipe), "state": "rebuilding", "phase": "queued", "rows": 0,
               "created": time.time(), "error": None}
        st.jobs.dir.mkdir(exist_ok=True)
        _save(st, rec)
        threading.Thread(target=_run, args=(st, served, rec, body.sample),
                         name=f"rebuild:{rec['id']}", daemon=True).start()
        return rec

    return router


def _mark_interrupted(st: Any) -> None:
    """A rebuild job a stopped server left ``rebuilding`` is recorded as interrupted: the same
    request again resumes its build or finishes its swap (the journal beside the index)."""
    from slimvec.persistence import read_json

    for path in sorted(st.jobs.dir.glob("*.json")) if st.jobs.dir.is_dir() else []:
        try:
            rec = read_json(path)
        except SlimvecError:
            continue
        if isinstance(rec, dict) and rec.get("kind") == "rebuild" and rec.get("state") == "rebuilding":
            rec.update(state="interrupted", error=(
                "the server stopped during this rebuild; the index holds the old or the new "
                f"recipe, complete. POST /indexes/{rec.get('index')}/rebuild with the same recipe "
                "again: it resumes the build or finishes the swap."))
            _save(st, rec)


def _save(st: Any, rec: dict[str, Any]) -> None:
    write_json_atomic(st.jobs.dir / f"{rec['id']}.json", rec)


def _close_locked_reader(served: Any) -> None:
    """Before the swap: close the read-only index if its store holds the folder's reader lock
    (Qdrant Edge, qdrant-client local mode write to their folder by path when they close);
    searches answer 409 until the new index opens. FAISS / hnswlib readers stay open."""
    from slimvec.connectors import store_class

    with served.lock:
        index = served.index
        if index is None or not store_class(index.manifest.store).needs_reader_lock(
                index.manifest.store):
            return
        served.index, served.state, served.busy_reason = None, IndexState.BUSY, "the rebuild's swap"
    index.close()


def _reopen(st: Any, served: Any, rec: dict[str, Any], swapped: bool) -> None:
    """Serve the index in the folder (the new one after the swap) with its writer again. After
    the swap the new index opens before the read-only old one closes (no gap for searches);
    otherwise the read-only index closes first (its reader lock would refuse the writer)."""
    def close_read_only() -> None:
        with served.lock:
            index, served.index, served.state = served.index, None, IndexState.CLOSED
            served.rebuilding = False
        if index is not None:
            index.close()

    if not swapped:
        close_read_only()
    try:
        st.registry.open(rec["index"])  # replaces ``served`` in the registry
    except SlimvecError as exc:
        log.error("reopening %s after its rebuild failed: %s", rec["index"], exc)
        st.registry.errors[rec["index"]] = str(exc)
    finally:
        close_read_only()


def _run(st: Any, served: Any, rec: dict[str, Any], sample: int) -> None:
    from slimvec.ops.rebuild import rebuild

    t0, last = time.perf_counter(), [0.0]
    reopened = [False]

    def phase(name: str, rows: int) -> None:
        rec.update(phase=name, rows=int(rows))
        if name == "swapping":  # a Qdrant shard must not stay open across the swap
            _close_locked_reader(served)
        if name == "swapped":  # the folder holds the new index: serve it
            _reopen(st, served, rec, swapped=True)
            reopened[0] = True
        if time.perf_counter() - last[0] > 1.0 or name in ("swapping", "swapped"):
            last[0] = time.perf_counter()
            _save(st, rec)

    try:
        served.serve_read_only()
        summary = rebuild(served.folder, rec["recipe"], sample=sample, on_phase=phase,
                          checkpoint_seconds=st.jobs.checkpoint_seconds,
                          store=served.index.store)
        rec.update(state="done", summary=summary.to_json(), rows=summary.documents,
                   count=summary.documents)
    except SlimvecError as exc:
        rec.update(state="failed", error=str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded, never a traceback in a response
        log.exception("rebuild job %s failed", rec["id"])
        rec.update(state="failed", error=f"{type(exc).__name__}: {exc}")
    finally:
        if not reopened[0]:
            _reopen(st, served, rec, swapped=False)
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        _save(st, rec)
