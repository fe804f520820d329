"""A writer thread that dies (not a failed batch: the thread itself) is reopened by the index's
supervisor with backoff; meanwhile the index is ``degraded`` and answers 503, and nothing
acknowledged is lost (issue 25 item 7). In process, on a real store: the thread is killed the way
an interpreter-exit exception kills it, through a queued change that raises ``SystemExit``."""

from __future__ import annotations

import time

import numpy as np
import pytest

from slimvec.service.indexes.registry import Encoders, IndexSpecIn, Registry
from slimvec.service.indexes.writer import WriterDegraded


def _die(builder: object) -> None:
    raise SystemExit("writer thread stopped by the test")


def _until(cond, seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.05)):  # bounded
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_dead_writer_thread_is_reopened_and_keeps_acknowledged_rows(tmp_path):
    X = np.random.default_rng(5).standard_normal((64, 16)).astype(np.float32)
    rows = [{"id": i, "vector": X[i].tolist()} for i in range(30)]
    reg = Registry(tmp_path, Encoders(1.0, 8))
    try:
        served, _ = reg.create("d", IndexSpecIn(reducer="rp:4", encoder=None), sample=X)
        served.add_vectors(rows[:10], "t")[1].result(30)  # acknowledged
        dead = served.writer
        with pytest.raises(SystemExit):
            dead.mutate(_die).result(30)
        _until(lambda: dead.dead is not None)
        assert served.health() == "degraded"
        info = served.info()
        assert info["state"] == "degraded" and "stopped by the test" in info["last_error"], info
        assert info["next_retry"], info
        with pytest.raises(WriterDegraded):
            served.add_vectors(rows[10:20], "t")
        _until(lambda: served.writer is not dead and served.health() == "ready")
        assert "last_error" not in served.info()
        served.add_vectors(rows[20:30], "t")[1].result(30)
        assert served.info()["count"] == 20
    finally:
        reg.close_all()
    reg = Registry(tmp_path, Encoders(1.0, 8))
    try:
        reg.open_all()
        assert reg.get("d").info()["count"] == 20
    finally:
        reg.close_all()


def test_a_search_during_a_reader_switch_waits_instead_of_409(tmp_path):
    """A rebuild's start swaps the writer for a read-only index under ``served.lock``; on a
    Qdrant store there is a moment with no open index (its writer must close first). A search in
    that moment waited for nothing and answered 409 (a CI failure of
    ``test_rebuild_job_serves_searches_until_the_swap``); it waits for the lock now."""
    import threading

    X = np.random.default_rng(6).standard_normal((64, 16)).astype(np.float32)
    reg = Registry(tmp_path, Encoders(1.0, 8))
    try:
        served, _ = reg.create("d", IndexSpecIn(reducer="rp:4", encoder=None), sample=X)
        got: list[object] = []
        with served.lock:  # what serve_read_only holds while the writer closes
            index, served.index = served.index, None
            t = threading.Thread(target=lambda: got.append(_ready_or_error(served)))
            t.start()
            t.join(0.3)
            assert t.is_alive() and not got  # waiting, not refused
            served.index = index
        t.join(30)
        assert got == [index]
    finally:
        reg.close_all()


def _ready_or_error(served) -> object:
    try:
        return served.ready_index()
    except Exception as exc:  # noqa: BLE001 - the test reports what it got
        return exc
