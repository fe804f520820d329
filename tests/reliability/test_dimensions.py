"""Dimension mismatches: bad input vectors, a store that is not the reducer's, a reducer that is not
the encoder's, and a resume with another reducer.

``slimvec ingest`` takes texts only; precomputed vectors come in through ``slimvec migrate``
(``.npy`` / Parquet), which is where NaN, inf and wrong-dimension rows are checked end to end.
(A wrong-dimension *query* is covered by test_traps.py.)
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.migrate import MigrateOptions, migrate

DIM = 384


def _mopts(**kw) -> MigrateOptions:
    base = dict(reducer="rp:8", store="faiss", progress=False, batch_size=64)
    base.update(kw)
    return MigrateOptions(**base)


def _bad_vector_parquet(path, vectors: np.ndarray) -> dict[int, str]:
    """Parquet with good rows and, at known rows, NaN / inf / short / long / missing vectors."""
    rows = [v.tolist() for v in vectors]
    expected = {
        7: "NaN or inf in vector",
        20: "NaN or inf in vector",
        33: f"wrong dimension: vector has {DIM - 1}, index expects {DIM}",
        41: f"wrong dimension: vector has {DIM + 5}, index expects {DIM}",
        58: "NaN or inf in vector",  # a null vector
    }
    rows[7][3] = float("nan")
    rows[20][100] = float("inf")
    rows[33] = rows[33][:-1]
    rows[41] = rows[41] + [0.1] * 5
    rows[58] = None
    ids = [f"v{i}" for i in range(len(rows))]
    table = pa.table({"id": ids, "vector": pa.array(rows, pa.list_(pa.float32())),
                      "n": list(range(len(rows)))})
    pq.write_table(table, path)
    return expected


def test_nan_inf_and_wrong_dimension_vectors_are_rejected_and_the_rest_migrated(
        tmp_path, minilm_vectors):
    X = minilm_vectors[:300]
    expected = _bad_vector_parquet(tmp_path / "v.parquet", X)
    index = tmp_path / "idx"
    summary = migrate(f"parquet:{tmp_path / 'v.parquet'}", index, _mopts())
    assert (summary.rejected, summary.count) == (len(expected), len(X) - len(expected))
    rejects = [json.loads(line) for line in (index / "rejects.jsonl").read_text().splitlines()]
    assert {r["row"]: r["reason"] for r in rejects} == expected
    assert all(r["field"] == "vector" and r["snippet"] for r in rejects)
    with open_index(index) as idx:
        good = [i for i in range(len(X)) if i not in expected]
        res = idx.search(X[good[:20]], k=1)
        top = idx.payloads([int(i) for i in res.ids[:, 0]])
        assert [p["n"] for p in top] == good[:20]


def test_strict_migration_stops_at_the_first_bad_vector(tmp_path, minilm_vectors):
    _bad_vector_parquet(tmp_path / "v.parquet", minilm_vectors[:300])
    with pytest.raises(ConfigError, match=r"row 7\b.*NaN or inf in vector.*--strict"):
        migrate(f"parquet:{tmp_path / 'v.parquet'}", tmp_path / "idx", _mopts(strict=True))


def test_a_store_of_another_dimension_than_the_reducer_output_is_refused(tmp_path, minilm_vectors):
    np.save(tmp_path / "v.npy", minilm_vectors[:300])
    for name, spec in (("a", "rp:8"), ("b", "rp:4")):
        migrate(str(tmp_path / "v.npy"), tmp_path / name,
                _mopts(reducer=spec, store="qdrant-edge"))
    shutil.rmtree(tmp_path / "a" / "store")
    shutil.copytree(tmp_path / "b" / "store", tmp_path / "a" / "store")  # 4-d points under pca:8
    with pytest.raises(DimensionMismatchError) as err:
        open_index(tmp_path / "a")
    msg = str(err.value)
    assert "8" in msg and "4" in msg and str(tmp_path / "a") in msg


def test_a_reducer_of_another_input_dimension_than_the_encoder_is_refused(tmp_path, minilm_vectors,
                                                                            sentences):
    """An index whose reducer takes 300-d vectors, labelled with the 384-d MiniLM encoder."""
    np.save(tmp_path / "v.npy", minilm_vectors[:200, :300].copy())
    index = tmp_path / "idx"
    migrate(str(tmp_path / "v.npy"), index, _mopts(store="hnsw"))
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(sentences[:20]) + "\n", encoding="utf-8")
    # as migrated (encoder: null) the index refuses texts by spec, before any encoding
    with pytest.raises(ConfigError, match=r"encoder None \(asked 'minilm'\).*--rebuild"):
        ingest(corpus, index, IngestOptions(encoder="minilm", progress=False))
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["encoder"] = "minilm"  # a reducer fitted on another model's vectors
    (index / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DimensionMismatchError) as err:
        ingest(corpus, index, IngestOptions(progress=False))
    assert "300" in str(err.value) and "384" in str(err.value)
    with open_index(index) as idx, pytest.raises(DimensionMismatchError) as err:
        idx.search(["a text query"], k=1)
    assert "300" in str(err.value) and "384" in str(err.value)


def test_resuming_with_another_reducer_is_refused_unless_rebuild(tmp_path, sentences):
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(sentences[:30]) + "\n", encoding="utf-8")
    index = tmp_path / "idx"

    def crash_after_first_batch(next_row: int) -> None:
        raise RuntimeError("simulated crash")

    opts = IngestOptions(reducer="rp:8", store="hnsw", batch_size=10, checkpoint_batches=1,
                         progress=False)
    with pytest.raises(RuntimeError, match="simulated crash"):
        ingest(corpus, index, opts, on_batch=crash_after_first_batch)
    manifest = json.loads((index / "manifest.json").read_text())
    assert manifest["progress"]["state"] == "running"
    with pytest.raises(ConfigError, match=r"reducer 'rp:8' \(asked 'rp:4'\).*--rebuild"):
        ingest(corpus, index, IngestOptions(reducer="rp:4", progress=False))
    rebuilt = ingest(corpus, index, IngestOptions(reducer="rp:4", rebuild=True, progress=False))
    assert rebuilt.created and rebuilt.count == 30
    with open_index(index) as idx:
        assert idx.info()["dim_out"] == 4
