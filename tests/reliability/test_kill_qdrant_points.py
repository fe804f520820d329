"""A Qdrant collection's point is whole or absent through kill -9 (issue 48 F3): a real
``slimvec serve`` killed at a random moment of a ``wait=true`` upsert of existing points (new
dense, named, sparse and multivectors and payload) or of a delete, then restarted; every point
must then carry one generation in all its vectors and its payload, no acknowledged write may be
lost and no acknowledged delete may come back. Points carry their generation ``g`` everywhere:
``payload.gen``, the ratio of the Cosine vector's first two components, the Dot vector's first
component, the multivector's first value and the sparse vector's value."""

from __future__ import annotations

import threading
import time
from functools import partial

import numpy as np
import pytest

from tests.service.server import Server

pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402

N, TRIALS, NEW = 300, 20, 40  # 2 * TRIALS kills: 20 during upserts, 20 during deletes
RECIPE = "none|faiss:HNSW16,SQ8|rescore=10,keep_full=float32"


def _point(i: int, g: int) -> m.PointStruct:
    x = float(g + 1)
    return m.PointStruct(id=i, payload={"gen": g, "i": i}, vector={
        "text": [1.0, x, 0.0, 0.0], "img": [x, 0.0, 0.5, 0.0], "multi": [[x, 0.0], [0.0, 1.0]],
        "s": m.SparseVector(indices=[i % 50, 50 + i % 7], values=[x, 1.0])})


def _gens(p: m.Record) -> set[float]:
    """The generations a point's parts say it has (one when it is whole)."""
    v = p.vector or {}
    out = {float(p.payload["gen"])}
    if "text" in v:
        out.add(round(v["text"][1] / v["text"][0] - 1, 3))
    if "img" in v:
        out.add(round(v["img"][0] - 1, 3))
    if "multi" in v:
        out.add(round(v["multi"][0][0] - 1, 3))
    if "s" in v:
        out.add(round(v["s"].values[v["s"].indices.index(p.id % 50)] - 1, 3))
    assert set(v) == {"text", "img", "multi", "s"}, f"point {p.id} lacks vectors: {sorted(v)}"
    return out


def _client(srv: Server) -> QdrantClient:
    return QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)


def _all(c: QdrantClient) -> dict[int, m.Record]:
    out: dict[int, m.Record] = {}
    offset = None
    while True:
        page, offset = c.scroll("k", limit=1000, offset=offset, with_vectors=True)
        out.update({int(p.id): p for p in page})
        if offset is None:
            return out


def _kill_during(srv: Server, write, delay: float) -> bool:
    """Run ``write`` in a thread, kill -9 the server after ``delay`` s; whether it answered."""
    done = threading.Event()

    def run() -> None:
        try:
            write()
            done.set()
        except Exception:  # noqa: BLE001 - the kill cuts the request
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(delay)
    srv.kill()
    t.join(30)
    return done.is_set()


def test_points_stay_whole_through_kill_9(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    rng = np.random.default_rng(48)
    srv = Server(root).start()
    c = _client(srv)
    c.create_collection("k", vectors_config={
        "text": m.VectorParams(size=4, distance=m.Distance.COSINE),
        "img": m.VectorParams(size=4, distance=m.Distance.DOT),
        "multi": m.VectorParams(size=2, distance=m.Distance.DOT, multivector_config=m.MultiVectorConfig(
            comparator=m.MultiVectorComparator.MAX_SIM))},
        sparse_vectors_config={"s": m.SparseVectorParams()},
        metadata={"slimvec_recipe": RECIPE, "slimvec_fit_after": 40})
    c.upsert("k", points=[_point(i, 0) for i in range(N)], wait=True)
    t0 = time.perf_counter()
    c.upsert("k", points=[_point(i, 0) for i in range(N)], wait=True)
    span = time.perf_counter() - t0  # how long one whole write takes: the kills land inside it
    gen, torn, lost, back, answered = 0, 0, 0, 0, 0
    for trial in range(2 * TRIALS):
        victims = sorted(rng.choice(N, 5, replace=False).tolist())
        c.delete("k", points_selector=m.PointIdsList(points=victims), wait=True)  # acknowledged
        if trial % 2 == 0:  # an upsert of every point (and a few new ones) at the next generation
            batch = [_point(i, gen + 1) for i in range(N + NEW) if i not in victims]
            ok = _kill_during(srv, partial(c.upsert, "k", points=batch, wait=True),
                              float(rng.uniform(0, span * 1.5)))
        else:  # a delete of a random fifth
            gone = sorted(rng.choice([i for i in range(N) if i not in victims], N // 5,
                                     replace=False).tolist())
            ok = _kill_during(srv, partial(c.delete, "k", points_selector=m.PointIdsList(points=gone),
                                           wait=True), float(rng.uniform(0, span)))
        answered += ok
        srv = Server(root).start()
        c = _client(srv)
        pts = _all(c)
        gens = {i: _gens(p) for i, p in pts.items()}
        torn += sum(len(g) > 1 for g in gens.values())
        back += sum(v in pts for v in victims)
        if trial % 2 == 0:
            lost += sum(i not in pts for i in range(N) if i not in victims)
            if ok:
                lost += sum(gens.get(i) != {gen + 1} for i in range(N + NEW) if i not in victims)
            seen = {g for gs in gens.values() for g in gs}
            assert seen <= {gen, gen + 1}, seen
            gen = max(seen)
        else:
            lost += sum(i not in pts for i in range(N) if i not in victims and i not in gone)
            if ok:
                back += sum(i in pts for i in gone)
        hits = c.query_points("k", query=m.SparseVector(indices=list(range(57)), values=[1.0] * 57),
                              using="s", limit=10).points
        assert len(hits) == min(10, len(pts)), "a sparse query came back short"
        c.upsert("k", points=[_point(i, gen) for i in range(N)], wait=True)  # the next trial's start
        assert torn == 0 and lost == 0 and back == 0, (trial, torn, lost, back)
    srv.terminate()
    assert 0 < answered < 2 * TRIALS, f"{answered} of {2 * TRIALS} writes answered: the kills " \
                                      "did not land inside the writes"
