"""A Qdrant collection is one thing to every route (issue 48 F1, F2, F4): native writes cannot
tear its points, queries on a named or sparse vector fill their limit after deletes, a refused
batch writes nothing while any finite vector is taken, a snapshot holds the whole collection and
a restore brings back exactly that, and deleting it deletes all of it. Through the real
qdrant-client over REST against a real ``slimvec serve``."""

from __future__ import annotations

import httpx
import pytest

from tests.service.server import Server

pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

N = 20
RECIPE = "none|faiss:HNSW16,SQ8|rescore=10,keep_full=float32"


def _point(i: int) -> m.PointStruct:
    return m.PointStruct(id=i, payload={"i": i, "even": i % 2 == 0}, vector={
        "text": [1.0, 0.1 * i, 0.0, 0.5], "img": [0.2 * i, 1.0, 0.3, 0.0],
        "s": m.SparseVector(indices=[1, 2 + i], values=[1.0 + i / 10, 0.5])})


def _create(c: QdrantClient, name: str, fit_after: int = 10) -> None:
    c.create_collection(name, vectors_config={
        "text": m.VectorParams(size=4, distance=m.Distance.DOT),
        "img": m.VectorParams(size=4, distance=m.Distance.COSINE)},
        sparse_vectors_config={"s": m.SparseVectorParams()},
        metadata={"slimvec_recipe": RECIPE, "slimvec_fit_after": fit_after})
    c.upsert(name, points=[_point(i) for i in range(N)], wait=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwhole") / "root"
    root.mkdir()
    with Server(root) as srv:
        yield srv, root


def _sparse_hits(c: QdrantClient, name: str, limit: int) -> list[int]:
    return [int(p.id) for p in c.query_points(name, query=m.SparseVector(indices=[1], values=[1.0]),
                                              using="s", limit=limit).points]


def test_native_writes_are_refused_and_reads_fill_their_limit(server):
    srv, _root = server
    c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
    _create(c, "f1")
    for path, body in (("delete", {"ids": [0, 1]}), ("payload", {"ids": [0], "fields": {"a": 1}}),
                       ("payload/delete", {"ids": [0], "keys": ["i"]}),
                       ("vectors", {"vectors": [{"id": 99, "vector": [1, 0, 0, 0]}]})):
        for index in ("f1", "f1~img"):
            r = httpx.post(f"{srv.url}/indexes/{index}/{path}", json=body, timeout=30)
            assert r.status_code == 422 and "Qdrant API" in r.text, (index, path, r.text)
    assert c.count("f1", exact=True).count == N
    c.delete("f1", points_selector=m.PointIdsList(points=list(range(5))), wait=True)
    assert len(_sparse_hits(c, "f1", 5)) == 5
    got = c.query_points("f1", query=[0.0, 1.0, 0.0, 0.0], using="img", limit=5).points
    assert len(got) == 5 and all(int(p.id) >= 5 for p in got)
    even = m.Filter(must=[m.FieldCondition(key="even", match=m.MatchValue(value=True))])
    got = c.query_points("f1", query=[0.0, 1.0, 0.0, 0.0], using="img", limit=20,
                         query_filter=even).points
    assert sorted(int(p.id) for p in got) == [i for i in range(5, N) if i % 2 == 0]


def test_a_refused_batch_writes_nothing_and_any_finite_vector_is_taken(server):
    srv, _root = server
    c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
    c.create_collection("f4", vectors_config=m.VectorParams(size=4, distance=m.Distance.DOT),
                        sparse_vectors_config={"s": m.SparseVectorParams()})
    c.upsert("f4", points=[m.PointStruct(id=0, vector={"": [1.0, 1, 1, 1]})], wait=True)
    tiny = [m.PointStruct(id=i, vector={"": [0.0001, 0, 0, 0] if i == 3 else [1.0 * i, 1, 1, 1],
                                        "s": m.SparseVector(indices=[i], values=[1.0])})
            for i in range(1, 6)]
    c.upsert("f4", points=tiny, wait=True)  # Qdrant takes [1e-4, 0, 0, 0]; so must slimvec
    assert c.count("f4", exact=True).count == 6
    bad = [m.PointStruct(id=10 + i, vector={"": [1.0, 2, 3, 4], "s": m.SparseVector(
        indices=[7], values=[1.0])}, payload={"k": i}) for i in range(3)]
    bad.append(m.PointStruct(id=20, vector={"": [1.0, 2, 3, 4], "s": m.SparseVector(
        indices=[7, 7], values=[1.0, 2.0])}))  # repeated index: refused
    with pytest.raises(UnexpectedResponse) as err:
        c.upsert("f4", points=bad, wait=True)
    assert err.value.status_code == 400
    assert c.count("f4", exact=True).count == 6
    assert c.query_points("f4", query=m.SparseVector(indices=[7], values=[1.0]), using="s",
                          limit=10).points == []


def _snapshot(url: str, name: str) -> str:
    r = httpx.post(f"{url}/indexes/{name}/snapshot", json={}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["snapshot"]


def _restore(url: str, name: str, snap: str, force: bool = False) -> None:
    r = httpx.post(f"{url}/indexes/{name}/restore", json={"snapshot": snap, "force": force},
                   timeout=300)
    assert r.status_code == 200, r.text


def test_a_snapshot_holds_the_whole_collection(server):
    srv, root = server
    c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
    _create(c, "f2")
    snap = _snapshot(srv.url, "f2")
    _restore(srv.url, "f2copy", snap)
    info = c.get_collection("f2copy").config.params
    assert info.vectors["text"].distance == m.Distance.DOT and set(info.vectors) == {"text", "img"}
    assert set(info.sparse_vectors or {}) == {"s"}
    assert c.count("f2copy", exact=True).count == N
    assert sorted(_sparse_hits(c, "f2copy", N)) == list(range(N))
    want = c.query_points("f2", query=[0.0, 1.0, 0.0, 0.0], using="img", limit=5).points
    got = c.query_points("f2copy", query=[0.0, 1.0, 0.0, 0.0], using="img", limit=5).points
    assert [p.id for p in got] == [p.id for p in want]
    c.delete("f2", points_selector=m.PointIdsList(points=[0, 1, 2]), wait=True)
    c.upsert("f2", points=[m.PointStruct(id=50, vector={"text": [1.0, 0, 0, 0]})], wait=True)
    _restore(srv.url, "f2", snap, force=True)  # over itself: exactly the snapshot's points
    back = {int(p.id): p for p in c.retrieve("f2", ids=[0, 1, 2, 50], with_vectors=True)}
    assert sorted(back) == [0, 1, 2]
    assert all(set(p.vector) == {"text", "img", "s"} for p in back.values())
    assert sorted(_sparse_hits(c, "f2", N)) == list(range(N))
    r = httpx.delete(f"{srv.url}/indexes/f2copy", timeout=60)
    assert r.status_code == 200, r.text
    assert not c.collection_exists("f2copy")
    assert not (root / ".qdrant" / "f2copy.json").exists()
    assert not (root / ".qdrant" / "f2copy.sparse").exists()
    assert not (root / "f2copy~img").exists() and not (root / "f2copy").exists()
