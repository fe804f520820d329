"""slimvec rebuild: a new recipe from the kept full vectors, on every store, with real files.

The old index is built with ``migrate`` from a Parquet file of real MiniLM vectors with payloads
(no encoder to load); one test ingests texts to check that the encoder survives.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import slimvec
from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.index.manifest import Manifest
from slimvec.migrate import MigrateOptions, migrate
from slimvec.ops.rebuild import rebuild

N = 600


def _parquet(path: Path, vectors: np.ndarray) -> Path:
    ids = np.arange(len(vectors)) * 7 + 3  # not row numbers
    table = pa.table({"id": ids, "vector": [v.tolist() for v in vectors],
                      "lang": ["en" if i % 3 else "fr" for i in range(len(vectors))],
                      "n": np.arange(len(vectors))})
    pq.write_table(table, path)
    return path


def _build(tmp_path: Path, vectors: np.ndarray, recipe: str, name: str = "idx") -> Path:
    src = _parquet(tmp_path / f"{name}.parquet", vectors)
    migrate(f"parquet:{src},id=id,vector=vector", tmp_path / name,
            MigrateOptions(recipe=recipe, progress=False, batch_size=128))
    return tmp_path / name


def _snapshot(index_dir: Path, n: int = N) -> tuple[int, list[int], list, Manifest]:
    """count, the ids written, their payloads and the manifest."""
    m = Manifest.read(index_dir)
    with slimvec.open(index_dir) as idx:
        count = int(idx.store.count())
        ids = (np.arange(n) * 7 + 3).tolist()
        payloads = idx.payloads(ids)
    return count, ids, payloads, m


def _recall(index_dir: Path, queries: np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    with slimvec.open(index_dir) as idx:
        res = idx.search(queries, k)
    return float(np.mean([len(set(r) & set(t)) / k for r, t in zip(res.ids, truth)]))


def _truth(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    x = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    top = np.argsort(-(q @ x.T), axis=1)[:, :k]
    return top * 7 + 3


CASES = [  # old recipe -> new recipe, vectors: every store on one side or the other (qdrant-client
    # local mode is pure Python and slow: fewer vectors)
    ("pca:32|qdrant-edge|rescore=4,keep_full=float32", "pca:48|faiss:HNSW16|rescore=auto", N),
    ("pca:32|faiss:HNSW16|rescore=4,keep_full=float32", "pca:48|hnsw|rescore=auto", N),
    ("pca:32|hnsw|rescore=auto,keep_full=float16", "pca:48|qdrant-edge|rescore=4", N),
    ("pca:32|qdrant|rescore=4,keep_full=float32", "pca:24|hnsw|rescore=4", 200),
    ("pca:32|faiss:Flat|rescore=auto,keep_full=float16", "pca:48|qdrant|rescore=4", 200),
]


@pytest.mark.parametrize("old_recipe,new_recipe,n", CASES)
def test_rebuild_keeps_ids_payloads_count_and_recall(tmp_path, minilm_vectors, old_recipe,
                                                     new_recipe, n):
    vectors, queries = minilm_vectors[:n], minilm_vectors[N:N + 50]
    index = _build(tmp_path, vectors, old_recipe)
    count0, ids, payloads0, m0 = _snapshot(index, n)
    assert count0 == n and all(p is not None for p in payloads0)

    summary = rebuild(index, new_recipe, sample=400, batch_size=128)

    count1, _, payloads1, m1 = _snapshot(index, n)
    assert (count1, summary.documents) == (n, n)
    assert summary.bytes_before > 0 and summary.bytes_after > 0 and summary.old_removed
    assert payloads1 == payloads0  # ids and payloads identical
    assert m1.recipe != m0.recipe and m1.recipe.startswith(new_recipe.split("|")[0])
    assert (m1.encoder, m1.metric, m1.id_rule, m1.dim_in) == (m0.encoder, m0.metric, m0.id_rule,
                                                               m0.dim_in)
    with slimvec.open(index) as idx:  # every id is searchable by its own kept vector
        res = idx.search(vectors[:40], 1)
        assert (res.ids[:, 0] == np.array(ids[:40])).all()
    # nothing left beside the index
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "idx.parquet"]
    # recall at least what a fresh build of the same recipe gives (within noise)
    fresh = _build(tmp_path, vectors, Manifest.read(index).recipe, name="fresh")
    truth = _truth(vectors, queries)
    assert _recall(index, queries, truth) >= _recall(fresh, queries, truth) - 0.03


def test_rebuild_refuses_without_full_vectors(tmp_path, minilm_vectors):
    index = _build(tmp_path, minilm_vectors[:N], "pca:32|faiss:Flat")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfigError, match="keeps no full vectors.*--keep-full.*slimvec migrate"):
        rebuild(index, "pca:48|faiss:Flat")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_rebuild_refuses_a_reducer_larger_than_the_kept_vectors(tmp_path, minilm_vectors):
    index = _build(tmp_path, minilm_vectors[:N], "pca:32|hnsw|rescore=2,keep_full=float16")
    with pytest.raises(DimensionMismatchError, match="384"):
        rebuild(index, "pca:500|hnsw")
    assert Manifest.read(index).reducer.startswith("pca")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "idx.parquet"]


def test_rebuild_keeps_the_encoder_of_a_text_index(tmp_path, sentences, encoder):
    from slimvec.indexer.pipeline import IngestOptions, ingest

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": t, "k": i}) + "\n"
                            for i, t in enumerate(sentences[:300])))
    ingest(docs, tmp_path / "idx", IngestOptions(recipe="pca:24|hnsw|rescore=4,keep_full=float16",
                                                 progress=False, batch_size=64))
    with slimvec.open(tmp_path / "idx") as idx:
        before = idx.search(sentences[:5], 1).ids[:, 0].tolist()
        pl_before = idx.payloads(before)
    rebuild(tmp_path / "idx", "pca:32|faiss:HNSW16|rescore=4")
    m = Manifest.read(tmp_path / "idx")
    assert m.encoder is not None and m.reducer == "pca:32" and m.store.startswith("faiss")
    with slimvec.open(tmp_path / "idx") as idx:  # texts still search: same encoder
        assert idx.search(sentences[:5], 1).ids[:, 0].tolist() == before
        assert idx.payloads(before) == pl_before


def test_rebuild_calibrates_on_the_queries_the_old_index_was_calibrated_on(tmp_path,
                                                                          minilm_vectors):
    from slimvec.ops.recalibrate import calibrate_index

    index = _build(tmp_path, minilm_vectors[:N], "pca:32|hnsw|rescore=auto,keep_full=float16")
    queries = minilm_vectors[2000:2060]
    calibrate_index(index, queries)
    assert Manifest.read(index).rescore.n_queries == 60
    rebuild(index, "pca:48|faiss:HNSW16|rescore=auto", sample=400)
    m = Manifest.read(index)
    assert m.rescore.calibrated and m.rescore.queries is not None and m.rescore.n_queries == 60
    with slimvec.open(index) as idx:  # the stored queries file is checksummed and readable
        assert idx.search(queries[:3], 1).ids.shape == (3, 1)


def test_an_open_qdrant_reader_holds_the_swap_and_the_rerun_only_swaps(tmp_path, minilm_vectors):
    """An open Qdrant Edge shard writes to its folder by path when it closes: it must not stay
    open across the swap. The rebuild waits for it, then refuses; the old index stays in place
    and searchable, and the rerun (reader closed) swaps without building again."""
    from slimvec.errors import IndexBusyError

    index = _build(tmp_path, minilm_vectors[:N], "pca:32|qdrant-edge|rescore=4,keep_full=float32")
    reader = slimvec.open(index)
    try:
        with pytest.raises(IndexBusyError, match="reader still has the old index open.*only swaps"):
            rebuild(index, "pca:48|hnsw|rescore=4", sample=400, store=reader.store,
                    swap_wait=0.3)
        assert reader.search(minilm_vectors[:3], 1).ids[:, 0].tolist() == [3, 10, 17]
    finally:
        reader.close()
    assert Manifest.read(index).store.startswith("qdrant-edge")  # the old one, complete
    phases = []
    summary = rebuild(index, "pca:48|hnsw|rescore=4", sample=400,
                      on_phase=lambda name, rows: phases.append(name))
    assert "fitting" not in phases and summary.documents == N  # built once, only swapped now
    assert Manifest.read(index).store == "hnsw"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "idx.parquet"]


def test_rebuild_keeps_the_metric(tmp_path):
    """An L2 index rebuilt into another recipe still compares by L2: the rebuild copies the old
    index's build spec (issue 35; it spelled the spec by hand, without the metric, and the new
    index became a cosine one whose scores and neighbours were another ranking's)."""
    X = np.random.default_rng(5).standard_normal((200, 16)).astype(np.float32)
    X *= np.random.default_rng(6).uniform(0.5, 2.0, (200, 1)).astype(np.float32)
    src = _parquet(tmp_path / "l2.parquet", X)
    migrate(f"parquet:{src},id=id,vector=vector", tmp_path / "l2",
            MigrateOptions(recipe="none:normalize=false|hnsw|keep_full=float32", metric="l2",
                           progress=False, batch_size=128))
    rebuild(tmp_path / "l2", "none:normalize=false|faiss:Flat")
    assert Manifest.read(tmp_path / "l2").metric == "l2"
    q = X[:3] * 1.1
    d = ((q[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    with slimvec.open(tmp_path / "l2") as idx:
        res = idx.search(q, k=5)
    assert res.ids.tolist() == (np.argsort(d, axis=1)[:, :5] * 7 + 3).tolist()
    np.testing.assert_allclose(res.scores, -np.sort(d, axis=1)[:, :5], rtol=1e-4)
