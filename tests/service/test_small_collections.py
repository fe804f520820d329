"""Small served collections (issue 40 item 3) and bounded requests (issue 39 F4), through real
``slimvec serve`` processes on loopback.

A collection below its fit threshold answers from its rows in memory: exact search, count and
get_collection without re-reading its journal; its writes share fsyncs, and every acknowledged
write survives a kill -9 (a journal line cut by the kill is dropped at the restart). Every size a
request names is capped, pending or fitted, native or Qdrant API, with an error naming the cap.
"""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest

from tests.service.conftest import LIMITS
from tests.service.server import Server

DIM = 16


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _create(http: httpx.Client, name: str, dim: int, fit_after: int | None = None) -> None:
    body: dict = {"vectors": {"size": dim, "distance": "Cosine"}}
    if fit_after is not None:
        body["metadata"] = {"slimvec_fit_after": fit_after}
    r = http.put(f"/collections/{name}", json=body)
    assert r.status_code == 200, r.text


def _upsert(http: httpx.Client, name: str, X: np.ndarray, ids: list[int], wait: bool = True,
            payload=lambda i: {"g": i % 5}) -> httpx.Response:
    points = [{"id": i, "vector": X[i].tolist(), "payload": payload(i)} for i in ids]
    return http.put(f"/collections/{name}/points", params={"wait": str(wait).lower()},
                    json={"points": points})


def _qerror(r: httpx.Response) -> str:
    return r.json()["status"]["error"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server (small body and batch limits) with a pending and a fitted collection of 200
    points, and a native pending and fitted index."""
    root = tmp_path_factory.mktemp("small") / "root"
    root.mkdir()
    X = np.random.default_rng(3).standard_normal((200, DIM)).astype(np.float32)
    with Server(root, *LIMITS) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        for name, fit_after in (("pending", None), ("fitted", 40)):
            _create(http, name, DIM, fit_after)
            for lo in range(0, 200, 50):
                assert _upsert(http, name, X, list(range(lo, lo + 50))).status_code == 200
        states = {n: http.get(f"/indexes/{n}").json()["state"] for n in ("pending", "fitted")}
        assert states == {"pending": "pending", "fitted": "ready"}, states
        yield srv, http, X


@pytest.mark.parametrize("name", ["pending", "fitted"])
def test_qdrant_sizes_are_capped_with_400s_naming_the_cap(served, name):
    _srv, http, X = served
    q = X[0].tolist()
    for body in ({"query": q, "offset": 10_000_000, "limit": 1},  # took 13.6 s and 900 MiB
                 {"query": q, "limit": 10 ** 12},  # was a 500 MemoryError
                 {"query": q, "offset": 2 ** 63 - 1, "limit": 1},  # was a 500 ValueError
                 {"query": q, "offset": 9_995, "limit": 6}):
        r = http.post(f"/collections/{name}/points/query", json=body)
        assert r.status_code == 400 and "cap of 10,000" in _qerror(r), (body, r.status_code, r.text)
    r = http.post(f"/collections/{name}/points/scroll", json={"limit": 10 ** 12})
    assert r.status_code == 400 and "cap of 10,000" in _qerror(r), r.text
    many = list(range(100_001))
    for path in ("points", "points/delete"):
        r = http.post(f"/collections/{name}/{path}", json={"ids": many} if path == "points"
                      else {"points": many})
        assert r.status_code == 400 and "cap of 100,000" in _qerror(r), (path, r.text)
    r = http.post(f"/collections/{name}/points/query/batch",
                  json={"searches": [{"query": q, "limit": 1}] * 501})
    assert r.status_code == 413 and "the limit is 500" in _qerror(r), r.text
    # nothing was deleted, and a search inside the caps answers as before
    assert http.post(f"/collections/{name}/points/count", json={}).json()["result"]["count"] == 200
    r = http.post(f"/collections/{name}/points/query", json={"query": q, "offset": 3, "limit": 5})
    assert r.status_code == 200 and len(r.json()["result"]["points"]) == 5, r.text


@pytest.mark.parametrize("name", ["pending", "fitted"])
def test_native_sizes_are_capped_naming_the_cap(served, name):
    _srv, http, X = served
    r = http.post(f"/indexes/{name}/search", json={"vectors": [X[0].tolist()], "k": 1000,
                                                   "rescore": 1000})
    assert r.status_code == 422 and "cap of 100,000" in r.json()["detail"], r.text
    r = http.post(f"/indexes/{name}/search", json={"vectors": [X[0].tolist()] * 500, "k": 1000,
                                                   "rescore": 5})  # 2.5 M candidates in all
    assert r.status_code == 422 and "cap of 2,000,000" in r.json()["detail"], r.text
    r = http.post(f"/indexes/{name}/search", json={"vectors": [X[0].tolist()], "k": 10 ** 12})
    assert r.status_code == 422 and "1000" in r.json()["detail"], r.text
    for offset in (2 ** 63, 2 ** 80, -1):
        r = http.post(f"/indexes/{name}/scroll", json={"limit": 5, "offset": offset})
        assert r.status_code == 422 and "offset" in r.json()["detail"], (offset, r.text)
    r = http.post(f"/indexes/{name}/search", json={"vectors": [X[0].tolist()], "k": 10,
                                                   "rescore": 4})
    assert r.status_code == 200 and len(r.json()["hits"][0]) == 10, r.text


def _exact(X: np.ndarray, q: np.ndarray, k: int, ids: np.ndarray | None = None
           ) -> tuple[list[int], np.ndarray]:
    ids = np.arange(len(X)) if ids is None else ids
    sims = _unit(X[ids]) @ _unit(q)
    order = np.argsort(-sims, kind="stable")[:k]
    return ids[order].tolist(), sims[order]


def test_a_500_point_pending_collection_searches_exactly_and_answers_reads_at_once(tmp_path):
    """Below ``fit_after`` (1,000) a collection answers like any other: exact search with
    filters, payloads and pages; count and get_collection in a loop of 200 calls that ends in
    its bound (each used to re-read the whole journal: 0.3-0.8 s a call at this size)."""
    root = tmp_path / "root"
    root.mkdir()
    dim, n = 768, 500
    rng = np.random.default_rng(5)
    X = rng.standard_normal((n + 20, dim)).astype(np.float32)
    with Server(root) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        _create(http, "small", dim)
        for lo in range(0, n, 100):
            assert _upsert(http, "small", X, list(range(lo, lo + 100))).status_code == 200
        assert http.get("/indexes/small").json()["state"] == "pending"
        g2 = np.asarray([i for i in range(n) if i % 5 == 2])
        for q in X[n:n + 10]:
            r = http.post("/collections/small/points/query",
                          json={"query": q.tolist(), "limit": 10, "with_payload": True})
            got = r.json()["result"]["points"]
            want_ids, want_scores = _exact(X[:n], q, 10)
            assert [p["id"] for p in got] == want_ids
            np.testing.assert_allclose([p["score"] for p in got], want_scores, atol=1e-5)
            assert [p["payload"] for p in got] == [{"g": i % 5} for i in want_ids]
            flt = {"must": [{"key": "g", "match": {"value": 2}}]}
            r = http.post("/collections/small/points/query",
                          json={"query": q.tolist(), "limit": 5, "offset": 5, "filter": flt})
            assert [p["id"] for p in r.json()["result"]["points"]] == _exact(X[:n], q, 10, g2)[0][5:]
        # a delete and a payload change rewrite the journal: the rows in memory follow
        r = http.post("/collections/small/points/delete?wait=true", json={"points": list(range(10))})
        assert r.status_code == 200, r.text
        r = http.post("/collections/small/points/payload?wait=true",
                      json={"payload": {"g": 2}, "points": [10, 11]})
        assert r.status_code == 200, r.text
        q = X[n + 10]
        r = http.post("/collections/small/points/query",
                      json={"query": q.tolist(), "limit": 600,
                            "filter": {"must": [{"key": "g", "match": {"value": 2}}]}})
        want = _exact(X[:n], q, 600, np.asarray([10, 11] + [i for i in g2.tolist() if i >= 10]))[0]
        assert [p["id"] for p in r.json()["result"]["points"]] == want
        done, deadline = 0, time.monotonic() + 60
        while done < 200 and time.monotonic() < deadline:
            assert http.post("/collections/small/points/count", json={}).json()["result"]["count"] == n - 10
            assert http.get("/collections/small").json()["result"]["points_count"] == n - 10
            q = X[n + done % 20]
            r = http.post("/collections/small/points/query", json={"query": q.tolist(), "limit": 3})
            assert [p["id"] for p in r.json()["result"]["points"]] == \
                _exact(X[:n], q, 3, np.arange(10, n))[0]
            done += 1
        assert done == 200, f"only {done} of 200 rounds of count, get_collection and query in 60 s"


def _stream(url: str, X: np.ndarray, first: int, wait: bool, stop: threading.Event,
            sent: set[int], acked: list[int], lock: threading.Lock) -> None:
    """Batches of 5 points with ids ``first, first + 1, ...`` until stopped or cut."""
    with httpx.Client(base_url=url, timeout=60) as http:
        i = first
        while not stop.is_set() and i + 5 <= first + 250:
            ids = list(range(i, i + 5))
            i += 5
            with lock:
                sent.update(ids)
            try:
                r = _upsert(http, "grow", X, ids, wait=wait)
            except httpx.HTTPError:
                return  # the kill cut this request: not acknowledged
            if r.status_code == 200:
                with lock:
                    acked.extend(ids)


def _retrieve(url: str, ids: list[int]) -> dict[int, list[float]]:
    r = httpx.post(f"{url}/collections/grow/points", timeout=60,
                   json={"ids": ids, "with_vector": True, "with_payload": True})
    assert r.status_code == 200, r.text
    return {p["id"]: p["vector"] for p in r.json()["result"]}


def test_grouped_writes_survive_kill9_and_a_cut_journal_line(tmp_path):
    """Four writers (two wait=true, two wait=false) into one pending collection; kill -9 in the
    middle: every acknowledged point is back after the restart, with its vector, and nothing
    that was not sent. A journal line cut by a kill is dropped (it was never acknowledged) and
    the next write is not glued to it."""
    root = tmp_path / "root"
    root.mkdir()
    X = _unit(np.random.default_rng(9).standard_normal((4000, DIM)).astype(np.float32))
    sent: set[int] = set()
    acked: list[int] = []
    lock = threading.Lock()
    srv = Server(root).start()
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            _create(http, "grow", DIM, fit_after=100_000)
        for trial in range(2):
            stop = threading.Event()
            threads = [threading.Thread(target=_stream, args=(
                srv.url, X, 1000 * w + 250 * trial, w < 2, stop, sent, acked, lock))
                for w in range(4)]
            start = len(acked)
            for t in threads:
                t.start()
            while len(acked) < start + 60 and any(t.is_alive() for t in threads):
                time.sleep(0.005)
            srv.kill()  # kill -9 while batches are in flight
            stop.set()
            for t in threads:
                t.join(60)
            srv = Server(root).start()
            got = _retrieve(srv.url, sorted(sent))
            missing = sorted(set(acked) - set(got))
            assert not missing, f"trial {trial}: acknowledged points lost: {missing[:10]}"
            assert set(got) <= sent
            for i in acked:
                np.testing.assert_allclose(got[i], X[i], atol=1e-6)
            count = httpx.post(f"{srv.url}/collections/grow/points/count", json={}).json()
            assert count["result"]["count"] == len(got)
        srv.kill()
        journal = root / ".pending" / "grow" / "pending.jsonl"
        with open(journal, "ab") as fh:
            fh.write(b'{"id": 3999, "vector_f32": "AAAA')  # an append cut by the kill
        srv = Server(root).start()
        assert httpx.get(f"{srv.url}/indexes/grow").json()["state"] == "pending"
        before = set(_retrieve(srv.url, sorted(sent | {3999})))
        assert 3999 not in before and set(acked) <= before
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            assert _upsert(http, "grow", X, [3998]).status_code == 200
        srv.kill()
        srv = Server(root).start()
        after = _retrieve(srv.url, sorted(sent | {3998, 3999}))
        assert set(after) == before | {3998}
        np.testing.assert_allclose(after[3998], X[3998], atol=1e-6)
    finally:
        srv.kill()
