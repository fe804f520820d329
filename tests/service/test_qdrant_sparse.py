"""Sparse vectors (with Qdrant's IDF modifier) beside named dense ones, and filters beyond
slimvec's own language, through the real qdrant-client over REST against a real ``slimvec serve``
(issue 38 items 4 and 6), compared with qdrant-client's local mode; kept across a restart and a
kill -9 after ``wait=true`` writes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.service.server import Server

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402

N = 150
SPARSE = {"s": m.SparseVectorParams(), "idf": m.SparseVectorParams(modifier=m.Modifier.IDF)}


def _sv(rng, dim=60, nnz=6):
    idx = sorted(rng.choice(dim, size=nnz, replace=False).tolist())
    # multiples of 1/64: exact in float32 (read back as sent), rarely tied
    return m.SparseVector(indices=idx, values=(rng.integers(1, 4000, nnz) / 64).tolist())


def _points(seed=3):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        vec = {"text": rng.random(8).round(3).tolist(), "s": _sv(rng), "idf": _sv(rng)}
        if i % 4 == 1:
            vec.pop("s")
        if i % 6 == 2:
            vec.pop("text")
        if i % 9 == 0:
            vec.pop("idf")
        tags = ["a", "b", "c"][: i % 4]
        out.append(m.PointStruct(id=i, vector=vec, payload={
            "i": i, "odd": i % 2 == 1, "tags": tags,
            "at": {"lon": 10 + i % 7, "lat": 50 + i % 5}}))
    return out


def _fill(c, name, pts, recipe=None):
    c.create_collection(name, vectors_config={"text": m.VectorParams(size=8, distance=m.Distance.COSINE)},
                        sparse_vectors_config=SPARSE, metadata=recipe and {
                            "slimvec_recipe": recipe, "slimvec_fit_after": 40})
    c.upsert(name, points=pts, wait=True)


def _same_hits(got, want):
    assert [p.id for p in got] == [p.id for p in want]
    np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4)
    for g, w in zip(got, want):
        assert g.payload == w.payload


def _same_records(got, want):
    assert [p.id for p in got] == [p.id for p in want]
    for g, w in zip(got, want):
        gv, wv = (g.vector, w.vector) if isinstance(w.vector, dict) else ({"": g.vector}, {"": w.vector})
        assert sorted(gv or {}) == sorted(wv or {}), g.id
        for k, v in (wv or {}).items():
            if isinstance(v, m.SparseVector):
                assert gv[k].indices == v.indices and gv[k].values == v.values
            else:
                np.testing.assert_allclose(gv[k], v, atol=1e-5)


#: a filter of slimvec's own language, and ones it lacks (evaluated point by point)
FILTERS = [
    None,
    m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=True))]),
    m.Filter(must=[m.FieldCondition(key="tags", values_count=m.ValuesCount(gte=2))]),
    m.Filter(min_should=m.MinShould(min_count=2, conditions=[
        m.FieldCondition(key="odd", match=m.MatchValue(value=True)),
        m.FieldCondition(key="tags", match=m.MatchAny(any=["b"])),
        m.FieldCondition(key="i", range=m.Range(lt=60))])),
    m.Filter(must=[m.FieldCondition(key="at", geo_radius=m.GeoRadius(
        center=m.GeoPoint(lon=12, lat=51), radius=250_000))]),
]


def _compare(c, local, name, rng, usings=tuple(SPARSE)):
    for using in usings:
        q = _sv(rng)
        for flt in FILTERS:
            kw = dict(query=q, using=using, limit=7, query_filter=flt, with_payload=True)
            _same_hits(c.query_points(name, **kw).points, local.query_points(name, **kw).points)
            assert c.count(name, count_filter=flt).count == local.count(name, count_filter=flt).count
        kw = dict(query=q, using=using, limit=5, offset=3, score_threshold=400.0)
        _same_hits(c.query_points(name, **kw).points, local.query_points(name, **kw).points)
    for query in (m.RecommendQuery(recommend=m.RecommendInput(positive=[4, 6], negative=[10])),
                  m.RecommendQuery(recommend=m.RecommendInput(
                      positive=[4, _sv(rng)], strategy=m.RecommendStrategy.BEST_SCORE)),
                  m.DiscoverQuery(discover=m.DiscoverInput(target=6, context=[
                      m.ContextPair(positive=4, negative=10)])),
                  m.ContextQuery(context=[m.ContextPair(positive=_sv(rng), negative=10)]),
                  12):  # examples by id: points that keep their vector "s" throughout
        kw = dict(query=query, using="s", limit=6, with_payload=True)
        got, want = c.query_points(name, **kw).points, local.query_points(name, **kw).points
        if isinstance(query, m.ContextQuery):  # scores of 0 for every point in all pairs' zones:
            got, want = [p.score for p in got], [p.score for p in want]  # ties in any order
            np.testing.assert_allclose(got, want, rtol=1e-4)
        else:
            _same_hits(got, want)
    dense = rng.random(8).round(3).tolist()
    hybrid = [m.Prefetch(query=dense, using="text", limit=20),
              m.Prefetch(query=_sv(rng), using="s", limit=20, filter=FILTERS[1])]
    for query in (m.FusionQuery(fusion=m.Fusion.RRF), m.FusionQuery(fusion=m.Fusion.DBSF),
                  m.RrfQuery(rrf=m.Rrf(k=5, weights=[2.0, 1.0])), dense):  # hybrid, as LangChain
        kw = dict(prefetch=hybrid, query=query, using=None if query is not dense else "text",
                  limit=8, with_payload=True)
        got, want = c.query_points(name, **kw).points, local.query_points(name, **kw).points
        if query is dense:  # re-scored: one order
            _same_hits(got, want)
        else:  # fused ranks tie between the lists: the same scores, ties in any order
            np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4)
    for wv in (True, ["s"], ["idf", "text"]):
        _same_records(c.retrieve(name, list(range(12)), with_vectors=wv),
                      local.retrieve(name, list(range(12)), with_vectors=wv))
    _same_records(c.scroll(name, limit=N, with_vectors=True)[0],
                  local.scroll(name, limit=N, with_vectors=True)[0])


#: the home index behind the collection: the server's default (150 points: pending, exact), and
#: each store fitted (after 40 points), re-ranking every candidate from float32 kept vectors
HOMES = {"default": None, "faiss": "none|faiss:HNSW16,SQ8|rescore=10,keep_full=float32",
         "hnsw": "none|hnsw|rescore=10,keep_full=float32",
         "qdrant-edge": "none|qdrant-edge|rescore=10,keep_full=float32"}


@pytest.mark.parametrize("home", list(HOMES))
def test_sparse_vectors_as_local_mode(tmp_path, home):
    """Sparse searches (IDF too, filtered, paged, thresholded), recommend / discover / context
    with ids and vectors as examples, hybrid prefetch (RRF, DBSF, re-scored), vectors read back, ``update_vectors`` / ``delete_vectors``
    / deletes of sparse vectors: as local mode, before and after a restart, whatever store is
    the collection's home; a ``wait=true`` upsert survives a kill -9."""
    root = tmp_path / "root"
    root.mkdir()
    pts, rng = _points(), np.random.default_rng(9)
    local = QdrantClient(":memory:")
    _fill(local, "h", pts)
    with Server(root) as srv:
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        _fill(c, "h", pts, HOMES[home])
        state = c._client.http.client._client.get(f"{srv.url}/indexes/h").json()["state"]
        assert state == ("pending" if HOMES[home] is None else "ready")
        info, linfo = c.get_collection("h").config.params, local.get_collection("h").config.params
        assert info.sparse_vectors == linfo.sparse_vectors and info.vectors == linfo.vectors
        _compare(c, local, "h", rng)
        for cl in (c, local):
            cl.update_vectors("h", points=[m.PointVectors(id=1, vector={"s": _sv(np.random.default_rng(1))})],
                              wait=True)
            cl.delete_vectors("h", vectors=["idf"], points=[2, 3], wait=True)
            cl.delete("h", points_selector=m.FilterSelector(filter=m.Filter(must=[
                m.FieldCondition(key="tags", values_count=m.ValuesCount(gte=3))])), wait=True)
        # Qdrant's engine keeps counting deleted points in its IDF statistics (local mode does
        # not): after deletes only the unmodified sparse vector scores the same
        _compare(c, local, "h", rng, usings=("s",))
    with Server(root) as srv:  # restarted: the shard reopened from disk
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        _compare(c, local, "h", rng, usings=("s",))
        extra = m.PointStruct(id=999, vector={"s": _sv(rng)}, payload={"i": 999})
        c.upsert("h", points=[extra], wait=True)
        srv.kill()  # kill -9 right after the acknowledged write
    with Server(root) as srv:
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        got = c.retrieve("h", [999], with_vectors=True)
        assert got and got[0].vector["s"] == extra.vector["s"]
        assert c.delete_collection("h") and not (root / ".qdrant" / "h.sparse").exists()


def test_sparse_only_collection_multivectors_and_bad_vectors(tmp_path):
    """A collection of sparse vectors only (and one of no vectors at all) as local mode shows
    it; a malformed sparse vector is a 400 naming the fault, and nothing of the request is
    written; sparse MMR and multivectors as local mode."""
    root = tmp_path / "root"
    root.mkdir()
    local = QdrantClient(":memory:")
    pts = [m.PointStruct(id=p.id, vector={"idf": p.vector["idf"]}, payload=p.payload)
           for p in _points() if "idf" in p.vector]
    with Server(root) as srv:
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        for cl in (c, local):
            cl.create_collection("so", vectors_config={}, sparse_vectors_config={"idf": SPARSE["idf"]})
            cl.upsert("so", points=pts, wait=True)
            cl.create_collection("none", vectors_config=None)
        for n in ("so", "none"):
            got, want = c.get_collection(n).config.params, local.get_collection(n).config.params
            assert (got.vectors, got.sparse_vectors) == (want.vectors, want.sparse_vectors)
        q = _sv(np.random.default_rng(4))
        _same_hits(c.query_points("so", query=q, using="idf", limit=8).points,
                   local.query_points("so", query=q, using="idf", limit=8).points)
        bad = [({"idf": {"indices": [1, 1], "values": [1.0, 2.0]}}, "unique"),
               ({"idf": {"indices": [1, 2], "values": [1.0]}}, "same length"),
               ({"idf": {"indices": [-1], "values": [1.0]}}, "integer in 0.."),
               ({"idf": {"indices": [2 ** 32], "values": [1.0]}}, "integer in 0.."),
               ({"idf": {"indices": list(range(70_000)), "values": [1.0] * 70_000}}, "sparser"),
               ({"nope": {"indices": [1], "values": [1.0]}}, "Not existing vector name")]
        import httpx

        for vec, words in bad:
            r = httpx.put(f"{srv.url}/collections/so/points?wait=true", timeout=60,
                          json={"points": [{"id": 5000, "vector": {"idf": q.model_dump()}},
                                           {"id": 5001, "vector": vec}]})
            assert r.status_code == 400 and words in r.json()["status"]["error"], r.text
        assert c.count("so").count == len(pts)
        mmr = m.NearestQuery(nearest=q, mmr=m.Mmr(diversity=0.6, candidates_limit=20))  # local mode's rule
        _same_hits(c.query_points("so", query=mmr, using="idf", limit=6).points,
                   local.query_points("so", query=mmr, using="idf", limit=6).points)
        _multivectors_as_local_mode(c, local, srv.url)


def _multivectors_as_local_mode(c, local, url):
    """Multivectors (max-sim), named beside a dense vector and unnamed alone: searched, used as
    examples, read back as local mode; a ragged one is a 400."""
    rng = np.random.default_rng(6)
    mv = m.VectorParams(size=4, distance=m.Distance.DOT,
                        multivector_config=m.MultiVectorConfig(comparator=m.MultiVectorComparator.MAX_SIM))
    pts = [m.PointStruct(id=i, vector={"text": rng.random(8).round(3).tolist(),
                                       "m": (rng.integers(-64, 64, (1 + i % 3, 4)) / 16).tolist()},
                         payload={"i": i}) for i in range(60)]
    for cl in (c, local):
        cl.create_collection("mv", vectors_config={"text": m.VectorParams(size=8, distance=m.Distance.COSINE),
                                                   "m": mv})
        cl.upsert("mv", points=pts, wait=True)
        cl.create_collection("mv1", vectors_config=mv)
        cl.upsert("mv1", points=[m.PointStruct(id=p.id, vector=p.vector["m"]) for p in pts], wait=True)
    for n in ("mv", "mv1"):
        got, want = c.get_collection(n).config.params, local.get_collection(n).config.params
        assert got.vectors == want.vectors
    q = (rng.integers(-64, 64, (2, 4)) / 16).tolist()
    for n, using in (("mv", "m"), ("mv1", None)):
        for query in (q, m.RecommendQuery(recommend=m.RecommendInput(positive=[3], negative=[5])),
                      m.DiscoverQuery(discover=m.DiscoverInput(target=q, context=[
                          m.ContextPair(positive=3, negative=5)]))):
            kw = dict(query=query, using=using, limit=6, with_payload=True)
            _same_hits(c.query_points(n, **kw).points, local.query_points(n, **kw).points)
        _same_records(c.retrieve(n, list(range(8)), with_vectors=True),
                      local.retrieve(n, list(range(8)), with_vectors=True))
    import httpx

    r = httpx.put(f"{url}/collections/mv1/points?wait=true", timeout=60,
                  json={"points": [{"id": 1, "vector": [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]]}]})
    assert r.status_code == 400 and "dim 4" in r.json()["status"]["error"], r.text


def test_mem0_default_store(tmp_path):
    """mem0's Qdrant store with its defaults (issue 38): its first write creates an unnamed Cosine
    vector with ``on_disk=False`` and a ``bm25`` sparse vector with the IDF modifier, then keyword
    payload indexes; memories with real MiniLM embeddings are inserted, searched (filtered by user,
    and by a datetime range, as mem0 writes it), updated, listed and deleted as on local mode."""
    pytest.importorskip("mem0")
    from mem0.vector_stores.qdrant import Qdrant

    from slimvec.encoder import Encoder

    texts = ["likes green tea", "works as a nurse", "has a dog named Rex", "lives in Lyon",
             "plays the cello", "is allergic to nuts", "runs marathons", "reads sci-fi"]
    vecs = Encoder().encode(texts + ["what pet does she have?"])
    ids = [f"00000000-0000-0000-0000-{i:012d}" for i in range(len(texts))]
    pays = [{"data": t, "user_id": "alice" if i % 2 else "bob",
             "created_at": f"2024-0{1 + i % 6}-10T12:00:00+00:00"} for i, t in enumerate(texts)]
    root = tmp_path / "root"
    root.mkdir()
    with Server(root) as srv:
        store = Qdrant(collection_name="mem0", embedding_model_dims=384, url=srv.url)
        local = Qdrant(collection_name="mem0", embedding_model_dims=384,
                       client=QdrantClient(":memory:"))
        assert store._has_bm25_slot  # the sparse slot exists, so mem0 writes BM25 vectors to it
        for st in (store, local):
            st.insert(vecs[:-1].tolist(), payloads=pays, ids=ids)
            st.update(ids[2], payload={**pays[2], "data": "has a dog named Max"})
            st.delete(ids[5])
        q = vecs[-1].tolist()
        for flt in (None, {"user_id": "bob"}, {"created_at": {"gte": "2024-03-01T00:00:00+00:00"}}):
            got, want = store.search("pet", q, top_k=3, filters=flt), local.search("pet", q, top_k=3, filters=flt)
            assert [p.id for p in got] == [p.id for p in want] and got
            assert abs(got[0].score - want[0].score) < 1e-3 and got[0].payload == want[0].payload
        assert store.get(ids[2]).payload["data"] == "has a dog named Max"
        assert store.get(ids[5]) is None
        assert sorted(p.id for p in store.list({"user_id": "alice"})[0]) == \
            sorted(p.id for p in local.list({"user_id": "alice"})[0])
