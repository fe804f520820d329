"""slimvec delete / update / get / scroll / compact and search --filter (issue 25 items 1-3, CLI):
in-process (typer's runner) on a small real hnswlib index of MiniLM vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from slimvec.cli import app
from slimvec.errors import ConfigError
from slimvec.migrate import MigrateOptions, migrate

N = 300


@pytest.fixture
def index(minilm_vectors, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    vecs = np.ascontiguousarray(minilm_vectors[:N])
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(N)], "vector": [v.tolist() for v in vecs],
                            "lang": ["en" if i % 2 else "fr" for i in range(N)]}), tmp_path / "s.parquet")
    migrate(str(tmp_path / "s.parquet"), tmp_path / "idx",
            MigrateOptions(progress=False, recipe="pca:24|hnsw|rescore=4"))
    np.save(tmp_path / "q.npy", vecs[:3])
    return tmp_path


def _run(*args: str) -> dict:
    res = CliRunner().invoke(app, list(args))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    assert res.exit_code == 0, res.output
    return res.output


def test_delete_update_get_scroll_compact_and_filtered_search(index):
    idx = str(index / "idx")
    (index / "ids.txt").write_text("d0\nd1\n\nnope\n")
    assert json.loads(_run("delete", "--index", idx, "--ids", str(index / "ids.txt"))) == {"deleted": 2, "count": N - 2}
    out = json.loads(_run("delete", "--index", idx, "--filter",
                          '{"must": [{"has_id": ["d2", "d3", "d4"]}, {"key": "lang", "match": {"value": "fr"}}]}'))
    assert out == {"deleted": 2, "count": N - 4}  # d2, d4 are fr
    (index / "f.json").write_text('{"must": [{"key": "lang", "match": {"value": "en"}}]}')
    assert json.loads(_run("update", "--index", idx, "--filter", "@" + str(index / "f.json"),
                           "--set", '{"reviewed": true}')) == {"updated": N // 2 - 1}  # d1 was en
    (index / "one.json").write_text('["d5", "d0"]')
    lines = _run("get", "--index", idx, "--ids", str(index / "one.json")).strip().splitlines()
    rec, gone = json.loads(lines[0]), json.loads(lines[1])
    from slimvec.ids import doc_id

    # a migrated index keeps no source_id in its payloads: the record's id is then the store id
    assert rec["store_id"] == doc_id("d5", rule=2) and rec["payload"]["reviewed"] is True
    assert gone == {"id": "d0", "found": False}  # a deleted id is named, not a bare null (issue 40 item 9)
    page = json.loads(_run("scroll", "--index", idx, "--limit", "7", "--filter",
                           '{"must": [{"key": "reviewed", "match": {"value": true}}]}'))
    assert len(page["records"]) == 7 and page["next_offset"] is not None
    res = json.loads(_run("search", "--index", idx, "--vectors", str(index / "q.npy"), "--json", "-k", "5",
                          "--filter", '{"must": [{"key": "lang", "match": {"value": "fr"}}]}'))
    assert all(h["payload"]["lang"] == "fr" for q in res for h in q["hits"]) and len(res[0]["hits"]) == 5
    assert doc_id("d0", rule=2) not in {h["store_id"] for q in res for h in q["hits"]}
    assert json.loads(_run("compact", "--index", idx))["compacted"] is True


def test_bad_input_is_a_clear_error(index):
    idx = str(index / "idx")
    with pytest.raises(ConfigError, match="exactly one of --ids FILE or --filter"):
        _run("delete", "--index", idx)
    with pytest.raises(ConfigError, match=r"--filter.must\[0\].match.text: full-text"):
        _run("delete", "--index", idx, "--filter", '{"must": [{"key": "a", "match": {"text": "x"}}]}')
    with pytest.raises(ConfigError, match="--set: Payload fields are not valid JSON"):
        _run("update", "--index", idx, "--filter", '{"must": []}', "--set", "{lang: en}")
    (index / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        _run("get", "--index", idx, "--ids", str(index / "bad.json"))


def test_ingest_payload_index_is_declared_at_creation(tmp_path):
    from slimvec.index.manifest import Manifest

    docs = tmp_path / "d.jsonl"
    docs.write_text("".join(json.dumps({"id": i, "text": f"document number {i} about topic {i % 3}",
                                        "lang": "en" if i % 2 else "fr"}) + "\n" for i in range(12)))
    _run("ingest", str(docs), "--index", str(tmp_path / "idx"), "--recipe", "pca:4|qdrant-edge",
         "--payload-index", "lang:keyword", "--json")
    assert Manifest.read(tmp_path / "idx").extra["payload_index"] == {"lang": "keyword"}
    import slimvec

    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.store.payload_indexes() == {"lang"}
        assert idx.get([3])[0]["id"] == 3  # a text ingest keeps the user's id
        assert idx.count({"must": [{"key": "lang", "match": {"value": "fr"}}]}) == 6
    with pytest.raises(ConfigError, match="expected FIELD:KIND"):
        _run("ingest", str(docs), "--index", str(tmp_path / "idx2"), "--payload-index", "lang")
