"""Progress record, locks, duplicate / length / vector checks and the stop flag, on real parts."""

import os
import signal

import numpy as np
import pytest

from slimvec.errors import ConfigError, IndexBusyError
from slimvec.ids import doc_ids
from slimvec.index.locking import IndexLock, is_being_written
from slimvec.indexer.interrupt import StopFlag
from slimvec.indexer.progress import fingerprint, plan_run, truncate_file
from slimvec.sources.checks import DuplicateTracker, dedupe_last, split_bad_vectors, truncation_rejects
from slimvec.sources.readers import Document

COLS = {"text_column": "text", "id_column": None, "format": None}


def test_fingerprint_sees_edits_and_plan_refuses_a_changed_file(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_bytes(b'{"text": "a"}\n' * 1000)
    fp = fingerprint(f)
    progress = {"input": str(f), "fingerprint": fp, "columns": COLS, "next_row": 400,
                "rejects_bytes": 17, "state": "running"}
    plan = plan_run(tmp_path, progress, f, fingerprint(f), COLS)
    assert plan.resuming and plan.start_row == 400 and plan.rejects_bytes == 17
    f.write_bytes(b'{"text": "b"}\n' * 1000)  # same size, other content
    with pytest.raises(ConfigError, match=r"changed since the interrupted ingest.*content differs.*--rebuild"):
        plan_run(tmp_path, progress, f, fingerprint(f), COLS)
    with pytest.raises(ConfigError, match=r"unfinished ingest of .*in.jsonl.*row 400"):
        plan_run(tmp_path, progress, tmp_path / "other.jsonl", fp, COLS)
    with pytest.raises(ConfigError, match=r"text_column 'text' \(asked 'body'\)"):
        plan_run(tmp_path, progress, f, fp, dict(COLS, text_column="body"))
    done = dict(progress, state="done")
    assert plan_run(tmp_path, done, f, fp, COLS).already_done
    assert plan_run(tmp_path, done, f, fingerprint(f), COLS).start_row == 0  # updated file: re-ingest


def test_truncate_file_cuts_back_to_the_committed_length(tmp_path):
    f = tmp_path / "rejects.jsonl"
    f.write_text("one\ntwo\nthree\n")
    truncate_file(f, 8)
    assert f.read_text() == "one\ntwo\n"
    truncate_file(f, 100)
    assert f.read_text() == "one\ntwo\n"


def test_one_writer_at_a_time_and_readers_see_the_writer(tmp_path):
    with IndexLock(tmp_path / "idx", exclusive=True):
        assert is_being_written(tmp_path / "idx")
        with pytest.raises(IndexBusyError, match="being written or read"):
            IndexLock(tmp_path / "idx", exclusive=True).acquire()
        with pytest.raises(IndexBusyError, match="index is being written"):
            IndexLock(tmp_path / "idx", exclusive=False).acquire()
    assert not is_being_written(tmp_path / "idx")
    with IndexLock(tmp_path / "idx", exclusive=False), IndexLock(tmp_path / "idx", exclusive=False):
        with pytest.raises(IndexBusyError):
            IndexLock(tmp_path / "idx", exclusive=True).acquire()


def _docs(pairs):
    return [Document(i, t, {}, row, row + 1) for row, (i, t) in enumerate(pairs)]


def test_duplicate_ids_with_other_text_are_reported_and_survive_a_resume(tmp_path):
    db = tmp_path / "state.sqlite"
    docs = _docs([("a", "x"), ("b", "y"), ("a", "x"), ("b", "other")])
    tracker = DuplicateTracker(db, fresh=True)
    warn = tracker.check(doc_ids([d.id for d in docs[:2]]), docs[:2], "in", "id")
    assert warn == []
    tracker.commit()
    tracker.close()
    # a resumed run (fresh=False) still knows rows 0-1; an uncommitted batch is forgotten
    tracker = DuplicateTracker(db, fresh=False)
    warn = tracker.check(doc_ids([d.id for d in docs[2:]]), docs[2:], "in", "id")
    assert [(w.row, w.kept) for w in warn] == [(3, True)]
    assert "duplicate id 'b' with different text than row 1" in warn[0].reason
    tracker.close(delete=True)
    assert not db.exists()
    tracker = DuplicateTracker(db, fresh=True)
    assert tracker.check(doc_ids(["b"]), _docs([("b", "z")]), "in", "id") == []
    tracker.close()


def test_bad_vectors_become_rejects_and_good_rows_stay():
    vecs = np.ones((4, 3), dtype=np.float32)
    vecs[1, 2] = np.nan
    vecs[3, 0] = np.inf
    good, clean, rejects = split_bad_vectors(vecs, 3, [10, 11, 12, 13], "v.npy")
    assert good.tolist() == [True, False, True, False] and clean.shape == (2, 3)
    assert [(r.row, r.reason) for r in rejects] == [(11, "NaN or inf in vector"), (13, "NaN or inf in vector")]
    ragged = [np.ones(3), np.ones(5), [1.0, float("nan"), 0.0], np.ones(3)]
    good, clean, rejects = split_bad_vectors(ragged, 3, None, "v")
    assert good.tolist() == [True, False, False, True] and clean.shape == (2, 3)
    assert rejects[0].reason == "wrong dimension: vector has 5, index expects 3"
    good, clean, rejects = split_bad_vectors(np.ones((2, 4)), 3, None, "v")
    assert not good.any() and all("has 4, index expects 3" in r.reason for r in rejects)


def test_rows_of_anything_but_real_numbers_are_rejects_not_converted():
    """Issue 23 item 9: strings, bools, complex and nested rows were cast to float32 by numpy
    ("0.5" -> 0.5, True -> 1.0, 1+2j -> 1.0 with the imaginary part dropped)."""
    rows = [[0.1, 0.2, 0.3], ["0.1", "0.2", "0.3"], [True, False, True], [1 + 2j, 0j, 1j],
            [[0.1], [0.2], [0.3]], np.array([1, 2, 3], dtype=np.int8), [None, None, None]]
    good, clean, rejects = split_bad_vectors(rows, 3, list(range(10, 17)), "v")
    assert good.tolist() == [True, False, False, False, False, True, False]
    assert clean.tolist() == [[np.float32(0.1), np.float32(0.2), np.float32(0.3)], [1.0, 2.0, 3.0]]
    reasons = {r.row: r.reason for r in rejects}
    assert "holds str" in reasons[11] and "expected float or integer numbers" in reasons[11]
    assert "holds bool" in reasons[12] and "holds complex" in reasons[13]
    assert "nested" in reasons[14] and reasons[16] == "NaN or inf in vector"
    good, clean, rejects = split_bad_vectors(np.ones((2, 3), dtype=np.complex64), 3, None, "v")
    assert not good.any() and clean.shape == (0, 3) and "holds complex64" in rejects[0].reason


def test_dedupe_keeps_the_last_occurrence():
    assert dedupe_last(np.array([1, 2, 3])) is None
    assert dedupe_last(np.array([5, 7, 5, 9, 7])).tolist() == [2, 3, 4]


def test_only_texts_beyond_the_model_maximum_are_counted(encoder):
    limit = encoder.max_seq_length
    long_text = " ".join(["word"] * (limit + 20))
    borderline = "x" * (limit - 10)  # long in bytes, few tokens
    docs = _docs([("a", "short text"), ("b", long_text), ("c", borderline)])
    rejects = truncation_rejects(encoder, docs, "in", "text")
    assert [r.row for r in rejects] == [1] and rejects[0].kept
    assert f"maximum of {limit} tokens (it has {limit + 22})" in rejects[0].reason


def test_first_sigint_sets_the_flag_and_a_second_interrupts():
    # a test run started in the background (nohup, `cmd &`) inherits SIGINT ignored: start from
    # Python's own handler so the test does not depend on how pytest was launched
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with StopFlag() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.requested and stop.signum == signal.SIGINT
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)
