"""The Qdrant-compatible REST subset of ``slimvec serve`` through the real qdrant-client (issue 26):
small vector-only collections (fast). The 5,000-sentence congruence run against qdrant-client's own
local mode is tests/service/test_qdrant_compat.py (slow tier)."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from tests.service.server import Server

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import AsyncQdrantClient, QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

DIM = 16
#: a small recipe (8 of 16 dimensions) that keeps float32 full vectors and rescores
RECIPE = "pca:8|qdrant-edge|rescore=4,keep_full=float32"


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(7)
    return rng.standard_normal((120, DIM)).astype(np.float32)


def _unit(X):
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _create(client, name, fit_after=1000, **params):
    client.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE),
                             metadata={"slimvec_recipe": RECIPE, "slimvec_fit_after": fit_after},
                             **params)


def _ids(n):
    """Unsigned ints (0, beyond int64) and UUIDs, alternating."""
    out = []
    for i in range(n):
        out.append(i if i % 3 == 0 else 2 ** 63 + i if i % 3 == 1 else str(uuid.UUID(int=i + 1)))
    return out


def test_root_and_collection_lifecycle(client, srv):
    import httpx

    root = httpx.get(srv.url + "/").json()
    assert root["version"].count(".") == 2 and "title" in root
    assert not client.collection_exists("life")
    _create(client, "life")
    assert client.collection_exists("life")
    assert "life" in [c.name for c in client.get_collections().collections]
    info = client.get_collection("life")
    assert info.config.params.vectors.size == DIM
    assert info.config.params.vectors.distance == m.Distance.COSINE
    assert info.points_count == 0
    assert info.config.metadata["slimvec_recipe"] == RECIPE
    with pytest.raises(UnexpectedResponse) as exc:  # Qdrant: 409 on an existing name
        _create(client, "life")
    assert exc.value.status_code == 409
    assert client.delete_collection("life") is True
    assert not client.collection_exists("life")
    with pytest.raises(UnexpectedResponse) as exc:
        client.get_collection("life")
    assert exc.value.status_code == 404 and "doesn't exist" in exc.value.content.decode()


@pytest.mark.parametrize("fit_after", [1000, 40], ids=["pending", "fitted"])
def test_ids_payloads_vectors_round_trip(client, X, fit_after):
    """Unsigned ints (also beyond int64) and UUIDs come back exactly as written; payloads exact;
    with_vectors the written vector normalised (Cosine, as Qdrant); searchable before the fit."""
    name = f"rt{fit_after}"
    _create(client, name, fit_after=fit_after)
    ids = _ids(len(X))
    client.upsert(name, points=[m.PointStruct(id=ids[i], vector=X[i].tolist(),
                                              payload={"n": i, "tag": f"t{i % 5}", "nested": {"a": [i]}})
                                for i in range(60)], wait=True)
    client.upsert(name, points=m.Batch(ids=ids[60:], vectors=X[60:].tolist(),
                                       payloads=[{"n": i, "tag": f"t{i % 5}", "nested": {"a": [i]}}
                                                 for i in range(60, len(X))]), wait=True)
    assert client.count(name).count == len(X)
    state = "pending" if fit_after > len(X) else "ready"
    import httpx

    assert httpx.get(client._client.rest_uri + f"/indexes/{name}").json()["state"] == state
    # upper-case UUIDs are the same points, as in Qdrant
    asked = [ids[1], ids[2].upper(), ids[3], 10 ** 9]
    recs = client.retrieve(name, ids=asked, with_vectors=True)
    assert sorted(map(str, (r.id for r in recs))) == sorted(map(str, ids[1:4]))
    for r in recs:
        i = ids.index(r.id)
        assert r.payload == {"n": i, "tag": f"t{i % 5}", "nested": {"a": [i]}}
        np.testing.assert_allclose(r.vector, _unit(X[i]), atol=1e-5)
    for i in (0, 1, 2, 77):
        hit = client.query_points(name, query=X[i].tolist(), limit=3, with_payload=True).points
        assert hit[0].id == ids[i] and hit[0].payload["n"] == i
        assert hit[0].score == pytest.approx(1.0, abs=1e-4)
    client.delete_collection(name)


def test_limit_offset_threshold_batch(client, X):
    _create(client, "lot", fit_after=40)
    client.upsert("lot", points=m.Batch(ids=list(range(len(X))), vectors=X.tolist()), wait=True)
    q = X[5].tolist()
    full = client.query_points("lot", query=q, limit=10).points
    assert len(full) == 10 and full[0].id == 5
    seven = client.query_points("lot", query=q, limit=7).points  # an offset page: the same search
    assert [p.id for p in client.query_points("lot", query=q, limit=4, offset=3).points] == \
        [p.id for p in seven[3:7]]
    cut = full[4].score
    kept = client.query_points("lot", query=q, limit=10, score_threshold=cut).points
    assert kept and all(p.score >= cut for p in kept) and len(kept) < 10
    assert all(p.payload == {} and p.vector is None for p in full)  # client defaults: payload, no vector
    batch = client.query_batch_points("lot", requests=[m.QueryRequest(query=X[i].tolist(), limit=2)
                                                       for i in (1, 2)])
    assert [r.points[0].id for r in batch] == [1, 2]
    client.delete_collection("lot")


def test_bad_point_refuses_the_request(client, X):
    """A wrong-dimension or NaN vector anywhere refuses the whole request (as Qdrant), naming
    the point; nothing of it is written."""
    _create(client, "bad")
    good = [m.PointStruct(id=i, vector=X[i].tolist()) for i in range(3)]
    for bad, words in ((m.PointStruct(id=9, vector=X[0][:5].tolist()), "expected dim: 16, got 5"),
                       (m.PointStruct(id=9, vector=[float("nan")] * DIM), "NaN")):
        with pytest.raises(UnexpectedResponse) as exc:
            client.upsert("bad", points=[*good, bad], wait=True)
        assert exc.value.status_code == 400 and words in exc.value.content.decode()
        assert "point 9" in exc.value.content.decode()
    with pytest.raises(UnexpectedResponse) as exc:
        client.upsert("bad", points=[m.PointStruct(id=1, vector=X[0].tolist(),
                                                   payload={"source_id": 3})], wait=True)
    assert exc.value.status_code == 400 and "source_id" in exc.value.content.decode()
    assert client.count("bad").count == 0
    client.delete_collection("bad")


@pytest.mark.parametrize("call, feature", [
    (lambda c: c.create_collection("u2", vectors_config=m.VectorParams(
        size=4, distance=m.Distance.MANHATTAN)), "distance 'Manhattan'"),
    (lambda c: c.create_collection("u5", vectors_config=m.VectorParams(
        size=4, distance=m.Distance.COSINE), sharding_method=m.ShardingMethod.CUSTOM),
     "'sharding_method'"),
    (lambda c: c.create_vector_name("unsup", "d2", m.DenseVectorNameConfig(dense=m.DenseVectorConfig(
        size=4, distance=m.Distance.DOT))), "the dense vector 'd2'"),
    (lambda c: c.upsert("unsup", points=[m.PointStruct(id=1, vector=[[0.1] * DIM] * 2)]),
     "multivectors"),
    (lambda c: c.create_shard_key("unsup", shard_key="k"), "/shards"),
], ids=["manhattan", "sharding",
        "dense-vector-added", "multivector-upsert", "shard-key"])
def test_unsupported_is_a_400_naming_it(client, call, feature):
    if not client.collection_exists("unsup"):
        _create(client, "unsup")
    with pytest.raises(UnexpectedResponse) as exc:
        call(client)
    body = exc.value.content.decode()
    assert exc.value.status_code == 400, body
    assert feature in body and "not supported" in body
    assert not any(client.collection_exists(f"u{i}") for i in (2, 5))


def test_api_key_as_qdrant(tmp_path, X):
    """Qdrant's ``api-key`` header is the service's key; without it every route is refused."""
    root = tmp_path / "root"
    root.mkdir()
    with Server(root, env={"SLIMVEC_API_KEY": "k-secret"}) as s:
        good = QdrantClient(url=s.url, api_key="k-secret", https=False)
        _create(good, "keyed")
        good.upsert("keyed", points=[m.PointStruct(id=1, vector=X[1].tolist())], wait=True)
        assert good.count("keyed").count == 1
        bad = QdrantClient(url=s.url, api_key="wrong", https=False)
        with pytest.raises(UnexpectedResponse) as exc:
            bad.count("keyed")
        assert exc.value.status_code == 401
        with pytest.raises(UnexpectedResponse):
            QdrantClient(url=s.url).get_collections()


def test_async_client(srv, X):
    import asyncio

    async def run():
        c = AsyncQdrantClient(url=srv.url, timeout=60)
        await c.create_collection("as", vectors_config=m.VectorParams(
            size=DIM, distance=m.Distance.COSINE), metadata={"slimvec_recipe": RECIPE})
        await c.upsert("as", points=[m.PointStruct(id=i, vector=X[i].tolist(), payload={"i": i})
                                     for i in range(20)], wait=True)
        res = await c.query_points("as", query=X[4].tolist(), limit=1, with_payload=True)
        count = (await c.count("as")).count
        await c.delete_collection("as")
        await c.close()
        return res.points[0], count

    top, count = asyncio.run(run())
    assert (top.id, top.payload, count) == (4, {"i": 4}, 20)


def test_readme_two_line_switch(tmp_path):
    """The README's Qdrant-compatible section, run as written: its ``slimvec serve`` line (on a
    free port instead of 6333) and its Python block, unchanged but for that port."""
    import re
    import subprocess
    import sys

    from tests.conftest import README

    text = README.read_text("utf-8")
    start = text.index("### Qdrant-compatible API")
    section = text[start:text.index("\n## ", start)]
    serve = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip()
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert serve == "slimvec serve --root ./indexes --port 6333"
    assert 'QdrantClient(url="http://127.0.0.1:6333")' in code
    (tmp_path / "indexes").mkdir()
    with Server(tmp_path / "indexes") as s:
        out = subprocess.run([sys.executable, "-c", code.replace(":6333", f":{s.port}")],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "1 {'lang': 'en'}"


def _lifecycle(c, X, metadata=None):
    """Filters, scroll, deletes and payload updates, observed (what must equal local mode's)."""
    c.create_collection("lc", vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE),
                        metadata=metadata)
    c.upsert("lc", points=[m.PointStruct(id=_ids(60)[i], vector=X[i].tolist(),
                                         payload={"g": i % 3, "s": f"x{i}", "t": [i % 2, 7],
                                                  "d": f"2024-05-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"})
                           for i in range(60)], wait=True)
    g = lambda v: m.Filter(must=[m.FieldCondition(key="g", match=m.MatchValue(value=v))])  # noqa: E731
    c.create_payload_index("lc", field_name="g", field_schema=m.PayloadSchemaType.INTEGER, wait=True)
    c.create_payload_index("lc", field_name="d", field_schema=m.PayloadSchemaType.DATETIME, wait=True)
    dated = m.Filter(must=[m.FieldCondition(key="d", range=m.DatetimeRange(gte="2024-05-10", lt="2024-05-20T12:00:00+02:00"))])
    out = {"count_g1": c.count("lc", count_filter=g(1)).count, "count_dated": c.count("lc", count_filter=dated).count,
           "dated": sorted(str(h.id) for h in c.query_points("lc", query=X[4].tolist(), query_filter=dated, limit=5).points),
           "schema": sorted(c.get_collection("lc").payload_schema)}
    hits = c.query_points("lc", query=X[4].tolist(), query_filter=g(1), limit=5).points
    out["filtered_ok"] = all(h.payload["g"] == 1 for h in hits) and len(hits) == 5
    pages, offset = [], None
    for _ in range(20):
        page, offset = c.scroll("lc", limit=7, offset=offset)
        pages.extend((str(p.id), p.payload["s"]) for p in page)
        if offset is None:
            break
    out["scroll"] = sorted(pages)
    c.delete("lc", points_selector=m.PointIdsList(points=[_ids(60)[1], _ids(60)[4]]), wait=True)
    c.delete("lc", points_selector=m.FilterSelector(filter=g(2)), wait=True)
    c.set_payload("lc", payload={"flag": True}, points=g(0), wait=True)
    c.overwrite_payload("lc", payload={"only": 1}, points=[_ids(60)[3]], wait=True)
    c.delete_payload("lc", keys=["s"], points=[_ids(60)[6]], wait=True)
    out["count"] = c.count("lc").count
    out["records"] = sorted((str(r.id), json.dumps(r.payload, sort_keys=True))
                            for r in c.retrieve("lc", ids=[_ids(60)[i] for i in range(10)]))
    after = c.query_points("lc", query=X[4].tolist(), limit=10).points
    out["after_ok"] = all(h.payload.get("g") != 2 and h.id != _ids(60)[4] for h in after)
    c.delete_collection("lc")
    return out


@pytest.mark.parametrize("fit_after", [1000, 30], ids=["pending", "fitted"])
def test_lifecycle_congruent_with_local_mode(tmp_path, X, fit_after):
    """Filtered count / query, scroll by pages, delete by ids and by filter, set / overwrite /
    delete payload: what slimvec serve answers equals qdrant-client's own local mode, before the
    reducer is fitted (pending rows) and after."""
    root = tmp_path / "root"
    root.mkdir()
    ref = _lifecycle(QdrantClient(":memory:"), X)
    with Server(root) as s:
        got = _lifecycle(QdrantClient(url=s.url, timeout=60), X,
                         {"slimvec_recipe": RECIPE, "slimvec_fit_after": fit_after})
    # local mode keeps no payload indexes (it warns so): only the server shows the declared one
    assert got.pop("schema") == ["d", "g"] and ref.pop("schema") == []
    assert got == ref
    assert got["filtered_ok"] and got["after_ok"] and got["count"] == 38


def test_datatype_picks_the_kept_vectors(client, srv):
    """Qdrant keeps float32 vectors unless ``datatype`` says float16: a collection that names no
    recipe re-ranks from float32 kept vectors (scores as Qdrant's), float16 when asked; a
    datatype that disagrees with a named recipe, or one not kept here, is a 400 naming it."""
    import httpx

    def kept(name):
        return httpx.get(f"{srv.url}/collections/{name}").json()["result"]["slimvec"]["keep_full"]

    client.create_collection("dt32", vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE))
    client.create_collection("dt16", vectors_config=m.VectorParams(
        size=DIM, distance=m.Distance.DOT, datatype=m.Datatype.FLOAT16))
    assert (kept("dt32"), kept("dt16")) == ("float32", "float16")
    assert client.get_collection("dt16").config.params.vectors.datatype == m.Datatype.FLOAT16
    bad = [({"datatype": "float16"}, {"slimvec_recipe": RECIPE}, "disagrees with metadata.slimvec_recipe"),
           ({"datatype": "uint8"}, {}, "vectors.datatype 'uint8'")]
    for extra, meta, said in bad:
        r = httpx.put(f"{srv.url}/collections/dtbad", json={
            "vectors": {"size": DIM, "distance": "Cosine", **extra}, "metadata": meta})
        assert r.status_code == 400 and said in r.text, r.text
    assert not client.collection_exists("dtbad")
