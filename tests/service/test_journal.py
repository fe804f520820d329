"""The Qdrant collections' write journal (``slimvec/service/qdrant_api/journal.py``): records are
durable before a store is touched, leave only in order once their commits are done, and what a
crash or a failure left is applied again, in order, before the next write."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from slimvec.service.qdrant_api.journal import Journal, multi_store, native_write_refusal


class Stores:
    """A stand-in for a collection's stores: what was applied, in order, with a future per op."""

    def __init__(self) -> None:
        self.applied: list[int] = []
        self.futures: dict[int, Future] = {}
        self.fail_on: set[int] = set()

    def apply(self, op: dict) -> list[Future]:
        if op["n"] in self.fail_on:
            raise RuntimeError(f"store refused {op['n']}")
        self.applied.append(op["n"])
        self.futures[op["n"]] = f = Future()
        return [f]


def _left(j: Journal) -> list[int]:
    return [op["n"] for _p, op in j.records("c")]


def test_records_leave_in_order_once_committed(tmp_path):
    j, s = Journal(tmp_path), Stores()
    with j.locked("c"):
        j.write("c", {"n": 1}, s.apply)
        j.write("c", {"n": 2}, s.apply)
    assert _left(j) == [1, 2]  # recorded before their commits
    s.futures[2].set_result(None)
    assert _left(j) == [1, 2]  # 2 is committed, 1 is not: both stay
    s.futures[1].set_result(None)
    assert _left(j) == []


def test_a_crash_leaves_records_applied_again_in_order(tmp_path):
    s = Stores()
    j = Journal(tmp_path)
    with j.locked("c"):
        for n in (1, 2, 3):
            j.write("c", {"n": n}, s.apply)
    s.futures[1].set_result(None)
    # the process dies here: a new one finds 2 and 3 and applies them before its first write
    again, s2 = Journal(tmp_path), Stores()
    assert again.replay("c", lambda op: s2.apply(op) and [_done()]) == 2
    assert s2.applied == [2, 3] and _left(again) == []


def _done() -> Future:
    f: Future = Future()
    f.set_result(None)
    return f


def test_a_failed_write_stays_and_goes_before_the_next(tmp_path):
    j, s = Journal(tmp_path), Stores()
    s.fail_on = {1}
    with j.locked("c"), pytest.raises(RuntimeError):
        j.write("c", {"n": 1}, s.apply)
    assert _left(j) == [1]
    s.fail_on = set()
    with j.locked("c"):
        with pytest.raises(RuntimeError):  # the replay waits for 1's commit, which fails
            s_fail = Stores()

            def failing(op: dict) -> list[Future]:
                f: Future = Future()
                f.set_exception(RuntimeError("disk full"))
                s_fail.applied.append(op["n"])
                return [f]

            j.write("c", {"n": 2}, failing)
        assert s_fail.applied == [1] and _left(j) == [1]  # 2 was never recorded nor applied
        j.write("c", {"n": 2}, lambda op: s.apply(op) and [_done()])
    assert s.applied == [1, 2] and _left(j) == []


def test_a_failed_commit_keeps_every_later_record(tmp_path):
    j, s = Journal(tmp_path), Stores()
    with j.locked("c"):
        j.write("c", {"n": 1}, s.apply)
        j.write("c", {"n": 2}, s.apply)
    s.futures[2].set_result(None)
    s.futures[1].set_exception(RuntimeError("disk full"))
    assert _left(j) == [1, 2]  # 2 must not outlive 1 on disk: replaying 1 alone would undo it
    j.drain("c")  # nothing under way any more
    s2 = Stores()
    assert j.replay("c", lambda op: s2.apply(op) and [_done()]) == 2 and s2.applied == [1, 2]


def test_unrecorded_writes_are_drained_and_leave_no_file(tmp_path):
    j, s = Journal(tmp_path), Stores()
    with j.locked("c"):
        j.write("c", {"n": 1}, s.apply, record=False)
    assert _left(j) == [] and not j.path("c").exists()
    s.futures[1].set_result(None)
    j.drain("c")


def test_which_collections_span_several_stores(tmp_path):
    one = {"size": 4, "distance": "Cosine"}
    assert not multi_store(one)
    assert multi_store({**one, "sparse_vectors": {"s": {}}})
    assert multi_store({"vectors": [{"name": "a"}, {"name": "b"}]})
    (tmp_path / "plain.json").write_text('{"size": 4, "distance": "Dot"}')
    (tmp_path / "many.json").write_text('{"size": 4, "distance": "Dot", "sparse_vectors": {"s": {}}}')
    assert native_write_refusal(tmp_path, "plain") is None
    assert native_write_refusal(tmp_path, "native-only") is None
    assert "Qdrant API" in native_write_refusal(tmp_path, "many")
    assert "Qdrant API" in native_write_refusal(tmp_path, "plain~img")
