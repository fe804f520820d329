"""Issue 53: a fuller Qdrant drop-in against a real ``slimvec serve`` through qdrant-client over
REST, each result compared with qdrant-client's local mode (``QdrantClient(":memory:")``): counts
after every kind of write (deleting every point included), the query kinds refused by name, the
collection config echoed back, query / search groups and dense MMR."""

from __future__ import annotations

import numpy as np
import pytest

from tests.service.server import Server

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

DIM = 8


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("qfull") / "root"
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
    return np.random.default_rng(53).standard_normal((400, DIM)).astype(np.float32)


def _points(X, ids, **extra):
    return [m.PointStruct(id=int(i), vector=X[i].tolist(), payload={"i": int(i), "odd": int(i) % 2, **extra})
            for i in ids]


def _counts(c, name):
    odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=1))])
    ids = sorted(p.id for p in c.scroll(name, limit=1000)[0])
    return (c.count(name, exact=True).count, c.count(name, count_filter=odd, exact=True).count,
            c.get_collection(name).points_count, ids)


def _everything(X, n):
    every, odd = m.FilterSelector(filter=m.Filter()), m.Filter(must=[m.FieldCondition(
        key="odd", match=m.MatchValue(value=1))])
    return [
        ("upsert", lambda c, name: c.upsert(name, _points(X, range(n)), wait=True)),
        ("delete ids", lambda c, name: c.delete(name, m.PointIdsList(points=[0, 1, 2]), wait=True)),
        ("delete filter", lambda c, name: c.delete(name, m.FilterSelector(filter=m.Filter(must=[
            m.FieldCondition(key="i", range=m.Range(lt=10))])), wait=True)),
        ("set payload", lambda c, name: c.set_payload(name, {"odd": 1}, points=[10, 12], wait=True)),
        ("overwrite payload", lambda c, name: c.overwrite_payload(name, {"x": 1}, points=[11], wait=True)),
        ("clear payload", lambda c, name: c.clear_payload(name, m.FilterSelector(filter=odd), wait=True)),
        ("delete all ids", lambda c, name: c.delete(name, m.PointIdsList(points=list(range(n))), wait=True)),
        ("upsert after delete-all", lambda c, name: c.upsert(name, _points(X, range(5)), wait=True)),
        ("delete all, empty filter", lambda c, name: c.delete(name, every, wait=True)),
        ("upsert again", lambda c, name: c.upsert(name, _points(X, range(3, 9)), wait=True)),
    ]


@pytest.mark.parametrize(("fit_after", "n"), [(1000, 30), (50, 120)], ids=["pending", "fitted"])
def test_counts_after_every_write_as_local_mode(client, X, fit_after, n):
    """Issue 53 item 1: deleting every point (by ids, or by the empty filter haystack sends) left
    a collection still collecting its fit sample counting the points from before (a stale cache
    of the pending rows), and the empty filter was refused; counts, filtered counts,
    ``points_count`` and the scrolled ids match local mode's after every operation."""
    name, local = f"counts-{fit_after}", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, {"slimvec_fit_after": fit_after})):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE),
                            metadata=meta)
    for what, op in _everything(X, n):
        op(local, name)
        op(client, name)
        assert _counts(client, name) == _counts(local, name), what
