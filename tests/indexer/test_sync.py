"""``ingest --sync`` (issue 25 item 4) on real files, real stores and the packaged MiniLM: a changed
corpus is synced by re-encoding only what changed, deleting only after the whole source was read,
and never after a read with errors unless forced."""
import json

import pytest

import slimvec
from slimvec.errors import ConfigError
from slimvec.ids import doc_id
from slimvec.index.records import RECORDS
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.ops.sync import sync

N = 60
STORES = ["qdrant-edge", "hnsw"]
ALL_STORES = ["qdrant-edge", "qdrant", "faiss", "hnsw"]


def _rows(sentences, n=N):
    return [{"id": f"d{i}", "text": s, "lang": "en"} for i, s in enumerate(sentences[:n])]


def _write(path, rows, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail, encoding="utf-8")
    return path


def _opts(store, **kw):
    return IngestOptions(recipe=f"pca:8|{store}", fit_sample=40, batch_size=16, progress=False,
                         sync=True, **kw)


def _texts(index, ids):
    with slimvec.open(index) as idx:
        return [(p or {}).get("text") for p in idx.payloads([doc_id(i) for i in ids])]


@pytest.mark.parametrize("store", ALL_STORES)
def test_sync_reencodes_only_what_changed_and_deletes_what_left(tmp_path, sentences, store):
    rows = _rows(sentences)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    first = sync(src, index, _opts(store))
    assert (first.added, first.updated, first.unchanged, first.deleted) == (N, 0, 0, 0)
    assert first.count == N and (index / RECORDS).is_file()

    rows[3] = {**rows[3], "text": "A completely different sentence about a red kite."}
    rows[7] = {**rows[7], "lang": "fr"}  # a payload column changed: re-written too
    gone = rows.pop(10)
    rows.append({"id": "new-1", "text": "A new document about rivers and boats.", "lang": "en"})
    _write(src, rows)
    second = sync(src, index, _opts(store))
    assert (second.added, second.updated, second.unchanged, second.deleted, second.rejected) == (
        1, 2, N - 3, 1, 0), second
    assert second.count == N
    assert _texts(index, ["d3", gone["id"], "new-1"]) == [rows[3]["text"], None, rows[-1]["text"]]
    with slimvec.open(index) as idx:
        assert idx.payloads([doc_id("d7")])[0]["lang"] == "fr"
        res = idx.search([rows[3]["text"], gone["text"]], k=3)
        assert idx.payloads([int(res.ids[0, 0])])[0]["source_id"] == "d3"
        assert doc_id(gone["id"]) not in set(res.ids[1].tolist())

    third = sync(src, index, _opts(store))
    assert (third.added, third.updated, third.unchanged, third.deleted) == (0, 0, N, 0)
    assert third.encode_seconds == 0.0  # nothing reached the encoder (the model was not loaded)


def test_a_source_read_with_errors_deletes_nothing_unless_forced(tmp_path, sentences):
    rows = _rows(sentences)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    sync(src, index, _opts("hnsw"))
    notes = []
    # the last line cut mid-way (a truncated file) and one document gone from the source
    _write(src, rows[:30] + rows[31:], tail='{"id": "d99", "text": "cut')
    kept = sync(src, index, _opts("hnsw"), notify=notes.append)
    assert (kept.deleted, kept.not_deleted, kept.read_errors) == (0, 1, 1), kept
    assert kept.count == N and _texts(index, ["d30"]) == [rows[30]["text"]]
    assert any("not deleting the 1 document(s)" in n and "--force" in n for n in notes), notes
    forced = sync(src, index, _opts("hnsw", force=True))
    assert (forced.deleted, forced.not_deleted) == (1, 0) and forced.count == N - 1
    assert _texts(index, ["d30"]) == [None]


def test_an_empty_source_deletes_nothing_unless_forced(tmp_path, sentences):
    rows = _rows(sentences, 20)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    sync(src, index, _opts("hnsw"))
    empty = _write(tmp_path / "docs.jsonl", [])
    out = sync(empty, index, _opts("hnsw"))
    assert (out.deleted, out.not_deleted, out.count) == (0, 20, 20)


def test_an_index_without_a_record_is_recorded_without_encoding(tmp_path, sentences):
    rows = _rows(sentences)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    plain = IngestOptions(recipe="pca:8|qdrant-edge", fit_sample=40, batch_size=16, progress=False)
    ingest(src, index, plain)
    assert not (index / RECORDS).exists()
    out = sync(src, index, _opts("qdrant-edge"))
    assert (out.unchanged, out.recorded, out.added, out.updated) == (N, N, 0, 0), out
    assert out.encode_seconds == 0.0


def test_a_record_never_hides_a_document_another_writer_changed(tmp_path, sentences):
    """The record says d5 is stored as the source has it; a plain ingest then overwrote d5 with
    other text. The sync checks the stored text, so d5 is re-encoded back to the source's."""
    rows = _rows(sentences)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    sync(src, index, _opts("hnsw"))
    other = _write(tmp_path / "other.jsonl", [{**rows[5], "text": "Someone else's text."}])
    ingest(other, index, IngestOptions(progress=False))
    assert _texts(index, ["d5"]) == ["Someone else's text."]
    out = sync(src, index, _opts("hnsw"))
    assert (out.updated, out.unchanged) == (1, N - 1), out
    assert _texts(index, ["d5"]) == [rows[5]["text"]]


def test_sync_with_other_id_column_is_refused_before_anything_is_written(tmp_path, sentences):
    rows = [{"key": f"k{i}", "text": s} for i, s in enumerate(sentences[:30])]
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    sync(src, index, _opts("hnsw", id_column="key"))
    with pytest.raises(ConfigError, match="built reading --id-column 'key'"):
        sync(src, index, _opts("hnsw", id_column="text"))
    again = sync(src, index, _opts("hnsw"))  # no --id-column: the index's own is used
    assert (again.unchanged, again.deleted) == (30, 0)


@pytest.mark.parametrize("store", STORES)
def test_a_synced_delete_leaves_no_full_vector_for_rescoring(tmp_path, sentences, store):
    """The default recipe keeps full vectors beside the store: a document deleted by a sync (with
    nothing else changed, so the side file gets no new rows) never comes back from a rescored
    search, also after reopening."""
    rows = _rows(sentences)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    opts = IngestOptions(recipe=f"pca:8|{store}|rescore=4,keep_full=float16", fit_sample=40,
                         batch_size=16, progress=False, sync=True)
    sync(src, index, opts)
    gone = rows.pop(12)
    _write(src, rows)
    out = sync(src, index, opts)
    assert (out.deleted, out.unchanged, out.count) == (1, N - 1, N - 1), out
    with slimvec.open(index) as idx:
        res = idx.search([gone["text"]], k=N, rescore=4)
        assert doc_id(gone["id"]) not in set(res.ids[0].tolist())
        assert len({int(i) for i in res.ids[0] if i >= 0}) == N - 1


def test_cli_sync_summary_line_and_json(tmp_path, sentences, capsys):
    from slimvec.cli import main

    rows = _rows(sentences, 30)
    src = _write(tmp_path / "docs.jsonl", rows)
    index = tmp_path / "idx"
    sync(src, index, _opts("hnsw"))
    _write(src, rows[:-1])
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(src), "--index", str(index), "--sync"])
    assert done.value.code == 0
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "synced: 0 added, 0 updated, 29 unchanged (not re-encoded), 1 deleted, 0 rejected" in err
    _write(src, rows[:-2])
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(src), "--index", str(index), "--sync", "--json"])
    assert done.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in ("added", "updated", "unchanged", "deleted", "rejected", "count")} \
        == {"added": 0, "updated": 0, "unchanged": 28, "deleted": 1, "rejected": 0, "count": 28}
