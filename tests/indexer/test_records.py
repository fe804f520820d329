"""The sync record (``records.sqlite``, issue 25 item 4): what is recorded is durable only at a
commit (the builder commits it after the store's flush), a record made for another encoder is
dropped, and the ids a sync has not seen are the ones it may delete. No model needed."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np
import pytest

from slimvec.cli import main
from slimvec.index.records import RECORDS, RecordTable, content_hash, encoder_identity


@dataclass
class _Manifest:
    encoder: str = "minilm"
    encoder_name: str = "all-MiniLM-L6-v2"
    dim_in: int = 384
    id_rule: int = 2
    text_column: str = "text"
    id_column: str | None = None


def test_content_hash_covers_text_columns_and_source_id_not_key_order():
    a = {"text": "A plane is taking off.", "source_id": "d1", "lang": "en"}
    assert content_hash(a) == content_hash(dict(reversed(list(a.items()))))
    assert content_hash(a) != content_hash({**a, "lang": "fr"})
    assert content_hash(a) != content_hash({**a, "text": "A plane is taking off"})
    assert content_hash(a) != content_hash({**a, "source_id": "d2"})
    assert content_hash({**a, "x": float("nan")}) == content_hash({**a, "x": float("nan")})


def test_a_record_is_durable_only_at_commit(tmp_path):
    ident = encoder_identity(_Manifest())
    rec = RecordTable(tmp_path / RECORDS, ident)
    rec.put([1, 2], [b"a" * 16, b"b" * 16])
    rec.commit()
    rec.put([3], [b"c" * 16])  # written, not committed: a crash before the store's flush
    rec.forget([1])
    rec.close()
    again = RecordTable(tmp_path / RECORDS, ident)
    assert again.lookup([1, 2, 3]) == {1: b"a" * 16, 2: b"b" * 16}
    again.close()


def test_a_record_of_another_encoder_is_dropped(tmp_path):
    rec = RecordTable(tmp_path / RECORDS, encoder_identity(_Manifest()))
    rec.put([1], [b"a" * 16])
    rec.commit()
    rec.close()
    other = RecordTable(tmp_path / RECORDS, encoder_identity(_Manifest(encoder="/models/e5")))
    assert other.reset and len(other) == 0
    other.close()


def test_unseen_ids_are_the_recorded_ones_this_run_did_not_read(tmp_path):
    rec = RecordTable(tmp_path / RECORDS, encoder_identity(_Manifest()))
    rec.put([5, 6, 7, 2**62 + 9], [b"x" * 16] * 4)
    rec.commit()
    rec.see([6, 2**62 + 9, 11])
    assert rec.unseen().tolist() == [5, 7]
    assert rec.is_seen(np.array([5, 6, 11], dtype=np.int64)).tolist() == [False, True, True]
    rec.close()
    # the seen set is the running sync's alone: a new connection starts with none seen
    with sqlite3.connect(str(tmp_path / RECORDS)) as db:
        assert db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 4


@pytest.mark.parametrize("argv, says", [
    (["--force"], "--force only applies to --sync"),
    (["--sync", "--engine", "ray"], "--sync runs in one process"),
])
def test_sync_options_are_checked_before_any_work(tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit) as exc:
        main(["ingest", str(tmp_path / "missing.jsonl"), "--index", str(tmp_path / "idx"), *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()


def test_rebuild_deletes_the_record_with_the_index(tmp_path):
    """records.sqlite is slimvec's own file: --rebuild must not refuse the folder for it (a file
    the manifest does not account for is refused, never deleted) and must not keep it."""
    from slimvec.indexer.builder import IndexBuilder, IndexSpec
    from slimvec.indexer.writer import VectorBatch

    vecs = np.random.default_rng(0).normal(size=(40, 16)).astype(np.float32)
    spec = IndexSpec(reducer="pca:4", store="hnsw", encoder=None)
    with IndexBuilder(tmp_path / "idx") as b:
        b.open(spec, 16, fit=lambda: vecs)
        b.run(iter([VectorBatch(np.arange(40), vecs, [{}] * 40, [], 40)]))
    rec = RecordTable(tmp_path / "idx" / RECORDS, "identity")
    rec.put([1], [b"a" * 16])
    rec.commit()
    rec.close()
    with IndexBuilder(tmp_path / "idx", rebuild=True) as b:
        b.open(spec, 16, fit=lambda: vecs)
        b.run(iter([VectorBatch(np.arange(10), vecs[:10], [{}] * 10, [], 10)]))
    assert not (tmp_path / "idx" / RECORDS).exists()
