"""Issue 23 A1, A2, 11: a row no store can hold is a reject in every way in, never a broken index.

Every producer (ingest, migrate, the service, the Ray engine) hands its rows to
``IndexBuilder.write``; these tests drive the CLI ingest, migrate and the builder as the Ray engine
calls it (reduced batches) with payloads nested 130 deep (over Qdrant's serde recursion limit of
128: the shard could never be opened again), lone surrogates in keys and integers beyond int64
(which Qdrant Edge turned into floats). The HTTP side is in tests/service/test_unstorable.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.connectors import make_store
from slimvec.ids import doc_id
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch
from slimvec.migrate import MigrateOptions, migrate

BIG = 10 ** 29
DEEP_REASON = "payload nests deeper than"


def deep(levels: int) -> dict:
    """A payload object with ``levels`` objects nested inside each other (itself included)."""
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"n": value}
    return value


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _rejects(index: Path) -> list[dict]:
    return [json.loads(x) for x in (index / "rejects.jsonl").read_text("utf-8").splitlines()]


@pytest.mark.parametrize("store", ["qdrant-edge", "hnsw"])
def test_cli_ingest_rejects_a_130_deep_row_and_the_index_reopens(tmp_path, sentences, store):
    rows = [{"id": f"d{i}", "text": s, "tag": i} for i, s in enumerate(sentences[:24])]
    rows[5]["payload"] = deep(130)
    rows[9]["ok_nested"] = deep(8)
    docs = tmp_path / "docs.jsonl"
    far = 50_000  # over Python's recursion limit: the JSON reader itself used to crash
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows)
                    + '{"id": "far", "text": "x", "p": ' + "[" * far + "]" * far + "}\n", "utf-8")
    index = tmp_path / "idx"
    out = _cli("ingest", str(docs), "--index", str(index), "--reducer", "rp:16", "--store", store,
               "--batch-size", "8", "--json")
    summary = json.loads(out.stdout)
    assert summary["ingested"] == 23 and summary["rejected"] == 2 and summary["count"] == 23
    rej, far_rej = [r for r in _rejects(index) if not r["kept"]]
    assert far_rej["line"] == 25 and far_rej["reason"] == "JSON nests too deeply to parse"
    assert rej["row"] == 5 and rej["line"] == 6 and rej["reason"].startswith(DEEP_REASON)
    assert rej["field"] == "payload.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n"
    with slimvec.open(index) as idx:  # reopens (a Qdrant Edge shard with the row did not)
        assert idx.store.count() == 23
        (p,) = idx.payloads([doc_id("d9")])
        assert p["ok_nested"] == deep(8)
        assert idx.payloads([doc_id("d5")]) == [None]
        hit = idx.search(sentences[9], 1)
        assert hit.ids[0, 0] == doc_id("d9")


def _builder_spec(store: str) -> IndexSpec:
    return IndexSpec(reducer="rp:8", store=store, source="test")


@pytest.mark.parametrize("store", ["qdrant-edge", "hnsw", "faiss:Flat"])
def test_reduced_batches_as_the_ray_engine_sends_them_are_checked(tmp_path, minilm_vectors, store):
    """The Ray engine hands IndexBuilder.write reduced blocks: the same check applies, and
    integers beyond int64 come back as the same decimal string from every store."""
    X = minilm_vectors[:40]
    index = tmp_path / "idx"
    with IndexBuilder(index) as b:
        b.open(_builder_spec(store), X.shape[1], lambda: X)
        b.begin()
        reduced = b.reducer.transform(X).astype(np.float32)
        ids = np.arange(40, dtype=np.int64)
        payloads = [{"i": i} for i in range(40)]
        payloads[3] = deep(130)
        payloads[4] = {"k\udc00": 1}
        payloads[5] = {"big": BIG, "neg": -(2 ** 63) - 1, "list": [BIG], "nan": float("nan")}
        payloads[6] = {"v": "x\ud800y"}
        b.write(VectorBatch(ids, reduced, payloads, [], 40, list(range(40)), None, "ray-block",
                            reduced=True))
        b.finish()
    rej = {r["row"]: r for r in _rejects(index) if not r["kept"]}
    assert sorted(rej) == [3, 4, 6]
    assert rej[3]["reason"].startswith(DEEP_REASON)
    assert "lone surrogate" in rej[4]["reason"] and rej[4]["field"] == "k\\udc00"
    assert "lone surrogate" in rej[6]["reason"] and rej[6]["field"] == "v"
    kept = [r["reason"] for r in _rejects(index) if r["kept"]]
    assert len(kept) == 4 and all(r.startswith("payload field") for r in kept), kept
    with slimvec.open(index) as idx:
        assert idx.store.count() == 37
        (p,) = idx.payloads([5])
        assert p == {"big": str(BIG), "neg": str(-(2 ** 63) - 1), "list": [str(BIG)], "nan": None}
        assert idx.payloads([3, 4, 6]) == [None, None, None]


def test_migrate_rejects_unstorable_payloads_of_the_source(tmp_path, minilm_vectors):
    """A slimvec hnsw store (payloads in SQLite, which holds any depth) migrated into Qdrant Edge."""
    X = minilm_vectors[:60]
    src = make_store("hnsw", tmp_path / "src")
    src.create(X.shape[1])
    payloads = [{"i": i} for i in range(60)]
    payloads[10] = deep(130)
    payloads[11] = {"big": BIG}
    src.upsert(np.arange(60), X, payloads)
    src.finalize()
    src.close()
    summary = migrate(f"hnsw:{tmp_path / 'src'}", tmp_path / "idx",
                      MigrateOptions(reducer="rp:16", store="qdrant-edge", progress=False,
                                     batch_size=16))
    assert summary.rejected == 1 and summary.count == 59
    (rej,) = [r for r in _rejects(tmp_path / "idx") if not r["kept"]]
    assert rej["row"] == 10 and rej["reason"].startswith(DEEP_REASON)
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.store.count() == 59
        big = [p for p in idx.payloads(idx.search(X[11:12], 1).ids[0]) if p]
        assert big and big[0]["big"] == str(BIG)
