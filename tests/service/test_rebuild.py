"""``POST /indexes/{name}/rebuild`` and ``slimvec.Client.rebuild`` on a real server: the job
reports its phase, searches answer (from the old index) the whole time, writes wait (503) until
the swap, and ids, payloads and count are identical after it."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from slimvec.client import Client
from slimvec.errors import ConfigError
from slimvec.migrate import MigrateOptions, migrate
from tests.service.server import Server

N = 1500
NEW = "pca:24|faiss:HNSW16|rescore=4"


def _root_with_index(tmp_path, minilm_vectors, recipe: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "v.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(N)],
                             "vector": [v.tolist() for v in minilm_vectors[:N]],
                             "name": [f"d{i}" for i in range(N)]}), src)
    root = tmp_path / "root"
    migrate(f"parquet:{src},id=id,vector=vector", root / "docs",
            MigrateOptions(recipe=recipe, progress=False, batch_size=256, fit_sample=400))
    return root


@pytest.mark.parametrize("old", ["pca:32|hnsw|rescore=4,keep_full=float16",
                                 "pca:32|qdrant-edge|rescore=4,keep_full=float32"])
def test_rebuild_job_serves_searches_until_the_swap(tmp_path, minilm_vectors, old):
    root = _root_with_index(tmp_path, minilm_vectors, old)
    queries = minilm_vectors[:5].tolist()
    with Server(root) as srv, Client(srv.url) as client:
        before = client.index("docs").search(np.array(queries), 3)
        ids = before.ids[:, 0].tolist()
        payloads = client.index("docs").payloads(ids)
        job = client.rebuild("docs", NEW, sample=400)
        assert job["state"] == "rebuilding" and job["kind"] == "rebuild"
        during, phases, write_status = [], set(), None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            phase = client.job(job["id"])["phase"]
            r = httpx.post(f"{srv.url}/indexes/docs/search",
                           json={"vectors": queries, "k": 3}, timeout=30)
            rec = client.job(job["id"])
            phases.add(rec["phase"])
            if phase == rec["phase"] and phase in ("queued", "reading", "fitting", "writing",
                                                   "calibrating"):
                during.append(r.status_code)  # a search wholly during the build
                if write_status is None and phase == "writing":
                    write_status = httpx.post(f"{srv.url}/indexes/docs/vectors", json={
                        "vectors": [{"id": "late", "vector": queries[0]}]}, timeout=30).status_code
            if rec["state"] != "rebuilding":
                break
        assert rec["state"] == "done", rec
        assert during and set(during) == {200}, during  # the old index answered while rebuilding
        assert phases & {"reading", "fitting", "writing", "calibrating"}
        assert write_status in (None, 503)  # a write during the build waits for the swap
        # a rebuild whose recipe names no keep_full keeps the index's own precision (issue 40 item 6)
        want = NEW if "keep_full=float32" not in old else NEW + ",keep_full=float32"
        assert rec["summary"]["documents"] == N and rec["summary"]["new_recipe"] == want
        info = client.index("docs").info()
        assert info["count"] == N and info["recipe"] == want
        after = client.index("docs").search(np.array(queries), 3)
        assert after.ids[:, 0].tolist() == ids
        assert client.index("docs").payloads(ids) == payloads
        # the index takes writes again after the swap
        client.index("docs").add_vectors(["late"], np.array(queries[:1]))
        assert client.index("docs").info()["count"] == N + 1
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".jobs")) == ["docs"]


def test_rebuild_job_refuses_an_index_without_full_vectors(tmp_path, minilm_vectors):
    root = _root_with_index(tmp_path, minilm_vectors, "pca:32|hnsw")
    with Server(root) as srv, Client(srv.url) as client:
        with pytest.raises(ConfigError, match="keeps no full vectors.*--keep-full"):
            client.rebuild("docs", NEW)  # 422
        assert client.index("docs").info()["count"] == N  # still served, untouched


def test_server_killed_mid_rebuild_then_the_same_request_converges(tmp_path, minilm_vectors):
    root = _root_with_index(tmp_path, minilm_vectors, "pca:32|hnsw|rescore=4,keep_full=float16")
    srv = Server(root).start()
    try:
        with Client(srv.url) as client:
            ids = client.index("docs").search(minilm_vectors[:5], 1).ids[:, 0].tolist()
            payloads = client.index("docs").payloads(ids)
            job = client.rebuild("docs", NEW, sample=400)
            deadline = time.monotonic() + 120
            while client.job(job["id"])["phase"] == "queued" and time.monotonic() < deadline:
                time.sleep(0.01)
            seen = client.job(job["id"])
    finally:
        srv.kill()  # kill -9 mid-rebuild
    assert seen["state"] == "rebuilding", seen
    with Server(root) as srv, Client(srv.url) as client:
        rec = client.job(job["id"])
        assert rec["state"] == "interrupted" and "same recipe" in rec["error"], rec
        again = client.rebuild("docs", NEW, sample=400)
        deadline = time.monotonic() + 240
        while client.job(again["id"])["state"] == "rebuilding" and time.monotonic() < deadline:
            time.sleep(0.2)
        final = client.job(again["id"])
        assert final["state"] == "done", final
        info = client.index("docs").info()
        assert info["count"] == N and info["recipe"] == NEW
        assert client.index("docs").search(minilm_vectors[:5], 1).ids[:, 0].tolist() == ids
        assert client.index("docs").payloads(ids) == payloads
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".jobs")) == ["docs"]
