
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slimvec.errors import ConfigError
from slimvec.ids import doc_id
from slimvec.sources.readers import Document, Reject, SourceSpec, iter_batches, iter_records


def _records(path, **kw):
    return list(iter_records(SourceSpec(str(path), **kw)))


def test_jsonl_documents_and_rejects(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(
        b'{"id": "a", "text": "hello", "lang": "en"}\n'
        b'{"text": "no id here"}\n'
        b"not json\n"
        b'{"id": "b", "text": "   "}\n'
        b'{"id": "c", "text": "bad \xff byte"}\n'
        b'{"id": "d", "text": "nul \\u0000 inside"}\n'
    )
    recs = _records(p)
    assert [type(r).__name__ for r in recs] == ["Document", "Document", "Reject", "Reject", "Reject", "Reject"]
    assert recs[0].payload == {"id": "a", "lang": "en"} and recs[0].line == 1
    # no id -> a stable id from the text, identical across runs
    assert recs[1].id == _records(p)[1].id and isinstance(recs[1].id, str)
    reasons = [r.reason for r in recs if isinstance(r, Reject)]
    assert reasons[0].startswith("malformed JSON") and recs[2].line == 3
    assert reasons[1:] == ["empty or whitespace-only text", "invalid UTF-8", "NUL byte in text"]


def test_csv_tsv_text_and_ragged_rows(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text('id,text,lang\n1,"multi\nline",en\n2,ragged\n3,fine,de\n', encoding="utf-8")
    recs = _records(p)
    assert isinstance(recs[0], Document) and recs[0].text == "multi\nline"
    assert isinstance(recs[1], Reject) and "ragged" in recs[1].reason and recs[1].line == 4
    assert recs[2].payload["lang"] == "de" and recs[2].row == 2
    t = tmp_path / "a.tsv"
    t.write_text("body\tid\nx y\t9\n", encoding="utf-8")
    (doc,) = _records(t, text_column="body")
    assert doc.id == "9" and doc.text == "x y"
    txt = tmp_path / "a.txt"
    txt.write_text("first doc\n\nsecond doc\n", encoding="utf-8")
    assert [d.text for d in _records(txt)] == ["first doc", "second doc"]


def test_missing_columns_are_fatal_and_named(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("id,body\n1,x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'text' not found.*'id', 'body'"):
        _records(p)
    with pytest.raises(ConfigError, match="'doc_id' not found"):
        _records(p, text_column="body", id_column="doc_id")
    pq.write_table(pa.table({"body": ["a"]}), tmp_path / "x.parquet")
    with pytest.raises(ConfigError, match=r"x.parquet.*'text' not found.*'body'"):
        _records(tmp_path / "x.parquet")
    with pytest.raises(ConfigError, match="does not exist"):
        _records(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="suffix"):
        (tmp_path / "a.xyz").write_text("x")
        _records(tmp_path / "a.xyz")


def test_parquet_streams_in_batches_and_resumes(tmp_path):
    n = 10_000
    pq.write_table(pa.table({"id": list(range(n)), "text": [f"doc {i}" for i in range(n)]}),
                   tmp_path / "big.parquet", row_group_size=1000)
    spec = SourceSpec(str(tmp_path / "big.parquet"))
    batches = list(iter_batches(spec, batch_size=3000))
    assert [len(d) for d, _, _ in batches] == [3000, 3000, 3000, 1000]
    assert batches[-1][2] == n
    resumed = list(iter_batches(spec, batch_size=3000, start_row=9500))
    assert resumed[0][0][0].id == 9500 and sum(len(d) for d, _, _ in resumed) == 500


def test_doc_ids_are_stable_and_positive():
    assert doc_id("abc") == doc_id("abc") != doc_id("abd")
    assert doc_id(42) == 42
    assert 0 < doc_id("x" * 1000) < 2**63
