"""The endpoint contract of ``slimvec serve``, every error status included (vector-only indexes)."""

from __future__ import annotations

import json
import sys
import threading

import httpx
import numpy as np
import pytest

import slimvec
from tests.service.server import Server


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    """API keys and a write queue of one (auth and 429 checks share it)."""
    root = tmp_path_factory.mktemp("keyed") / "root"
    root.mkdir()
    env = {"SLIMVEC_API_KEY": "rw-secret", "SLIMVEC_READ_ONLY_KEY": "ro-secret"}
    with Server(root, "--queue-size", "1", env=env) as srv:
        yield srv


RW = {"Authorization": "Bearer rw-secret"}


def _create(url: str, name: str, X: np.ndarray, headers: dict | None = None,
            **extra) -> httpx.Response:
    body = {"reducer": "rp:8", "store": "qdrant-edge", "encoder": None,
            "sample_vectors": X[:64].tolist(), **extra}
    return httpx.put(f"{url}/indexes/{name}", json=body, headers=headers, timeout=60)


def _items(X: np.ndarray, lo: int, hi: int) -> list[dict]:
    return [{"id": i, "vector": X[i].tolist(), "payload": {"n": i}} for i in range(lo, hi)]


def test_index_lifecycle_and_search_matches_slimvec_open(server, vectors):
    url = server.url
    assert httpx.get(url + "/healthz").json() == {"status": "ok"}
    assert _create(url, "a", vectors).status_code == 201
    assert _create(url, "a", vectors).status_code == 200  # same specs: idempotent
    assert _create(url, "a", vectors, reducer="rp:4").status_code == 409
    r = httpx.post(f"{url}/indexes/a/vectors", json={"vectors": _items(vectors, 0, 300)}, timeout=60)
    assert r.status_code == 200 and r.json()["accepted"] == 300 and r.json()["committed"]
    # a retried request adds nothing (ids are the given ids)
    httpx.post(f"{url}/indexes/a/vectors", json={"vectors": _items(vectors, 0, 10)}, timeout=60)
    info = httpx.get(f"{url}/indexes/a").json()
    assert info["count"] == 300 and info["dim_in"] == 32 and info["dim_out"] == 8
    assert [i["name"] for i in httpx.get(url + "/indexes").json()["indexes"]] == ["a"]
    client = slimvec.Client(url).index("a")
    res = client.search(vectors[:5], k=5)
    assert res.ids[:, 0].tolist() == [0, 1, 2, 3, 4]
    hits = client.hits(vectors[:1], k=1)
    assert hits[0][0]["payload"]["n"] == 0
    assert client.reduce(vectors[:3]).shape == (3, 8)
    metrics = httpx.get(url + "/metrics").text
    assert 'slimvec_documents_ingested_total{index="a"} 310.0' in metrics
    assert server.terminate() == 0  # SIGTERM: commit, exit 0
    with slimvec.open(server.root / "a") as idx:  # the CLI's view: same results, same info
        direct = idx.search(vectors[:5], k=5)
        cli_info = idx.info()
    assert np.array_equal(direct.ids, res.ids)
    assert np.allclose(direct.scores, res.scores, atol=1e-6)
    assert set(cli_info) <= set(info) and cli_info["count"] == 300
    with Server(server.root) as again:  # restart reopens every index
        assert httpx.get(again.url + "/indexes/a").json()["count"] == 300
        assert httpx.delete(again.url + "/indexes/a").status_code == 200
        assert httpx.get(again.url + "/indexes/a").status_code == 404
    assert not (server.root / "a").exists()


def test_rows_rejected_per_row_and_recorded(shared_server, vectors):
    server = shared_server
    url = server.url
    _create(url, "r", vectors)
    bad = [{"id": 1, "vector": [1.0, 2.0]}, {"id": 2, "vector": [None] * 32},
           {"id": 3, "vector": vectors[3].tolist()}]
    out = httpx.post(f"{url}/indexes/r/vectors", json={"vectors": bad}, timeout=60).json()
    assert out["accepted"] == 1
    assert [(e["row"], e["reason"]) for e in out["rejected"]] == [
        (0, "wrong dimension: vector has 2, index expects 32"), (1, "NaN or inf in vector")]
    lines = (server.root / "r" / "rejects.jsonl").read_text().splitlines()
    assert [json.loads(x)["row"] for x in lines] == [0, 1]


def test_fit_after_n_documents(shared_server, vectors):
    url = shared_server.url
    r = httpx.put(f"{url}/indexes/p", json={"reducer": "rp:8", "encoder": None, "fit_after": 100})
    assert r.status_code == 201 and r.json()["state"] == "pending"
    first = httpx.post(f"{url}/indexes/p/vectors", json={"vectors": _items(vectors, 0, 60)}).json()
    assert first["pending_fit"] and first["committed"]
    s = httpx.post(f"{url}/indexes/p/search", json={"vectors": vectors[:1].tolist()})
    # searchable before the fit: exact cosine over the collected full vectors
    assert s.status_code == 200 and s.json()["hits"][0][0]["source_id"] == 0, s.text
    assert s.json()["hits"][0][0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert httpx.get(f"{url}/indexes/p").json()["pending"] == 60
    httpx.post(f"{url}/indexes/p/vectors", json={"vectors": _items(vectors, 60, 120)}, timeout=60)
    info = httpx.get(f"{url}/indexes/p").json()
    assert info["state"] == "ready" and info["count"] == 120


@pytest.mark.parametrize("method,path,body,status,needle", [
    ("GET", "/indexes/missing", None, 404, "No index named 'missing'"),
    ("POST", "/indexes/missing/search", {"vectors": [[0.0]]}, 404, "No index"),
    ("GET", "/indexes/bad..name", None, 422, "Invalid index name"),
    ("PUT", "/indexes/x", {"reducer": "pcaa:8", "encoder": None}, 422, "Unknown reducer"),
    ("PUT", "/indexes/x", {"store": "nostore", "encoder": None}, 422, "store"),
    ("PUT", "/indexes/x", {"bogus": 1}, 422, "bogus"),
    ("GET", "/jobs/nope", None, 404, "No job"),
])
def test_error_statuses(shared_server, method, path, body, status, needle):
    r = httpx.request(method, shared_server.url + path, json=body)
    assert r.status_code == status, r.text
    assert needle.lower() in r.json()["detail"].lower()
    assert "Traceback" not in r.text


def test_bench_reports_are_served(shared_server):
    r = httpx.get(shared_server.url + "/reports/run1/report.html")
    assert r.status_code == 200 and "bench run1" in r.text
    assert httpx.get(shared_server.url + "/reports/run1/").status_code == 404  # no index.html
    assert httpx.get(shared_server.url + "/reports/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_bad_json_wrong_dimension_and_limits(shared_server, vectors):
    url = shared_server.url
    _create(url, "e", vectors)
    r = httpx.post(f"{url}/indexes/e/search", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 422 and "Traceback" not in r.text
    r = httpx.post(f"{url}/indexes/e/search", json={"vectors": [[1.0, 2.0]]})
    assert r.status_code == 422
    assert r.json()["detail"].startswith("query vectors: expected dimension 32, got 2.")
    padded = [{**it, "payload": {"pad": "x" * 6000}} for it in _items(vectors, 0, 400)]
    r = httpx.post(f"{url}/indexes/e/vectors", json={"vectors": padded})
    assert r.status_code == 413 and "2,000,000 bytes" in r.json()["detail"]
    small = [{"id": i, "vector": [0.1] * 32} for i in range(501)]
    r = httpx.post(f"{url}/indexes/e/vectors", json={"vectors": small})
    assert r.status_code == 413 and "the limit is 500" in r.json()["detail"]


def test_queue_full_answers_429_with_retry_after(keyed_server, vectors):
    url = keyed_server.url
    assert _create(url, "q", vectors, headers=RW).status_code == 201
    statuses: list[tuple[int, str | None]] = []

    def post() -> None:
        with httpx.Client(timeout=60, headers=RW) as c:
            for _ in range(3):
                r = c.post(f"{url}/indexes/q/vectors", json={"vectors": _items(vectors, 0, 200)})
                statuses.append((r.status_code, r.headers.get("retry-after")))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    codes = {s for s, _ in statuses}
    assert len(statuses) == 18 and codes <= {200, 429} and 429 in codes and 200 in codes
    assert all(ra == "1" for s, ra in statuses if s == 429)


def test_auth_keys_and_read_only(keyed_server, vectors):
    url = keyed_server.url
    assert httpx.get(url + "/healthz").status_code == 200
    assert httpx.get(url + "/indexes").status_code == 401
    assert httpx.get(url + "/indexes", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ro = {"api-key": "ro-secret"}
    body = {"reducer": "rp:8", "encoder": None, "sample_vectors": vectors[:64].tolist()}
    assert httpx.put(url + "/indexes/k", json=body, headers=ro).status_code == 403
    assert httpx.put(url + "/indexes/k", json=body, headers=RW, timeout=60).status_code == 201
    q = {"vectors": vectors[:1].tolist()}
    assert httpx.post(url + "/indexes/k/search", json=q, headers=ro).status_code == 200
    assert httpx.post(url + "/indexes/k/vectors", json={"vectors": []}, headers=ro).status_code == 403
    names = [i["name"] for i in slimvec.Client(url, api_key="rw-secret").indexes()]
    assert "k" in names
    assert "rw-secret" not in keyed_server.output()


def test_non_loopback_bind_without_key_is_refused(tmp_path, monkeypatch, capsys):
    """The CLI entry point in this process (the same ``main`` as ``python -m slimvec``; a
    subprocess would only add its start-up time): refused before anything is bound."""
    from slimvec.cli import main

    monkeypatch.setenv("SLIMVEC_API_KEY", "")
    monkeypatch.setattr(sys, "argv", ["slimvec", "serve", "--root", str(tmp_path),
                                      "--host", "0.0.0.0", "--port", "1"])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "Refusing to listen on 0.0.0.0 without an API key" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("store", ["faiss:Flat", "hnsw"])
def test_snapshot_stores_and_wait_false(shared_server, vectors, store):
    url, name = shared_server.url, "s-" + store.split(":")[0]
    assert _create(url, name, vectors, store=store).status_code == 201
    r = httpx.post(f"{url}/indexes/{name}/vectors?wait=false",
                   json={"vectors": _items(vectors, 0, 50)}, timeout=60)
    assert r.status_code == 200 and r.json()["committed"] is False and r.json()["accepted"] == 50
    r = httpx.post(f"{url}/indexes/{name}/vectors", json={"vectors": _items(vectors, 50, 100)},
                   timeout=60)
    assert r.json()["committed"]  # commits are in order: the first batch is committed too
    res = slimvec.Client(url).index(name).search(vectors[:100:10], k=1)
    assert res.ids[:, 0].tolist() == list(range(0, 100, 10))


def test_rescore_finds_rows_added_while_serving(shared_server, vectors):
    """--keep-full side file: rows committed after the first rescored search are found too."""
    url = shared_server.url
    assert _create(url, "kf", vectors, store="faiss:Flat", keep_full="float32").status_code == 201
    index = slimvec.Client(url).index("kf")
    for lo in (0, 50):  # the first search opens the side file; the second batch comes after it
        r = httpx.post(f"{url}/indexes/kf/vectors", json={"vectors": _items(vectors, lo, lo + 50)},
                       timeout=60)
        assert r.json()["committed"]
        res = index.search(vectors[lo:lo + 50:7], k=1, rescore=4)
        assert res.ids[:, 0].tolist() == list(range(lo, lo + 50, 7))
        assert np.allclose(res.scores[:, 0], 1.0, atol=1e-5)  # full-space cosine of itself


def test_first_vectors_of_a_pending_index_take_the_common_length(shared_server, vectors):
    """A malformed first row used to set the index's dimension (every good row then a
    wrong-dimension reject); the dimension is the request's most common length, kept in
    service.json so a restart does not guess it again."""
    url = shared_server.url
    r = httpx.put(f"{url}/indexes/cd", json={"reducer": "rp:8", "encoder": None, "fit_after": 100})
    assert r.status_code == 201
    items = _items(vectors, 0, 10)
    items[0]["vector"] = [1.0, 2.0]
    out = httpx.post(f"{url}/indexes/cd/vectors", json={"vectors": items}, timeout=60).json()
    assert out["accepted"] == 9, out
    assert [(e["row"], e["reason"]) for e in out["rejected"]] == [
        (0, "wrong dimension: vector has 2, index expects 32")]
    spec = json.loads((shared_server.root / ".pending" / "cd" / "service.json").read_text())
    assert spec["dim_in"] == 32
