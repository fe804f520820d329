"""Issue 23 A1, A2, 11 over HTTP: a row no store can hold is a reject of its own request.

Before: a payload nesting 130 levels was acknowledged, then searches answered 500 and the Qdrant
Edge index could never be opened again after a restart (clean or kill -9); a payload key with a
lone surrogate answered 500 and killed the index's writer (every later write 503, every search
500 until a restart), on hnswlib leaving its vector behind; integers beyond int64 became floats on
Qdrant Edge. Real ``slimvec serve`` processes, real stores.
"""
from __future__ import annotations

import threading

import httpx
import numpy as np
import pytest

from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch
from slimvec.service.indexes.writer import IndexWriter, WriterClosed
from tests.service.server import Server

BIG = 10 ** 29


def _deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"n": value}
    return value


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _raw_vectors_body(X: np.ndarray, ids: list[int], payload_json: list[str]) -> bytes:
    """A JSON body written by hand: ``payload_json`` may hold ``\\udc00`` escapes, which a
    client's JSON encoder would refuse to produce."""
    items = ",".join(f'{{"id": {i}, "vector": {list(map(float, x))}, "payload": {p}}}'
                     for i, x, p in zip(ids, X, payload_json))
    return ('{"vectors": [' + items + "]}").encode()


def _check_index(http: httpx.Client, url: str, X: np.ndarray, good: list[int]) -> None:
    info = http.get(f"{url}/indexes/c")
    assert info.status_code == 200, info.text
    assert info.json()["count"] == len(good)
    r = http.post(f"{url}/indexes/c/search", json={"vectors": X[good[:3]].tolist(), "k": 3})
    assert r.status_code == 200, r.text
    got = http.post(f"{url}/indexes/c/payloads", json=good).json()["payloads"]
    assert [p["source_id"] for p in got] == good
    (big,) = http.post(f"{url}/indexes/c/payloads", json=[2]).json()["payloads"]
    assert big["big"] == str(BIG) and big["list"] == [str(BIG)]


@pytest.mark.parametrize("store", ["qdrant-edge", "hnsw"])
def test_unstorable_payloads_are_rejects_and_the_index_survives_restart_and_kill9(tmp_path,
                                                                                   store):
    X = _vectors(40)
    root = tmp_path / "root"
    root.mkdir()
    with httpx.Client(timeout=60) as http:
        srv = Server(root).start()
        url = srv.url
        try:
            body = {"reducer": "rp:4", "encoder": None, "store": store,
                    "sample_vectors": X[:20].tolist()}
            assert http.put(f"{url}/indexes/c", json=body).status_code == 201
            payloads = ['{"i": 0}', '{"i": 1}', '{"big": %d, "list": [%d]}' % (BIG, BIG),
                        '{"deep": %s}' % str(_deep(130)).replace("'", '"'),
                        '{"k\\udc00": 1}', '{"v": "x\\ud800"}', '{"i": 6}']
            r = http.post(f"{url}/indexes/c/vectors", content=_raw_vectors_body(
                X[:7], list(range(7)), payloads), headers={"content-type": "application/json"})
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["committed"] and out["accepted"] == 4
            rej = {x["row"]: x for x in out["rejected"]}
            assert sorted(rej) == [3, 4, 5]
            assert rej[3]["reason"].startswith("payload nests deeper than 32 levels")
            assert rej[3]["field"].startswith("deep.n.n")
            assert "lone surrogate" in rej[4]["reason"] and rej[4]["field"] == "k\\udc00"
            assert "lone surrogate" in rej[5]["reason"] and rej[5]["field"] == "v"
            assert [w["row"] for w in out["warnings"]] == [2, 2]
            # a request of only a bad row fails alone; the writer, later writes, searches go on
            r = http.post(f"{url}/indexes/c/vectors", content=_raw_vectors_body(
                X[7:8], [7], ['{"k\\udc00": 1}']), headers={"content-type": "application/json"})
            assert r.status_code == 200 and r.json()["accepted"] == 0, r.text
            r = http.post(f"{url}/indexes/c/vectors", json={"vectors": [
                {"id": 8, "vector": X[8].tolist(), "payload": {"i": 8}}]})
            assert r.status_code == 200 and r.json()["committed"], r.text
            good = [0, 1, 2, 6, 8]
            _check_index(http, url, X, good)
            assert srv.terminate() == 0
            srv = Server(root).start()  # clean restart
            url = srv.url
            _check_index(http, url, X, good)
            srv.kill()  # kill -9
            srv = Server(root).start()
            url = srv.url
            _check_index(http, url, X, good)
            assert "c" not in http.get(f"{url}/readyz").json().get("errors", {})
        finally:
            srv.kill()


def test_a_failing_batch_fails_its_own_request_and_the_writer_goes_on(tmp_path):
    """A batch the builder cannot write (here a producer's bug: 5 ids for 4 vectors) used to stop
    the writer thread: every later request failed until a restart. Queued together with a good
    batch (group commit), it must fail alone."""
    X = _vectors(40)
    b = IndexBuilder(tmp_path / "idx")
    b.__enter__()
    b.open(IndexSpec(reducer="rp:4", store="hnsw", source="t"), 16, fit=lambda: X)
    b.commit()
    lock = threading.RLock()
    writer = IndexWriter(b, lock)
    try:
        with lock:  # the writer waits: both batches queue and are merged into one commit
            bad = writer.submit(VectorBatch(np.arange(5), X[:4], [{}] * 5, [], 0), 5)
            good = writer.submit(VectorBatch(np.arange(5, 10), X[5:10], [{}] * 5, [], 0), 5)
        with pytest.raises(Exception) as err:
            bad.result(60)
        assert not isinstance(err.value, WriterClosed)
        assert good.result(60) > 0
        later = writer.submit(VectorBatch(np.arange(10, 15), X[10:15], [{}] * 5, [], 0), 5)
        later.result(60)
        assert b.manifest.count == 10 and b.store.count() == 10
    finally:
        writer.close(60)


def _nested(depth: int, kind: str) -> str:
    s = "1"
    for _ in range(depth):
        s = ('{"n": %s}' % s) if kind == "o" else f"[{s}]"
    return s


#: payload shapes: depths around the limit and far beyond, key encodings, numeric extremes
_KEYS = ['"k"', '"k\\udc00"', '"\\ud800"', '""', '"a.b"', '"\\u0000"', '"' + "x" * 5000 + '"',
         '"\\ud83d\\ude00"', '"\\ud83d"']
_VALUES = ["1", "9223372036854775807", "9223372036854775808", "18446744073709551616",
           "-9223372036854775809", "1" + "0" * 300, "1e308", "-0.0", "NaN", "Infinity",
           "-Infinity", '"x\\udc00"', '"\\u0000"', "null", "true", "[]", "{}"]
_DEPTHS = [1, 5, 31, 32, 33, 64, 127, 128, 130, 200, 3000]


def _shape(rng) -> str:
    kind = rng.random()
    if kind < 0.3:
        return '{"d": %s}' % _nested(rng.choice(_DEPTHS), rng.choice("ol"))
    if kind < 0.6:
        return "{%s: %s}" % (rng.choice(_KEYS), rng.choice(_VALUES))
    if kind < 0.65:
        return '{"big": "%s"}' % ("y" * 1_100_000)  # over the 1 MiB payload limit
    return "{%s}" % ", ".join('"f%d": %s' % (i, rng.choice(_VALUES)) for i in range(rng.randint(1, 4)))


def test_payload_shape_sweep_finds_no_5xx_and_the_index_reopens_after_kill9(tmp_path):
    """A seeded sweep over payload shapes on Qdrant Edge (before: the first NaN payload answered
    500 and stopped the writer; 130-deep ones made the shard unopenable)."""
    import random

    rng = random.Random(3)
    n_requests = 60
    X = _vectors(n_requests * 3 + 20)
    root = tmp_path / "root"
    root.mkdir()
    statuses: dict[int, int] = {}
    fives: list[str] = []
    with httpx.Client(timeout=60) as http:
        srv = Server(root, "--max-body-bytes", "4000000").start()
        try:
            body = {"reducer": "rp:4", "encoder": None, "store": "qdrant-edge",
                    "sample_vectors": X[:20].tolist()}
            assert http.put(f"{srv.url}/indexes/c", json=body).status_code == 201
            nid = 0
            for _ in range(n_requests):
                items = []
                for _ in range(rng.randint(1, 3)):
                    items.append('{"id": %d, "vector": %s, "payload": %s}'
                                 % (nid, list(map(float, X[nid])), _shape(rng)))
                    nid += 1
                r = http.post(f"{srv.url}/indexes/c/vectors",
                              content=('{"vectors": [%s]}' % ",".join(items)).encode(),
                              headers={"content-type": "application/json"})
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                s = http.post(f"{srv.url}/indexes/c/search",
                              json={"vectors": [X[0].tolist()], "k": 5})
                if r.status_code >= 500 or s.status_code != 200:
                    fives.append(f"{r.status_code} {r.text[:200]} / search {s.status_code}")
            assert not fives, fives[:3]
            assert statuses.get(200, 0) >= n_requests // 2, statuses
            count = http.get(f"{srv.url}/indexes/c").json()["count"]
            assert count > 0
            srv.kill()
            srv = Server(root).start()
            assert http.get(f"{srv.url}/indexes/c").json()["count"] == count
            r = http.post(f"{srv.url}/indexes/c/search", json={"vectors": [X[0].tolist()], "k": 5})
            assert r.status_code == 200 and len(r.json()["ids"][0]) == 5
        finally:
            srv.kill()


def test_rows_waiting_for_the_fit_are_checked_too(tmp_path):
    """``fit_after``: rows are kept in a pending file until enough arrive to fit the reducer.
    Before: a surrogate key answered 500 (the pending file is UTF-8), a 130-deep payload waited
    there and poisoned the Qdrant Edge shard at the fit."""
    X = _vectors(20)
    root = tmp_path / "root"
    root.mkdir()
    with httpx.Client(timeout=60) as http:
        srv = Server(root).start()
        try:
            body = {"reducer": "rp:4", "encoder": None, "store": "qdrant-edge", "fit_after": 6}
            assert http.put(f"{srv.url}/indexes/c", json=body).status_code == 201
            payloads = ['{"i": 0}', '{"deep": %s}' % _nested(130, "o"), '{"k\\udc00": 1}',
                        '{"big": %d, "list": [%d]}' % (BIG, BIG)]
            r = http.post(f"{srv.url}/indexes/c/vectors", content=_raw_vectors_body(
                X[:4], [0, 1, 2, 3], payloads), headers={"content-type": "application/json"})
            assert r.status_code == 200, r.text
            assert r.json()["pending_fit"] and r.json()["accepted"] == 2
            assert [x["row"] for x in r.json()["rejected"]] == [1, 2]
            r = http.post(f"{srv.url}/indexes/c/vectors", json={"vectors": [
                {"id": i, "vector": X[i].tolist(), "payload": {"i": i}} for i in range(4, 8)]})
            assert r.status_code == 200 and not r.json()["pending_fit"], r.text
            srv.kill()
            srv = Server(root).start()
            assert http.get(f"{srv.url}/indexes/c").json()["count"] == 6
            (p,) = http.post(f"{srv.url}/indexes/c/payloads", json=[3]).json()["payloads"]
            assert p["big"] == str(BIG)
            r = http.post(f"{srv.url}/indexes/c/search", json={"vectors": [X[4].tolist()], "k": 3})
            assert r.status_code == 200 and r.json()["ids"][0][0] == 4
        finally:
            srv.kill()
