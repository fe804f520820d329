"""Issue 12 C10, C11, C15: one canonical id rule, given and derived ids never collide."""
from __future__ import annotations

import csv
import json

from slimvec.ids import canonical_id, doc_id, text_key
from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest


def test_canonical_ids_agree_across_formats():
    assert doc_id(5) == doc_id("5") == doc_id(5.0) == doc_id("5.0") == 5
    assert doc_id(1.0) == doc_id(1) and doc_id("-3") == doc_id(-3)
    assert doc_id("05") != 5 and canonical_id("05") == "05" and canonical_id(" 5") == " 5"
    assert canonical_id(1.5) == "1.5"
    assert doc_id(2**64) == doc_id(str(2**64)) >= 2**62


def test_given_integer_ids_and_hashed_ids_live_apart():
    key = text_key("some text")
    hashed = doc_id(key)
    assert hashed >= 2**62 and doc_id("abc") >= 2**62
    assert doc_id(hashed - 2**62) == hashed - 2**62  # a given int can never equal a hashed id
    assert doc_id(str(key)) != hashed  # nor can a given string that looks like a text key
    assert doc_id(hashed, rule=1) == hashed and doc_id("abc", rule=1) < 2**63  # old rule kept


def _opts():
    return IngestOptions(reducer="rp:16", store="faiss", batch_size=8, progress=False)


def test_the_csv_of_a_jsonl_corpus_adds_nothing(tmp_path, sentences):
    rows = [{"id": i if i % 2 else float(i), "text": s} for i, s in enumerate(sentences[:12])]
    jl = tmp_path / "c.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    cs = tmp_path / "c.csv"
    with open(cs, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        w.writerows([int(r["id"]), r["text"]] for r in rows)
    ingest(jl, tmp_path / "idx", _opts())
    summary = ingest(cs, tmp_path / "idx", _opts())
    assert summary.count == 12 and summary.duplicates == 0


def test_an_integer_id_equal_to_a_derived_id_does_not_overwrite_it(tmp_path, sentences):
    a = tmp_path / "a.txt"
    a.write_text(sentences[0] + "\n", encoding="utf-8")
    ingest(a, tmp_path / "idx", _opts())
    with open_index(tmp_path / "idx") as idx:
        (derived,) = idx.search([sentences[0]], 1).ids[:, 0].tolist()
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps({"id": int(derived), "text": sentences[1]}) + "\n", encoding="utf-8")
    summary = ingest(b, tmp_path / "idx", _opts())
    assert summary.count == 2


def test_same_text_rows_without_ids_warn_that_they_merge(tmp_path, sentences):
    p = tmp_path / "a.jsonl"
    p.write_text("\n".join(json.dumps({"text": sentences[0], "n": n}) for n in range(3)) + "\n",
                 encoding="utf-8")
    summary = ingest(p, tmp_path / "idx", _opts())
    rej = [json.loads(x) for x in (tmp_path / "idx" / "rejects.jsonl").read_text().splitlines()]
    assert summary.count == 1 and summary.duplicates == 2
    assert [r["row"] for r in rej] == [1, 2] and all(r["kept"] for r in rej)
    assert "same text as row 0" in rej[0]["reason"]
