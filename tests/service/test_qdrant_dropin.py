"""Qdrant apps' own request shapes against a real ``slimvec serve`` through the real qdrant-client
over REST (issue 38): Haystack's / mem0's first write (``VectorParams(on_disk=False)`` and the
other collection options), ``GET /`` as Qdrant answers it, Dot and Euclid scores as Qdrant returns
them, query ``params``, ``set_payload(key=...)``, ``points/batch``, Qdrant's error envelope on
every other path, and named vectors (the congruence suite's shared collection: ``text`` Cosine,
``image`` Dot, ``code`` Euclid). Results are compared with qdrant-client's local mode (exact, pure
Python)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.service.server import Server

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

DIM = 16
N = 300


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
    with pytest.raises(UnexpectedResponse) as exc:  # served; a name the collection lacks is a 400
        client.batch_update_points("pay", update_operations=[m.DeleteVectorsOperation(
            delete_vectors=m.DeleteVectors(points=[1], vector=["x"]))])
    assert exc.value.status_code == 400 and "Not existing vector name" in exc.value.content.decode()


def test_other_paths_answer_qdrants_envelope(client, srv):
    import httpx

    assert client.get_aliases().aliases == []
    assert client.get_collection_aliases("hay" if client.collection_exists("hay") else "x").aliases == []
    r = httpx.post(srv.url + "/collections/aliases", json={})  # served (issue 53): a bad body named
    assert r.status_code == 400 and '"actions"' in r.json()["status"]["error"]
    for method, path in (("POST", "/collections/x/shards"), ("GET", "/cluster"),
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


#: the congruence suite's named vectors (smaller): each a served index of its own metric
NAMED = {"text": (12, m.Distance.COSINE), "image": (10, m.Distance.DOT),
         "code": (8, m.Distance.EUCLID)}
#: float32 full vectors re-ranking every candidate: scores as exact as local mode's
EXACT = "none|faiss:HNSW16,SQ8|rescore=10,keep_full=float32"
#: the same behind each store a collection can have (issue 38: "the same on every store")
EXACT_ON = {"faiss": EXACT, "hnsw": "none|hnsw|rescore=10,keep_full=float32",
            "qdrant-edge": "none|qdrant-edge|rescore=10,keep_full=float32"}


def _named_points(n, seed, skip=True):
    """Points with every named vector, or (``skip``) some without ``text`` (the home's) or
    ``image``, as the suite's fixtures with ``skip_vectors``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        vec = {k: rng.random(size).round(3).tolist() for k, (size, _d) in NAMED.items()}
        if skip and i % 7 == 3:
            vec.pop("text")
        if skip and i % 5 == 1:
            vec.pop("image")
        out.append(m.PointStruct(id=i, vector=vec, payload={"i": i, "odd": i % 2 == 1,
                                                            "n": {"a": i, "b": [i]}}))
    return out


def _named_fill(c, name, pts, fit_after=None, recipe=EXACT):
    c.create_collection(name, vectors_config={k: m.VectorParams(size=s, distance=d)
                                              for k, (s, d) in NAMED.items()},
                        metadata=None if fit_after is None else {"slimvec_recipe": recipe,
                                                                 "slimvec_fit_after": fit_after})
    c.upsert(name, points=pts, wait=True)


def _same_hits(got, want):
    assert [p.id for p in got] == [p.id for p in want]
    np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4, atol=1e-5)
    for g, w in zip(got, want):
        assert g.payload == w.payload


def _same_records(got, want):
    assert [p.id for p in got] == [p.id for p in want]
    for g, w in zip(got, want):
        assert g.payload == w.payload and sorted(g.vector or {}) == sorted(w.vector or {}), g.id
        for k in w.vector or {}:
            np.testing.assert_allclose(g.vector[k], w.vector[k], atol=1e-5)


@pytest.mark.parametrize("fit_after,store", [(1000, "faiss"), (40, "faiss"), (40, "hnsw"), (40, "qdrant-edge")],
                         ids=["pending", "fitted-faiss", "fitted-hnsw", "fitted-qdrant-edge"])
def test_named_vectors_as_local_mode(client, srv, fit_after, store):
    """A collection of three named vectors (Cosine, Dot, Euclid), some points without ``text``
    or ``image``, behind each store: ``using=`` searches (filtered too) score as local mode's,
    ``with_vectors`` gives each point the names it has, the collection info shows the three
    configs, and the indexes behind the names are neither listed nor left behind by the delete."""
    name = f"named{fit_after}{store.replace('-', '')}"
    pts = _named_points(120, fit_after)
    local = QdrantClient(":memory:")
    _named_fill(local, name, pts)
    _named_fill(client, name, pts, fit_after, EXACT_ON[store])
    state = client._client.http.client._client.get(f"{srv.url}/indexes/{name}").json()["state"]
    assert state == ("pending" if fit_after > 120 else "ready")
    vecs = client.get_collection(name).config.params.vectors
    assert {k: (v.size, v.distance) for k, v in vecs.items()} == NAMED
    assert [c.name for c in client.get_collections().collections].count(name) == 1
    assert not any("~" in c.name for c in client.get_collections().collections)
    assert client.count(name).count == local.count(name).count == 120
    rng = np.random.default_rng(5)
    odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=True))])
    for using, (size, _d) in NAMED.items():
        q = rng.random(size).tolist()
        for flt in (None, odd):
            want = local.query_points(name, query=q, using=using, limit=6, query_filter=flt,
                                      with_payload=True).points
            got = client.query_points(name, query=q, using=using, limit=6, query_filter=flt,
                                      with_payload=True).points
            _same_hits(got, want)
    for sel in (["i", "n.a"], m.PayloadSelectorExclude(exclude=["n.b"])):  # payload paths
        want = local.query_points(name, query=q, using=using, limit=3, with_payload=sel).points
        _same_hits(client.query_points(name, query=q, using=using, limit=3, with_payload=sel).points, want)
        assert "b" not in want[0].payload["n"]
    _same_hits(client.query_points(name, limit=5, offset=2, with_payload=True).points,  # no query:
               local.query_points(name, limit=5, offset=2, with_payload=True).points)  # scroll order
    for wv in (True, ["image"], ["code", "text"]):
        _same_records(client.retrieve(name, list(range(10)), with_vectors=wv),
                      local.retrieve(name, list(range(10)), with_vectors=wv))
    _same_records(client.scroll(name, limit=200, with_vectors=True)[0],
                  local.scroll(name, limit=200, with_vectors=True)[0])
    assert client.delete_collection(name)
    import httpx

    assert not [i["name"] for i in httpx.get(srv.url + "/indexes").json()["indexes"]
                if i["name"].startswith(name)]


def test_named_vector_updates_as_local_mode(tmp_path):
    """``delete_vectors`` (the home's vector too), ``update_vectors`` of one name, an upsert
    that replaces a point with fewer vectors, payload changes and deletes reach every name's
    index: records, counts and each name's search stay those of local mode, also after a
    restart of the server."""
    pts = _named_points(60, 3, skip=False)
    local = QdrantClient(":memory:")
    (tmp_path / "root").mkdir()
    with Server(tmp_path / "root") as srv:
        client = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        _named_fill(local, "nup", pts)
        _named_fill(client, "nup", pts, 1000)
        rng = np.random.default_rng(9)
        new_image = rng.random((60, 10)).round(3).tolist()
        for c in (local, client):
            c.delete_vectors("nup", vectors=["text"], points=[0, 1, 2])
            c.delete_vectors("nup", vectors=["image"], points=m.Filter(must=[m.FieldCondition(
                key="i", range=m.Range(gte=50))]))
            c.update_vectors("nup", points=[m.PointVectors(id=i, vector={"image": new_image[i]})
                                            for i in (1, 52, 7)], wait=True)
            c.update_vectors("nup", points=[m.PointVectors(id=2, vector={"text": new_image[2] + [0.5, 0.5]})])
            c.upsert("nup", points=[m.PointStruct(id=8, vector={"code": pts[8].vector["code"]},
                                                  payload={"i": 8, "new": True})], wait=True)
            c.set_payload("nup", {"tag": "x"}, points=[0, 3, 8])
            c.set_payload("nup", {"c": 1}, points=[0, 9], key="n")
            c.overwrite_payload("nup", {"only": 1}, points=[4])
            c.delete_payload("nup", keys=["odd"], points=[5])
            c.delete("nup", points_selector=[6, 51])
        queries = {k: rng.random(s).tolist() for k, (s, _d) in NAMED.items()}

        def check(client):
            assert client.count("nup").count == local.count("nup").count == 58
            _same_records(client.scroll("nup", limit=100, with_vectors=True)[0],
                          local.scroll("nup", limit=100, with_vectors=True)[0])
            for using, q in queries.items():
                _same_hits(client.query_points("nup", query=q, using=using, limit=60,
                                               with_payload=True).points,
                           local.query_points("nup", query=q, using=using, limit=60,
                                              with_payload=True).points)

        check(client)
        srv.terminate()
        srv.start()
        check(QdrantClient(url=srv.url, timeout=60, prefer_grpc=False))


def test_named_vector_errors(client):
    """A name the collection lacks (in ``using``, a point, ``with_vectors``) and an unnamed vector
    sent to a named collection are 400s naming the collection's vectors; ``~`` (which joins a
    collection's and a vector's name here) is refused in a collection name."""
    _named_fill(client, "nerr", _named_points(3, 1, skip=False))
    calls = [
        lambda: client.query_points("nerr", query=[0.1] * 12, using="dense"),
        lambda: client.query_points("nerr", query=[0.1] * 12),  # no using: the unnamed vector
        lambda: client.upsert("nerr", points=[m.PointStruct(id=1, vector={"dense": [0.1] * 12})]),
        lambda: client.upsert("nerr", points=[m.PointStruct(id=1, vector=[0.1] * 12)]),
        lambda: client.retrieve("nerr", [0], with_vectors=["dense"]),
    ]
    for call in calls:
        with pytest.raises(UnexpectedResponse) as exc:
            call()
        body = exc.value.content.decode()
        assert exc.value.status_code == 400 and "Not existing vector name" in body, body
        assert "'text', 'image', 'code'" in body
    with pytest.raises(UnexpectedResponse) as exc:
        client.upsert("nerr", points=[m.PointStruct(id=1, vector={"code": [0.1] * 3})])
    assert exc.value.status_code == 400 and "expected dim: 8, got 3" in exc.value.content.decode()
    with pytest.raises(UnexpectedResponse) as exc:
        client.create_collection("a~b", vectors_config=m.VectorParams(size=4, distance=m.Distance.DOT))
    assert exc.value.status_code == 400 and not client.collection_exists("a~b")
    assert client.count("nerr").count == 3
    client.delete_collection("nerr")


def test_small_fitted_collection_searched_exactly(client, X):
    """A fitted collection whose vectors are under Qdrant's default indexing threshold is
    searched exactly, as Qdrant searches a segment it has not indexed: the default recipe's
    4-bit codes (re-ranked at the calibrated depth) give local mode's top 10 on every query (as a
    set where the 10th and 11th are apart by more than the kept float16 vectors' error)."""
    local = QdrantClient(":memory:")
    Y = np.random.default_rng(3).random((N, 64)).round(3).astype(np.float32)  # close Dot scores
    for c, meta in ((local, None), (client, {"slimvec_fit_after": 100})):
        c.create_collection("small", vectors_config=m.VectorParams(size=64, distance=m.Distance.DOT),
                            metadata=meta)
        c.upsert("small", points=[m.PointStruct(id=i, vector=v.tolist()) for i, v in enumerate(Y)],
                 wait=True)
    for q in np.random.default_rng(4).random((40, 64)):
        want = local.query_points("small", query=q.tolist(), limit=11).points
        got = client.query_points("small", query=q.tolist(), limit=10).points
        np.testing.assert_allclose(sorted((p.score for p in got), reverse=True),
                                   [p.score for p in want[:10]], rtol=1e-4)
        if want[9].score - want[10].score > 2e-3:
            assert {p.id for p in got} == {p.id for p in want[:10]}


def test_dense_queries_by_example_as_local_mode(client):
    """Queries by example on named dense vectors: a point id, recommend (average_vector,
    best_score, sum_scores), discover, context, filtered too: as local mode (examples left out)."""
    pts = _named_points(80, 12)
    local = QdrantClient(":memory:")
    _named_fill(local, "byex", pts)
    _named_fill(client, "byex", pts, 1000)
    odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=True))])
    rng = np.random.default_rng(2)
    for using, (size, _d) in NAMED.items():
        ex = [p.id for p in pts if using in p.vector][:4]
        for query in (ex[0], m.RecommendQuery(recommend=m.RecommendInput(positive=ex[:2], negative=ex[2:3])),
                      m.RecommendQuery(recommend=m.RecommendInput(
                          positive=[ex[0], rng.random(size).tolist()], negative=[ex[3]],
                          strategy=m.RecommendStrategy.BEST_SCORE)),
                      m.RecommendQuery(recommend=m.RecommendInput(
                          positive=ex[:2], strategy=m.RecommendStrategy.SUM_SCORES)),
                      m.DiscoverQuery(discover=m.DiscoverInput(target=ex[0], context=[
                          m.ContextPair(positive=ex[1], negative=ex[2])])),
                      m.ContextQuery(context=[m.ContextPair(positive=ex[1], negative=ex[2])])):
            for flt in (None, odd):
                kw = dict(query=query, using=using, limit=6, query_filter=flt, with_payload=True)
                got, want = client.query_points("byex", **kw).points, local.query_points("byex", **kw).points
                if isinstance(query, m.ContextQuery):  # 0 for every point in all pairs' zones: ties
                    np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4)
                else:
                    _same_hits(got, want)
    client.delete_collection("byex")
