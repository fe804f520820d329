"""Congruence (issue 26): one scenario through the real qdrant-client, sync and async, run against
``slimvec serve`` on loopback and against qdrant-client's own local mode (``":memory:"``), on
5,000 real MiniLM sentence vectors with payloads. Counts, retrieved payloads and scroll contents
must be identical; query top-10 overlap >= 0.95 with the default recipe; filters never violated.
Then kill -9 after acknowledged ``wait=True`` upserts loses none of them. Slow tier."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import bundled_sentences
from tests.service.server import Server

pytest.importorskip("qdrant_client")
from qdrant_client import AsyncQdrantClient, QdrantClient  # noqa: E402
from qdrant_client import models as m

N, NQ = 5000, 40
LANGS = ("en", "fr", "de")
FILTER = {"must": [{"key": "lang", "match": {"value": "en"}},
                   {"key": "row", "range": {"lt": 3000}}]}


@pytest.fixture(scope="module")
def data(encoder):
    """(5000 + 40, 384) MiniLM vectors of the bundled sentences (the suite's encoding cache)."""
    from slimvec.benchmarks.encoding_cache import EncodingCache

    texts = bundled_sentences(N + NQ)
    cache = Path(os.environ.get("SLIMVEC_TEST_CACHE", Path.home() / ".cache" / "slimvec-tests"))
    X = EncodingCache(cache / "encodings", encoder.fingerprint).encode(encoder, texts)
    return texts, np.asarray(X, dtype=np.float32)


def point_id(i: int) -> int | str:
    return i if i % 2 else str(uuid.uuid5(uuid.NAMESPACE_URL, f"slimvec/{i}"))


def payload(i: int, text: str) -> dict:
    return {"row": i, "lang": LANGS[i % 3], "group": i % 10, "text": text,
            "tags": ["even" if i % 2 == 0 else "odd", f"g{i % 7}"]}


class Sync:
    """The sync client behind awaitable methods, so one async scenario drives both clients."""

    def __init__(self, client: QdrantClient) -> None:
        self.client = client

    def __getattr__(self, name: str):
        fn = getattr(self.client, name)

        async def call(*args, **kwargs):
            return fn(*args, **kwargs)

        return call


def _violations(points, flt) -> list:
    from slimvec.filters import parse_filter

    f = parse_filter(flt)
    return [p.id for p in points if not f.matches(p.id, p.payload or {})]


async def scenario(c, name: str, texts: list[str], X: np.ndarray) -> dict:
    """What qdrant-client users do, observed: returns what must agree between the two servers."""
    out: dict = {}
    await c.create_collection(name, vectors_config=m.VectorParams(size=X.shape[1],
                                                                  distance=m.Distance.COSINE))
    for lo in range(0, N, 500):
        await c.upsert(name, points=[m.PointStruct(id=point_id(i), vector=X[i].tolist(),
                                                   payload=payload(i, texts[i]))
                                     for i in range(lo, min(N, lo + 500))], wait=True)
    out["count"] = (await c.count(name, exact=True)).count
    queries = X[N:N + NQ]

    async def top10(flt=None):
        res = []
        for q in queries:
            r = await c.query_points(name, query=q.tolist(), limit=10, query_filter=flt,
                                     with_payload=True)
            res.append(r.points)
        return res

    out["top"] = await top10()
    out["top_f"] = await top10(m.Filter.model_validate(FILTER))
    wanted = [point_id(i) for i in range(0, N, 50)]
    recs = await c.retrieve(name, ids=wanted, with_payload=True)
    out["retrieved"] = sorted((str(r.id), json.dumps(r.payload, sort_keys=True)) for r in recs)
    out["scroll"] = await scroll_all(c, name)
    out["count_f"] = (await c.count(name, count_filter=m.Filter.model_validate(FILTER))).count
    await c.delete(name, points_selector=m.PointIdsList(points=[point_id(i) for i in range(100)]),
                   wait=True)
    await c.delete(name, points_selector=m.FilterSelector(filter=m.Filter(must=[
        m.FieldCondition(key="group", match=m.MatchValue(value=3))])), wait=True)
    await c.set_payload(name, payload={"flag": True}, points=m.Filter(must=[
        m.FieldCondition(key="lang", match=m.MatchValue(value="fr"))]), wait=True)
    out["count_after"] = (await c.count(name)).count
    out["top_after"] = await top10()
    out["scroll_after"] = await scroll_all(c, name)
    return out


async def scroll_all(c, name: str) -> list:
    seen, offset = [], None
    for _ in range(100):
        points, offset = await c.scroll(name, limit=777, offset=offset, with_payload=True)
        seen.extend((str(p.id), json.dumps(p.payload, sort_keys=True)) for p in points)
        if offset is None:
            break
    return sorted(seen)


def _overlap(a, b) -> float:
    return float(np.mean([len({p.id for p in x} & {p.id for p in y}) / max(len(y), 1)
                          for x, y in zip(a, b)]))


def _compare(got: dict, ref: dict) -> None:
    for key in ("count", "count_f", "count_after", "retrieved", "scroll", "scroll_after"):
        assert got[key] == ref[key], key
    assert got["count"] == N
    for key in ("top", "top_f", "top_after"):
        logging.getLogger(__name__).info("top-10 overlap %s: %.4f", key, _overlap(got[key], ref[key]))
        assert _overlap(got[key], ref[key]) >= 0.95, (key, _overlap(got[key], ref[key]))
    for points in got["top_f"]:
        assert not _violations(points, FILTER)
    deleted = {str(point_id(i)) for i in range(100)}
    for points in got["top_after"]:
        assert not {str(p.id) for p in points} & deleted
        assert all(p.payload["group"] != 3 for p in points)
        assert all(p.payload.get("flag") is True for p in points if p.payload["lang"] == "fr")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("qcompat") / "root"
    root.mkdir()
    with Server(root) as s:
        yield s


@pytest.fixture(scope="module")
def reference(data):
    texts, X = data
    return asyncio.run(scenario(Sync(QdrantClient(":memory:")), "ref", texts, X))


def test_sync_client_congruent(server, data, reference):
    texts, X = data
    client = QdrantClient(url=server.url, timeout=300)
    _compare(asyncio.run(scenario(Sync(client), "sync", texts, X)), reference)


def test_async_client_congruent(server, data, reference):
    texts, X = data

    async def run():
        c = AsyncQdrantClient(url=server.url, timeout=300)
        try:
            return await scenario(c, "async", texts, X)
        finally:
            await c.close()

    _compare(asyncio.run(run()), reference)


def test_kill9_keeps_acknowledged_upserts(tmp_path, data):
    """Every upsert answered (wait=true) before a kill -9 is there after the restart, with its
    payload; a batch still in flight may or may not be, never half."""
    import threading

    _texts, X = data
    root = tmp_path / "root"
    root.mkdir()
    acked: list[int] = []
    srv = Server(root).start()
    client = QdrantClient(url=srv.url, timeout=60)
    client.create_collection("k9", vectors_config=m.VectorParams(size=X.shape[1],
                                                                 distance=m.Distance.COSINE),
                             metadata={"slimvec_fit_after": 200})
    stop = threading.Event()

    def writer():
        for lo in range(0, N, 50):
            if stop.is_set():
                return
            try:
                client.upsert("k9", points=[m.PointStruct(id=point_id(i), vector=X[i].tolist(),
                                                          payload={"row": i})
                                            for i in range(lo, lo + 50)], wait=True)
            except Exception:  # noqa: BLE001 - the server was killed under it
                return
            acked.extend(range(lo, lo + 50))

    t = threading.Thread(target=writer)
    t.start()
    for _ in range(600):  # until a few batches were acknowledged after the fit (bounded)
        if len(acked) >= 400:
            break
        t.join(0.1)
    srv.kill()
    stop.set()
    t.join(60)
    assert len(acked) >= 400
    with Server(root) as again:
        c = QdrantClient(url=again.url, timeout=60)
        assert c.count("k9").count >= len(acked)
        got = c.retrieve("k9", ids=[point_id(i) for i in acked], with_payload=True)
        assert sorted(r.payload["row"] for r in got) == sorted(acked)
