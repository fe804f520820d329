"""The metric end to end (issue 24 item 1): a migration from an L2 hnswlib file or an
inner-product FAISS file builds an index that ranks and scores by that metric (store, reducer,
full-vector rescoring, calibration, search), records it, and refuses what cannot keep it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.buildspec import DEFAULTS
from slimvec.errors import ConfigError
from slimvec.migrate import MigrateOptions, migrate, open_source

N, DIM, K = 600, 48, 10


def _data(seed: int = 0, n: int = N) -> np.ndarray:
    """Low-rank vectors (so a 16-d reducer keeps most of them) with norms spread 0.3-3 and an
    offset mean: L2, inner-product and cosine neighbours differ."""
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(99).normal(size=(12, DIM))
    x = rng.normal(size=(n, 12)) @ basis + 0.05 * rng.normal(size=(n, DIM))
    x = x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(0.3, 3.0, size=(n, 1))
    return (x + 0.4 * basis[0] / np.linalg.norm(basis[0])).astype(np.float32)


def _truth(X: np.ndarray, Q: np.ndarray, metric: str, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k ids and scores (negated squared L2, inner product or cosine)."""
    if metric == "l2":
        s = -(np.sum(Q ** 2, 1)[:, None] - 2 * Q @ X.T + np.sum(X ** 2, 1)[None, :])
    elif metric == "ip":
        s = Q @ X.T
    else:
        s = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (X / np.linalg.norm(X, axis=1, keepdims=True)).T
    top = np.argsort(-s, axis=1)[:, :k]
    return top, np.take_along_axis(s, top, axis=1)


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found.tolist(), truth.tolist())]))


def _hnsw_l2_file(tmp_path: Path, X: np.ndarray) -> Path:
    import hnswlib

    index = hnswlib.Index(space="l2", dim=X.shape[1])
    index.init_index(max_elements=len(X), M=16, ef_construction=100)
    index.add_items(X, np.arange(len(X)))
    path = tmp_path / "l2.hnsw"
    index.save_index(str(path))
    return path


def _faiss_ip_file(tmp_path: Path, X: np.ndarray) -> Path:
    import faiss

    index = faiss.IndexIDMap(faiss.IndexFlatIP(X.shape[1]))
    index.add_with_ids(X, np.arange(len(X), dtype=np.int64) + 1000)
    path = tmp_path / "ip.faiss"
    faiss.write_index(index, str(path))
    return path


def test_test_data_tells_the_metrics_apart():
    """The checks below can fail: on this data the three metrics pick different neighbours."""
    X, Q = _data(), _data(seed=1, n=40)
    l2, ip, cos = (_truth(X, Q, m)[0] for m in ("l2", "ip", "cosine"))
    assert _recall(cos, l2) < 0.6 and _recall(cos, ip) < 0.6 and _recall(l2, ip) < 0.6


def test_sources_report_their_metric(tmp_path):
    X = _data()
    with open_source(f"hnsw:{_hnsw_l2_file(tmp_path, X)},dim={DIM},space=l2") as src:
        assert src.metric == "l2"
    with open_source(f"faiss:{_faiss_ip_file(tmp_path, X)}") as src:
        assert src.metric == "ip"
    np.save(tmp_path / "v.npy", X)
    with open_source(str(tmp_path / "v.npy")) as src:
        assert src.metric is None  # a bare array does not say: cosine unless --metric


def test_l2_hnswlib_migration_ranks_and_scores_by_l2(tmp_path):
    """The issue's bug: an L2 hnswlib file was indexed as cosine without a word."""
    X, Q = _data(), _data(seed=1, n=40)
    source = f"hnsw:{_hnsw_l2_file(tmp_path, X)},dim={DIM},space=l2"
    recipe = "pca:16,normalize=false|hnsw|rescore=auto,keep_full=float32"
    migrate(source, tmp_path / "idx", MigrateOptions(progress=False, recipe=recipe))
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["metric"] == "l2"
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.info()["metric"] == "l2"
        assert idx.store.metric == "l2" and idx.full_vectors.metric == "l2"
        assert idx.manifest["rescore"]["calibrated"]
        res = idx.search(Q, K)  # the calibrated depth
    truth = _truth(X, Q, "l2")[0]
    assert _recall(res.ids, truth) >= 0.95
    # scores are negated squared L2 distances of the full vectors
    exact = -np.sum((X[res.ids] - Q[:, None, :]) ** 2, axis=2)
    np.testing.assert_allclose(res.scores, exact, rtol=1e-4, atol=1e-4)


def test_l2_default_reducer_keeps_lengths(tmp_path):
    """With nothing named, an L2 index gets the default recipe with a reducer that keeps the
    lengths L2 ranks by (``normalize=false``)."""
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(300, 128)) * rng.uniform(0.3, 3, size=(300, 1))).astype(np.float32)
    np.save(tmp_path / "v.npy", X)
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx", MigrateOptions(progress=False, metric="l2",
                                                                       fit_sample=300))
    with slimvec.open(tmp_path / "idx") as idx:
        info = idx.info()
        assert info["metric"] == "l2"
        assert "normalize=false" in info["reducer"], info["reducer"]
        assert info["recipe"].startswith(f"{info['reducer']}|{DEFAULTS['recipe_store']}|rescore=auto")


def test_ip_faiss_migration_ranks_and_scores_by_inner_product(tmp_path):
    X, Q = _data(), _data(seed=1, n=40)
    source = f"faiss:{_faiss_ip_file(tmp_path, X)}"
    migrate(source, tmp_path / "idx", MigrateOptions(
        progress=False, reducer="pca:16,center=false,normalize=false", store="faiss:Flat",
        keep_full="float32"))
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.info()["metric"] == "ip" and idx.manifest["metric"] == "ip"
        assert idx.store.metric == "ip"
        res = idx.search(Q, K, rescore=8)
    truth = _truth(X, Q, "ip")[0]
    assert _recall(res.ids - 1000, truth) >= 0.95
    np.testing.assert_allclose(res.scores, np.einsum("qkd,qd->qk", X[res.ids - 1000], Q),
                               rtol=1e-4, atol=1e-4)


def test_ip_refuses_a_reducer_that_changes_inner_products(tmp_path):
    """A normalising or centring reducer does not keep inner products: refused before anything
    is written, with the spec that does."""
    X = _data()
    source = f"faiss:{_faiss_ip_file(tmp_path, X)}"
    for reducer, hint in (("pca:16", "normalize=false"), ("pca:16,normalize=false", "center=false")):
        with pytest.raises(ConfigError, match=hint) as err:
            migrate(source, tmp_path / "idx", MigrateOptions(progress=False, reducer=reducer,
                                                             store="faiss:Flat"))
        assert "ip" in str(err.value)
        assert not (tmp_path / "idx" / "manifest.json").exists()


def test_metric_named_against_the_source_or_the_existing_index(tmp_path):
    X = _data()
    np.save(tmp_path / "v.npy", X)
    with pytest.raises(ConfigError, match="metric"):
        migrate(str(tmp_path / "v.npy"), tmp_path / "bad", MigrateOptions(progress=False, metric="dot"))
    opts = {"progress": False, "reducer": "pca:16,normalize=false", "store": "faiss:Flat"}
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx", MigrateOptions(metric="l2", **opts))
    with pytest.raises(ConfigError, match="metric 'l2'"):
        migrate(str(tmp_path / "v.npy"), tmp_path / "idx", MigrateOptions(metric="cosine", **opts))


def test_ip_source_of_unit_vectors_is_indexed_by_cosine(tmp_path):
    """FAISS's cosine is IndexFlatIP over normalised vectors: there inner product equals cosine
    (rankings and scores), so it is indexed by cosine and any reducer fits, with a notice."""
    X = _data()
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    notes: list[str] = []
    migrate(f"faiss:{_faiss_ip_file(tmp_path, X)}", tmp_path / "idx",
            MigrateOptions(progress=False, reducer="pca:16", store="faiss:Flat"), notify=notes.append)
    assert any("unit length" in n and "cosine" in n for n in notes), notes
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.info()["metric"] == "cosine"


def test_cli_migrate_takes_metric_and_info_shows_it(tmp_path):
    from typer.testing import CliRunner

    from slimvec.cli import app

    np.save(tmp_path / "v.npy", _data())
    runner = CliRunner()
    result = runner.invoke(app, ["migrate", "--from", f"npy:{tmp_path / 'v.npy'}", "--index",
                                 str(tmp_path / "idx"), "--metric", "l2", "--reducer",
                                 "pca:16,normalize=false", "--store", "faiss:Flat", "--json"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["info", "--index", str(tmp_path / "idx"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["metric"] == "l2"
    bad = runner.invoke(app, ["migrate", "--from", f"npy:{tmp_path / 'v.npy'}", "--index",
                              str(tmp_path / "idx2"), "--metric", "l2", "--reducer", "pca:16"])
    assert isinstance(bad.exception, ConfigError) and "normalize=false" in str(bad.exception)
    assert not (tmp_path / "idx2" / "manifest.json").exists()


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_qdrant_edge_rescoring_inside_the_store_scores_by_the_metric(tmp_path, metric):
    """The other rescoring path: Qdrant Edge keeping float32 full vectors as a named vector
    re-ranks them with the index's distance (Euclid / Dot), not cosine."""
    X, Q = _data(), _data(seed=1, n=20)
    np.save(tmp_path / "v.npy", X)
    reducer = "pca:16,normalize=false" + (",center=false" if metric == "ip" else "")
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx", MigrateOptions(
        progress=False, metric=metric, reducer=reducer, store="qdrant-edge",
        keep_full="float32"))
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.full_vectors is None and idx.store.keeps_full  # full vectors in the store
        res = idx.search(Q, K, rescore=8)
    assert _recall(res.ids, _truth(X, Q, metric)[0]) >= 0.95
    exact = (-np.sum((X[res.ids] - Q[:, None, :]) ** 2, axis=2) if metric == "l2"
             else np.einsum("qkd,qd->qk", X[res.ids], Q))
    np.testing.assert_allclose(res.scores, exact, rtol=1e-3, atol=1e-3)


def test_the_reducer_rules_are_what_keeps_each_metric():
    """Why buildspec refuses what it refuses (reduced space alone, no rescoring, 16 of 48 dims on
    the low-rank data): normalising loses L2 and inner-product neighbours, centring loses
    inner-product ones; the reducers the defaults pick keep them."""
    from slimvec.buildspec import default_reducer
    from slimvec.reducers import make_reducer

    X, Q = _data(), _data(seed=1, n=60)

    def reduced_recall(spec: str, metric: str) -> float:
        r = make_reducer(spec).fit(X)
        return _recall(_truth(r.transform(X), r.transform(Q), metric)[0], _truth(X, Q, metric)[0])

    for metric in ("l2", "ip"):
        kept = reduced_recall(default_reducer(metric).replace("96", "16"), metric)
        assert kept >= 0.95
        assert reduced_recall("pca:16", metric) < kept - 0.3  # normalised (and centred)
    assert reduced_recall("pca:16,normalize=false", "ip") < 0.8  # centred only
