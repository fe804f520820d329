"""slimvec migrate: every source kind built here with the real engine, the drop-in search path,
two-stage rescoring on real MiniLM vectors, and a SIGKILLed migration that resumes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.connectors.fullvectors import FullVectors
from slimvec.errors import ConfigError, PersistenceError
from slimvec.ids import doc_id
from slimvec.migrate import MigrateOptions, migrate, open_source
from tests.connectors.stores import full_vector_placements, tuned_specs

N = 400  # vectors per source-kind test: enough for a PCA, small enough to stay fast


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _opts(**kw) -> MigrateOptions:
    base = dict(reducer="pca:16", store="faiss:Flat", keep_full="float32", progress=False,
                batch_size=128)
    base.update(kw)
    return MigrateOptions(**base)


def _check_migrated(index_dir: Path, ids: np.ndarray, vectors: np.ndarray,
                    payloads: dict[int, dict] | None = None) -> None:
    """Count, ids, the vector kept under each id, and payloads survived the migration."""
    with slimvec.open(index_dir) as idx:
        assert idx.manifest["encoder"] is None
        assert idx.store.count() == len(ids)
        source = idx.full_vectors or idx.store  # side file, or Qdrant Edge named vector "full"
        got, found = source.get_full(ids) if source is idx.store else source.get(ids)
        assert found.all()
        np.testing.assert_allclose(got, _unit(vectors), atol=1e-5)
        # each vector finds itself first through the reduced index + rescoring
        res = idx.search(vectors[:20], 1, rescore=4)
        assert (res.ids[:, 0] == ids[:20]).all()
        if payloads:
            keys = list(payloads)[:10]
            assert idx.payloads(keys) == [payloads[k] for k in keys]


# ----------------------------------------------------------------------- sources
def test_npy_source_ids_are_row_numbers(tmp_path, minilm_vectors):
    X = minilm_vectors[:N]
    np.save(tmp_path / "v.npy", X)
    summary = migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts())
    assert (summary.ingested, summary.rejected, summary.count) == (N, 0, N)
    _check_migrated(tmp_path / "idx", np.arange(N), X)


def test_parquet_source_keeps_string_ids_and_payload_columns(tmp_path, minilm_vectors):
    import pyarrow as pa
    import pyarrow.parquet as pq

    X = minilm_vectors[:N]
    names = [f"doc-{i}" for i in range(N)]
    table = pa.table({"key": names, "emb": [list(map(float, v)) for v in X],
                      "lang": ["en"] * N, "n": list(range(N))})
    pq.write_table(table, tmp_path / "v.parquet", row_group_size=150)
    migrate(f"parquet:{tmp_path / 'v.parquet'},id=key,vector=emb", tmp_path / "idx", _opts())
    ids = np.array([doc_id(s) for s in names])
    _check_migrated(tmp_path / "idx", ids, X, {int(ids[i]): {"lang": "en", "n": i} for i in range(N)})


def test_faiss_idmap_source_uses_its_id_map(tmp_path, minilm_vectors):
    import faiss

    X = minilm_vectors[:N]
    ids = np.arange(N, dtype=np.int64) * 7 + 1000
    index = faiss.IndexIDMap(faiss.IndexFlatIP(X.shape[1]))
    index.add_with_ids(X, ids)
    faiss.write_index(index, str(tmp_path / "coll.faiss"))
    migrate(str(tmp_path / "coll.faiss"), tmp_path / "idx", _opts(store="hnsw:M=16"))
    _check_migrated(tmp_path / "idx", ids, X)


def test_slimvec_faiss_store_folder_source_uses_ids_npy(tmp_path, minilm_vectors):
    from slimvec.connectors import make_store

    X = minilm_vectors[:N]
    ids = np.arange(N, dtype=np.int64) + 5
    with make_store("faiss:Flat", tmp_path / "old").create(X.shape[1], "cosine") as store:
        store.upsert(ids, X, [{"i": int(i)} for i in ids])
        store.upsert(ids[:10], X[10:20])  # replaced copies: the last vector of an id wins
    expected = X.copy()
    expected[:10] = X[10:20]
    migrate(f"faiss:{tmp_path / 'old'}", tmp_path / "idx", _opts())
    _check_migrated(tmp_path / "idx", ids[::-1], expected[::-1], {int(i): {"i": int(i)} for i in ids})


def test_hnswlib_file_source_needs_dim_and_uses_labels(tmp_path, minilm_vectors):
    import hnswlib

    X = minilm_vectors[:N]
    labels = np.arange(N, dtype=np.int64) * 3 + 11
    index = hnswlib.Index(space="cosine", dim=X.shape[1])
    index.init_index(max_elements=N, M=8, ef_construction=50)
    index.add_items(X, labels)
    index.save_index(str(tmp_path / "coll.bin"))
    with pytest.raises(ConfigError, match="dim=384"):
        open_source(f"hnsw:{tmp_path / 'coll.bin'}")
    migrate(f"hnsw:{tmp_path / 'coll.bin'},dim=384,space=cosine", tmp_path / "idx", _opts())
    _check_migrated(tmp_path / "idx", labels, X)


def test_qdrant_local_source_scrolls_points_with_payloads(tmp_path, minilm_vectors):
    from qdrant_client import QdrantClient, models

    X = minilm_vectors[:N]
    client = QdrantClient(path=str(tmp_path / "qd"))
    client.create_collection("docs", vectors_config=models.VectorParams(
        size=X.shape[1], distance=models.Distance.COSINE))
    uuids = [str(uuid.UUID(int=i + 1)) for i in range(N // 2)]
    raw_ids: list = uuids + list(range(10_000, 10_000 + N - N // 2))  # UUID and integer ids
    client.upsert("docs", [models.PointStruct(id=pid, vector=v.tolist(), payload={"title": f"t{i}"})
                           for i, (pid, v) in enumerate(zip(raw_ids, X))])
    client.close()
    migrate(f"qdrant:{tmp_path / 'qd'}/docs", tmp_path / "idx", _opts(store="qdrant-edge"))
    ids = np.array([doc_id(p) for p in raw_ids])
    payloads = {int(ids[i]): {"title": f"t{i}", **({"source_id": raw_ids[i]} if i < N // 2 else {})}
                for i in range(N)}
    _check_migrated(tmp_path / "idx", ids, X, payloads)
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["full"]["in_store"] and not (tmp_path / "idx" / "full").exists()


def test_qdrant_edge_shard_source(tmp_path, minilm_vectors):
    import qdrant_edge as q

    X = minilm_vectors[:N]
    config = q.EdgeConfig(vectors=q.EdgeVectorParams(size=X.shape[1], distance=q.Distance.Cosine))
    shard = q.EdgeShard.create(str(tmp_path / "shard"), config)
    shard.update(q.UpdateOperation.upsert_points(
        [q.Point(i + 1, v.tolist(), {"row": i}) for i, v in enumerate(X)]))
    shard.flush()
    shard.close()
    migrate(f"qdrant-edge:{tmp_path / 'shard'}", tmp_path / "idx", _opts())
    ids = np.arange(1, N + 1)
    _check_migrated(tmp_path / "idx", ids, X, {i + 1: {"row": i} for i in range(N)})


def test_bad_source_specs_say_what_to_write(tmp_path):
    with pytest.raises(ConfigError, match="Prefix it"):
        open_source(str(tmp_path))
    with pytest.raises(ConfigError, match="does not exist"):
        open_source(f"npy:{tmp_path / 'missing.npy'}")
    with pytest.raises(ConfigError, match="Unknown option"):
        open_source(f"npy:{tmp_path / 'x.npy'},dim=3")


# ------------------------------------------------------------------- drop-in search
def test_drop_in_search_equals_searching_reduced_vectors_directly(tmp_path, minilm_vectors):
    X = minilm_vectors[:2000]
    np.save(tmp_path / "v.npy", X)
    migrate(f"npy:{tmp_path / 'v.npy'}", tmp_path / "idx", _opts(reducer="pca:96", keep_full=None))
    queries = minilm_vectors[2000:2100]
    with slimvec.open(tmp_path / "idx") as idx:
        res = idx.search(queries, 10)
        one = idx.search(queries[0], 10)  # a single 1-D query vector
        Z = _unit(idx.reducer.transform(X))
        Zq = _unit(idx.reducer.transform(queries))
        expected = np.argsort(-(Zq @ Z.T), axis=1)[:, :10]
        assert (res.ids == expected).mean() >= 0.99
        assert (one.ids[0] == res.ids[0]).all()
        with pytest.raises(PersistenceError, match="no encoder"):
            idx.search(["a text query"], 10)
        with pytest.raises(ConfigError, match="--keep-full"):
            idx.search(queries, 10, rescore=4)


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


@pytest.mark.parametrize("store", tuned_specs(ef=128))
def test_rescoring_never_lowers_recall_and_reaches_099_at_r8(tmp_path, minilm_vectors, store):
    X, queries = minilm_vectors[:2700], minilm_vectors[2700:]
    np.save(tmp_path / "v.npy", X)
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx",
            _opts(reducer="pca:96", store=store, batch_size=512))
    truth = np.argsort(-(_unit(queries) @ _unit(X).T), axis=1)[:, :10]
    with slimvec.open(tmp_path / "idx") as idx:
        recalls = [_recall(idx.search(queries, 10).ids, truth)]
        recalls += [_recall(idx.search(queries, 10, rescore=r).ids, truth) for r in (1, 2, 4, 8)]
    assert all(b >= a - 1e-9 for a, b in zip(recalls[1:], recalls[2:])), recalls
    assert recalls[1] >= recalls[0] - 1e-9, recalls
    assert recalls[-1] >= 0.99, recalls


def test_qdrant_client_named_vectors_rescore_like_the_side_file(tmp_path, minilm_vectors):
    X, queries = minilm_vectors[:600], minilm_vectors[2950:]
    np.save(tmp_path / "v.npy", X)
    migrate(str(tmp_path / "v.npy"), tmp_path / "side", _opts(reducer="pca:32"))
    migrate(str(tmp_path / "v.npy"), tmp_path / "named", _opts(reducer="pca:32", store="qdrant"))
    _check_migrated(tmp_path / "named", np.arange(len(X)), X)
    with slimvec.open(tmp_path / "side") as side, slimvec.open(tmp_path / "named") as named:
        assert named.manifest["full"]["in_store"] and named.full_vectors is None
        # both reduced searches are exact (FAISS Flat, qdrant-client local mode): same candidates,
        # so the same re-ranked results
        a, b = side.search(queries, 10, rescore=4), named.search(queries, 10, rescore=4)
        assert (a.ids == b.ids).mean() >= 0.98
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)


def test_float16_full_vectors_rank_like_float32(tmp_path, minilm_vectors):
    X, queries = minilm_vectors[:1500], minilm_vectors[2900:]
    np.save(tmp_path / "v.npy", X)
    migrate(str(tmp_path / "v.npy"), tmp_path / "a", _opts(reducer="pca:48"))
    migrate(str(tmp_path / "v.npy"), tmp_path / "b", _opts(reducer="pca:48", keep_full="float16"))
    with slimvec.open(tmp_path / "a") as a, slimvec.open(tmp_path / "b") as b:
        ra, rb = a.search(queries, 10, rescore=4), b.search(queries, 10, rescore=4)
        assert (ra.ids[:, 0] == rb.ids[:, 0]).mean() >= 0.97
        np.testing.assert_allclose(ra.scores, rb.scores, atol=3e-3)
        full_b = FullVectors.open(tmp_path / "b" / "full")
        assert full_b.size_bytes() < a.full_vectors.size_bytes()


# ---------------------------------------------------------------- resume and re-run
_KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from slimvec.migrate import MigrateOptions, migrate

    def bomb(next_row):
        if next_row >= int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no final checkpoint

    migrate(sys.argv[1], sys.argv[2], MigrateOptions(reducer="pca:16", store=sys.argv[4],
            keep_full="float32", progress=False, batch_size=100, checkpoint_batches=3),
            on_batch=bomb)
""")


@pytest.mark.parametrize("store", full_vector_placements())
def test_sigkilled_migration_resumes_without_loss_or_duplicates(tmp_path, minilm_vectors, store):
    X = minilm_vectors[:1200]
    np.save(tmp_path / "v.npy", X)
    src, index = f"npy:{tmp_path / 'v.npy'}", tmp_path / "idx"
    proc = subprocess.run([sys.executable, "-c", _KILL_SCRIPT, src, str(index), "700", store],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    manifest = json.loads((index / "manifest.json").read_text())
    committed = manifest["progress"]["next_row"]
    assert manifest["progress"]["state"] == "running" and 0 < committed < 700
    summary = migrate(src, index, _opts(batch_size=100, store=store))
    assert summary.resumed_from == committed
    assert summary.count == len(X)
    _check_migrated(index, np.arange(len(X)), X)
    with slimvec.open(index) as idx:
        if idx.full_vectors is not None:
            assert len(idx.full_vectors) == len(X)
        assert idx.manifest["progress"]["state"] == "done"
    again = migrate(src, index, _opts(store=store))
    assert again.already_done and again.ingested == 0


def test_bad_vectors_are_rejected_and_kept_out_of_the_full_vectors(tmp_path, minilm_vectors):
    X = minilm_vectors[:300].copy()
    X[[5, 77]] = np.nan
    np.save(tmp_path / "v.npy", X)
    summary = migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts())
    assert (summary.rejected, summary.ingested, summary.count) == (2, 298, 298)
    rejects = [json.loads(line) for line in (tmp_path / "idx" / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["row"] for r in rejects) == [5, 77]
    with slimvec.open(tmp_path / "idx") as idx:
        assert len(idx.full_vectors) == 298
        assert idx.full_vectors.get([5, 77, 6])[1].tolist() == [False, False, True]


def test_existing_index_with_other_reducer_is_refused(tmp_path, minilm_vectors):
    np.save(tmp_path / "v.npy", minilm_vectors[:300])
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts())
    with pytest.raises(ConfigError, match="--rebuild"):
        migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts(reducer="pca:8"))
    rebuilt = migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts(reducer="pca:8", rebuild=True))
    assert rebuilt.created and rebuilt.count == 300


def test_cli_migrate_json(tmp_path, minilm_vectors):
    from typer.testing import CliRunner

    from slimvec.cli import app

    np.save(tmp_path / "v.npy", minilm_vectors[:300])
    result = CliRunner().invoke(app, ["migrate", "--from", f"npy:{tmp_path / 'v.npy'}", "--index",
                                      str(tmp_path / "idx"), "--reducer", "pca:24", "--store",
                                      "faiss:Flat", "--keep-full", "--full-dtype", "float16", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout[result.stdout.index("{"):])
    assert out["count"] == 300 and out["ingested"] == 300
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.dim_out == 24 and idx.full_vectors.dtype == "float16"


def test_source_specs_parse_urls_paths_and_options(tmp_path):
    from slimvec.migrate.sources import parse_source

    assert parse_source("qdrant:https://db.example:6333/docs") == ("qdrant", "https://db.example:6333/docs", {})
    assert parse_source("hnsw:/data/x.bin,dim=768,space=ip") == ("hnsw", "/data/x.bin", {"dim": "768", "space": "ip"})
    assert parse_source("parquet:v.parquet,id=key,vector=emb")[2] == {"id": "key", "vector": "emb"}
    assert parse_source(str(tmp_path / "a.npy"))[0] == "npy"
    assert parse_source(str(tmp_path / "a.faiss"))[0] == "faiss"
    with pytest.raises(ConfigError, match="key=value"):
        parse_source("npy:a.npy,oops")
    with pytest.raises(ConfigError, match="name the collection"):
        open_source("qdrant:docs")
