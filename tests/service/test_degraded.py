"""A writer whose store fails on a commit: the index is ``degraded`` (reads answer, writes 503 with
Retry-After, ``/indexes/NAME`` names the cause and the next retry), the writer comes back by itself
once the cause is gone, and nothing acknowledged is lost (issue 25 item 7).

The failure is real: the server process's file-size limit (``RLIMIT_FSIZE``, which binds root too,
unlike a read-only folder) is lowered to 1 byte with ``prlimit`` so every store/manifest write fails
with ``EFBIG`` (Python ignores ``SIGXFSZ``), then raised back.
"""

from __future__ import annotations

import resource
import time

import httpx
import numpy as np

from tests.service.server import Server

DIM = 16


def _vectors(X: np.ndarray, ids: range) -> dict:
    return {"vectors": [{"id": i, "vector": X[i].tolist()} for i in ids]}


def _wait_state(http: httpx.Client, url: str, state: str, seconds: float = 60.0) -> dict:
    info: dict = {}
    for _ in range(int(seconds / 0.2)):  # bounded
        info = http.get(f"{url}/indexes/d").json()
        if info["state"] == state:
            return info
        time.sleep(0.2)
    raise AssertionError(f"index never became {state!r}: {info}")


def test_store_failure_degrades_then_recovers_without_losing_acknowledged_writes(tmp_path):
    X = np.random.default_rng(3).standard_normal((200, DIM)).astype(np.float32)
    root = tmp_path / "root"
    root.mkdir()
    with httpx.Client(timeout=60) as http:
        srv = Server(root).start()
        url = srv.url
        limit = resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE)
        try:
            body = {"reducer": "rp:4", "encoder": None, "sample_vectors": X[:64].tolist()}
            assert http.put(f"{url}/indexes/d", json=body).status_code == 201
            r = http.post(f"{url}/indexes/d/vectors", json=_vectors(X, range(0, 20)))
            assert r.status_code == 200 and r.json()["committed"], r.text
            acked = list(range(0, 20))

            resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, (1, limit[1]))
            r = http.post(f"{url}/indexes/d/vectors", json=_vectors(X, range(20, 30)))
            assert r.status_code == 503, r.text
            assert r.headers.get("Retry-After"), r.headers
            info = http.get(f"{url}/indexes/d").json()
            assert info["state"] == "degraded", info
            assert info["last_error"] and str(root) not in info["last_error"], info
            assert info["next_retry"], info
            # reads keep answering from the last commit
            s = http.post(f"{url}/indexes/d/search", json={"vectors": [X[5].tolist()], "k": 3})
            assert s.status_code == 200, s.text
            # further writes are refused with the cause, not queued
            r = http.post(f"{url}/indexes/d/vectors", json=_vectors(X, range(30, 40)))
            assert r.status_code == 503 and r.headers.get("Retry-After"), r.text
            assert "degraded" in r.json()["detail"], r.text
            assert str(root) not in r.json()["detail"], r.text  # no server paths in the cause
            ready = http.get(f"{url}/readyz")
            assert ready.status_code == 200 and ready.json()["counts"]["degraded"] == 1, ready.text
            assert http.get(f"{url}/healthz").json() == {"status": "ok", "degraded": 1}

            resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, limit)  # the cause is gone
            info = _wait_state(http, url, "ready")
            assert info.get("last_error") is None, info
            assert http.get(f"{url}/healthz").json() == {"status": "ok"}
            r = http.post(f"{url}/indexes/d/vectors", json=_vectors(X, range(40, 50)))
            assert r.status_code == 200 and r.json()["committed"], r.text
            acked += list(range(40, 50))
        finally:
            if srv.proc.poll() is None:
                resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, limit)
            srv.terminate()
        with Server(root) as srv2:  # acknowledged writes survive a restart
            got = http.post(f"{srv2.url}/indexes/d/payloads", json=acked).json()["payloads"]
            assert [p is not None for p in got] == [True] * len(acked), got
            assert http.get(f"{srv2.url}/indexes/d").json()["state"] == "ready"
