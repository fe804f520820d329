"""Qdrant apps' own request shapes against a real ``slimvec serve`` through the real qdrant-client
over REST (issue 38): Haystack's / mem0's first write (``VectorParams(on_disk=False)`` and the
other collection options), ``GET /`` as Qdrant answers it, Dot and Euclid scores as Qdrant returns
them, query ``params``, ``set_payload(key=...)``, ``points/batch`` and Qdrant's error envelope on
every other path. Results are compared with qdrant-client's local mode (exact, pure Python)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.service.server import Server

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient, models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

DIM = 16
N = 300


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("qdropin") / "root"
    root.mkdir()
    with Server(root) as s:  # the default recipe (faiss:HNSW16,SQ4, re-ranked)
        yield s


@pytest.fixture(scope="module")
def client(srv):
    c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
    yield c
    c.close()


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(11).standard_normal((N, DIM)).astype(np.float32)


def _fill(c, name, X, distance, **create):
    c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=distance),
                        **create)
    c.upsert(name, points=[m.PointStruct(id=i, vector=v.tolist(), payload={"i": i, "n": {"a": 1}})
                           for i, v in enumerate(X)], wait=True)


def test_root_is_qdrants_shape(client, srv):
    import httpx

    body = httpx.get(srv.url + "/").json()
    assert body["title"] == QdrantClient(":memory:").info().title  # what a Qdrant server answers
    assert body["server"] == "slimvec" and body["slimvec_version"]
    assert client.info().version == body["version"]


def test_haystack_first_write_and_options_shown_back(client, X):
    """Haystack and mem0 create with ``on_disk=False``; the other options are recorded, and the
    collection's info describes the store the default recipe built, not Qdrant's defaults."""
    client.create_collection(
        "hay", vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE, on_disk=False),
        on_disk_payload=True, shard_number=1, replication_factor=1,
        hnsw_config=m.HnswConfigDiff(m=32, ef_construct=64), wal_config=m.WalConfigDiff(wal_capacity_mb=16),
        optimizers_config=m.OptimizersConfigDiff(indexing_threshold=0),
        quantization_config=m.ScalarQuantization(scalar=m.ScalarQuantizationConfig(type=m.ScalarType.INT8)))
    client.upsert("hay", points=[m.PointStruct(id=i, vector=v.tolist(), payload={"content": str(i)})
                                 for i, v in enumerate(X[:50])], wait=True)
    hits = client.query_points("hay", query=X[3].tolist(), limit=3, with_payload=True).points
    assert hits[0].id == 3 and hits[0].payload == {"content": "3"}
    info = client.get_collection("hay")
    assert info.config.params.vectors.on_disk is False
    assert info.config.params.on_disk_payload is True and info.config.params.shard_number == 1
    assert info.config.wal_config.wal_capacity_mb == 16
    # the store really built: FAISS HNSW16 (efc=200) with 4-bit codes, not the requested m=32
    assert (info.config.hnsw_config.m, info.config.hnsw_config.ef_construct) == (16, 200)
    assert info.config.quantization_config is None  # 4-bit codes: no Qdrant quantization says it
    said = " ".join(w.message for w in info.warnings)
    assert "4-bit scalar codes" in said and "hnsw_config" in said and "quantization_config" in said
    client.update_collection("hay", metadata={"owner": "me"})
    assert client.get_collection("hay").config.metadata == {"owner": "me"}


@pytest.mark.parametrize("fit_after", [100, 100_000])
@pytest.mark.parametrize("distance", [m.Distance.DOT, m.Distance.EUCLID])
def test_distance_scores_as_qdrant(client, X, distance, fit_after):
    """Dot and Euclid on a fitted index (fit after 100 points, float32 full vectors re-ranking
    every candidate) and on one still collecting its fit sample (searched exactly in memory,
    which scored by cosine whatever the distance): ids and scores as local mode's (Euclid: the
    distance, lower is closer)."""
    name = f"d-{distance.value.lower()}-{fit_after}"
    recipe = {"slimvec_recipe": "none|faiss:HNSW16,SQ8|rescore=10,keep_full=float32",
              "slimvec_fit_after": fit_after}
    local = QdrantClient(":memory:")
    _fill(local, name, X, distance)
    _fill(client, name, X, distance, metadata=recipe)
    for q in X[:5] * 0.5:
        want = local.query_points(name, query=q.tolist(), limit=5).points
        got = client.query_points(name, query=q.tolist(), limit=5).points
        assert [p.id for p in got] == [p.id for p in want]
        np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4, atol=1e-4)
    thr = (want[2].score + want[3].score) / 2  # between the 3rd and 4th: Euclid's is a bound
    got = client.query_points(name, query=q.tolist(), limit=5, score_threshold=thr).points
    assert [p.id for p in got] == [p.id for p in want[:3]]
    # Dot and Euclid vectors come back as written (Cosine ones unit-length, as Qdrant's)
    np.testing.assert_allclose(client.retrieve(name, [7], with_vectors=True)[0].vector, X[7], rtol=1e-5)


def test_manhattan_refused_by_name(client):
    with pytest.raises(UnexpectedResponse) as exc:
        client.create_collection("man", vectors_config=m.VectorParams(size=4, distance=m.Distance.MANHATTAN))
    assert exc.value.status_code == 400 and "Manhattan" in exc.value.content.decode()
    assert not client.collection_exists("man")


def test_query_params_beam_exact_and_rescore(client, X):
    """``search_params`` of a tuned app: ``exact`` gives local mode's exact top-k on a fitted
    collection; ``hnsw_ef`` and quantization ``rescore`` / ``oversampling`` are served."""
    local = QdrantClient(":memory:")
    meta = {"slimvec_fit_after": 100}
    _fill(local, "tuned", X, m.Distance.COSINE)
    _fill(client, "tuned", X, m.Distance.COSINE, metadata=meta)
    for q in X[5:10]:
        want = [p.id for p in local.query_points("tuned", query=q.tolist(), limit=10).points]
        exact = client.query_points("tuned", query=q.tolist(), limit=10,
                                    search_params=m.SearchParams(exact=True)).points
        assert [p.id for p in exact] == want
        for sp in (m.SearchParams(hnsw_ef=256),
                   m.SearchParams(quantization=m.QuantizationSearchParams(rescore=False)),
                   m.SearchParams(quantization=m.QuantizationSearchParams(oversampling=3.0))):
            assert len(client.query_points("tuned", query=q.tolist(), limit=10, search_params=sp).points) == 10
    with pytest.raises(UnexpectedResponse) as exc:
        client.query_points("tuned", query=X[0].tolist(), search_params=m.SearchParams(hnsw_ef=0))
    assert exc.value.status_code == 400 and "hnsw_ef" in exc.value.content.decode()


def test_set_payload_key_and_points_batch(client, X):
    """``set_payload(key=...)`` follows Qdrant's path rules and ``batch_update_points`` applies
    its operations in order, as local mode does."""
    local = QdrantClient(":memory:")
    for c in (local, client):
        _fill(c, "pay", X[:20], m.Distance.COSINE)
        c.set_payload("pay", payload={"b": 2}, points=[1, 2], key="n")
        c.set_payload("pay", payload={"z": 0}, points=m.Filter(must=[m.FieldCondition(
            key="i", range=m.Range(gte=15))]), key="deep.er")
        c.batch_update_points("pay", update_operations=[
            m.UpsertOperation(upsert=m.PointsList(points=[m.PointStruct(id=99, vector=X[0].tolist(),
                                                                        payload={"new": True})])),
            m.SetPayloadOperation(set_payload=m.SetPayload(payload={"s": 1}, points=[3])),
            m.OverwritePayloadOperation(overwrite_payload=m.SetPayload(payload={"o": 1}, points=[4])),
            m.DeletePayloadOperation(delete_payload=m.DeletePayload(keys=["i"], points=[5])),
            m.ClearPayloadOperation(clear_payload=m.PointIdsList(points=[6])),
            m.DeleteOperation(delete=m.PointIdsList(points=[7])),
        ])
    got = {p.id: p.payload for p in client.scroll("pay", limit=100)[0]}
    want = {p.id: p.payload for p in local.scroll("pay", limit=100)[0]}
    assert got == want and got[1]["n"] == {"a": 1, "b": 2} and got[16]["deep"] == {"er": {"z": 0}}
    with pytest.raises(UnexpectedResponse) as exc:
        client.batch_update_points("pay", update_operations=[m.DeleteVectorsOperation(
            delete_vectors=m.DeleteVectors(points=[1], vector=["x"]))])
    assert exc.value.status_code == 400 and "delete_vectors" in exc.value.content.decode()


def test_other_paths_answer_qdrants_envelope(client, srv):
    import httpx

    assert client.get_aliases().aliases == []
    assert client.get_collection_aliases("hay" if client.collection_exists("hay") else "x").aliases == []
    for method, path in (("POST", "/collections/aliases"), ("GET", "/cluster"),
                         ("POST", "/collections/x/points/recommend"), ("DELETE", "/snapshots/s"),
                         ("PUT", "/collections")):
        r = httpx.request(method, srv.url + path, json={})
        assert r.status_code == 400 and "not supported" in r.json()["status"]["error"], (method, path)


def test_conditional_upsert_as_local_mode(client, X):
    """``update_filter`` replaces only existing points whose payload matches (new ids are
    inserted); ``update_mode`` insert_only / update_only write only new / existing ids."""
    local = QdrantClient(":memory:")
    for c in (local, client):
        c.create_collection("cond", vectors_config=m.VectorParams(size=DIM, distance=m.Distance.DOT))
        c.upsert("cond", points=[m.PointStruct(id=i, vector=X[i].tolist(), payload={"d": i})
                                 for i in (1, 2)], wait=True)
        c.upsert("cond", points=[m.PointStruct(id=i, vector=X[i].tolist(), payload={"d": 10 + i})
                                 for i in (1, 2, 3)], wait=True,
                 update_filter=m.Filter(must=[m.FieldCondition(key="d", match=m.MatchValue(value=1))]))
        c.upsert("cond", points=[m.PointStruct(id=i, vector=X[i].tolist(), payload={"d": 20 + i})
                                 for i in (2, 4)], update_mode=m.UpdateMode.INSERT_ONLY, wait=True)
        c.upsert("cond", points=[m.PointStruct(id=i, vector=X[i].tolist(), payload={"d": 30 + i})
                                 for i in (3, 5)], update_mode=m.UpdateMode.UPDATE_ONLY, wait=True)
        c.update_vectors("cond", points=[m.PointVectors(id=i, vector=(-X[i]).tolist()) for i in (1, 2)],
                         update_filter=m.Filter(must=[m.FieldCondition(key="d", match=m.MatchValue(value=11))]),
                         wait=True)
    got = {p.id: (p.payload, p.vector) for p in client.scroll("cond", limit=10, with_vectors=True)[0]}
    want = {p.id: (p.payload, p.vector) for p in local.scroll("cond", limit=10, with_vectors=True)[0]}
    assert {i: g[0] for i, g in got.items()} == {1: {"d": 11}, 2: {"d": 2}, 3: {"d": 33}, 4: {"d": 24}}
    assert {i: w[0] for i, w in want.items()} == {i: g[0] for i, g in got.items()}
    for i in got:  # point 1's vector negated (it matched the filter), point 2's kept
        np.testing.assert_allclose(got[i][1], want[i][1], rtol=1e-5)
    np.testing.assert_allclose(got[1][1], -X[1], rtol=1e-5)
    with pytest.raises(UnexpectedResponse) as exc:
        client.update_vectors("cond", points=[m.PointVectors(id=77, vector=X[0].tolist())], wait=True)
    assert exc.value.status_code == 404
