"""Issue 25 item 7: reads never wait for a job, on every store (Qdrant Edge, the default, too).

An ingest job into a served index writes through the index's one writer, so the index stays open
for searches; the job reports its phase and rows as it goes. The job is held at its first commit
by what a concurrent ``slimvec snapshot`` holds: the index folder's commit guard, taken shared
(:class:`slimvec.index.locking.CommitGuard`) from this test process. So the test sees the job
mid-way every time, without timing: it has written its rows, not committed them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from slimvec.index.locking import CommitGuard
from tests.conftest import bundled_sentences
from tests.service.server import Server

TEXTS = bundled_sentences(64)
BEFORE, JOB = TEXTS[:40], TEXTS[40:52]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Any:
    """One server (MiniLM loaded once) with ``--allow-dir`` over the job files."""
    base = tmp_path_factory.mktemp("jobreads")
    root, data = base / "root", base / "data"
    root.mkdir()
    data.mkdir()
    (data / "more.jsonl").write_text("".join(json.dumps({"id": f"m{i}", "text": t}) + "\n"
                                             for i, t in enumerate(JOB)), "utf-8")
    with Server(root, "--allow-dir", str(data)) as srv:
        yield srv, root, data


def _index(http: httpx.Client, name: str, store: str) -> None:
    body = {"reducer": "rp:16", "store": store, "encoder": "minilm", "sample_texts": BEFORE}
    assert http.put(f"/indexes/{name}", json=body).status_code == 201
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(BEFORE)]
    r = http.post(f"/indexes/{name}/documents", json={"documents": docs})
    assert r.status_code == 200 and r.json()["committed"], r.text


def _wait(http: httpx.Client, job: str, until: Any, seconds: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    rec = http.get(f"/jobs/{job}").json()
    while not until(rec) and time.monotonic() < deadline:
        time.sleep(0.1)
        rec = http.get(f"/jobs/{job}").json()
    return rec


@pytest.mark.parametrize("store", ["qdrant-edge", "faiss", "hnsw"])
def test_searches_answer_during_a_job_and_it_reports_progress(served, store):
    srv, root, data = served
    name = f"r-{store}"
    with httpx.Client(base_url=srv.url, timeout=120) as http:
        _index(http, name, store)
        with CommitGuard(root / name, exclusive=False):  # a snapshot's pin: no commit passes
            r = http.post(f"/indexes/{name}/jobs",
                          json={"path": str(data / "more.jsonl"), "batch_size": 4})
            assert r.status_code == 202, r.text
            job = r.json()["id"]
            rec = _wait(http, job, lambda x: x.get("phase") == "committing"
                        or x["state"] not in ("queued", "running"))
            assert rec["state"] == "running" and rec["phase"] == "committing", rec
            assert rec["rows"] == len(JOB) and rec["ingested"] == len(JOB), rec  # as it goes
            assert rec["committed_rows"] == 0, rec
            during = http.post(f"/indexes/{name}/search", json={"texts": [BEFORE[3]], "k": 3})
            assert during.status_code == 200, during.text  # was 409 on Qdrant Edge
            assert during.json()["hits"][0][0]["source_id"] == "d3"
            info = http.get(f"/indexes/{name}").json()
            assert info["state"] == "busy" and info["count"] >= len(BEFORE), info
            write = http.post(f"/indexes/{name}/documents",
                              json={"documents": [{"id": "x", "text": "x"}]})
            assert write.status_code == 409, write.text
            assert "being written by an ingest job" in write.json()["detail"]
        rec = _wait(http, job, lambda x: x["state"] not in ("queued", "running"))
        assert rec["state"] == "done" and rec["phase"] == "done", rec
        assert rec["rows"] == rec["committed_rows"] == rec["ingested"] == len(JOB), rec
        after = http.post(f"/indexes/{name}/search", json={"texts": [JOB[5]], "k": 3}).json()
        assert after["hits"][0][0]["source_id"] == "m5"
        info = http.get(f"/indexes/{name}").json()
        assert info["state"] == "ready" and info["count"] == len(BEFORE) + len(JOB), info
        again = http.post(f"/indexes/{name}/documents",
                          json={"documents": [{"id": "x", "text": "after the job"}]})
        assert again.status_code == 200 and again.json()["committed"], again.text
        assert http.get(f"/indexes/{name}").json()["count"] == len(BEFORE) + len(JOB) + 1


def test_kill9_mid_job_through_the_writer_converges(tmp_path: Path):
    """kill -9 while a job written through the served Qdrant Edge index has rows written and not
    committed: the restarted server serves the index at once (searches answer during the resumed
    job), the job resumes and finishes, and nothing is lost or duplicated."""
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    data.mkdir()
    (data / "more.jsonl").write_text("".join(json.dumps({"id": f"m{i}", "text": t}) + "\n"
                                             for i, t in enumerate(JOB)), "utf-8")
    args = ("--allow-dir", str(data))
    with Server(root, *args) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        _index(http, "k", "qdrant-edge")
        with CommitGuard(root / "k", exclusive=False):
            job = http.post("/indexes/k/jobs", json={"path": str(data / "more.jsonl"),
                                                     "batch_size": 4}).json()["id"]
            rec = _wait(http, job, lambda x: x.get("phase") == "committing"
                        or x["state"] not in ("queued", "running"))
            assert rec["phase"] == "committing", rec
            srv.kill()
    # the restart loads MiniLM before it is ready (the index is served at once): a loaded
    # machine took 100 s
    with Server(root, *args, ready_timeout=400) as srv, \
            httpx.Client(base_url=srv.url, timeout=120) as http:
        first = http.post("/indexes/k/search", json={"texts": [BEFORE[7]], "k": 1})
        assert first.status_code == 200, first.text
        assert first.json()["hits"][0][0]["source_id"] == "d7"
        rec = _wait(http, job, lambda x: x["state"] not in ("queued", "running"))
        assert rec["state"] == "done" and rec["resumes"] == 1, rec
        info = http.get("/indexes/k").json()
        assert info["state"] == "ready" and info["count"] == len(BEFORE) + len(JOB), info
        page = http.post("/indexes/k/scroll", json={"limit": 100}).json()
        got = sorted(d["id"] for d in page["documents"])
        assert got == sorted([f"d{i}" for i in range(len(BEFORE))]
                             + [f"m{i}" for i in range(len(JOB))])


def test_sync_job_adds_updates_keeps_and_deletes(served):
    """Issue 25 item 4 over HTTP: ``POST /indexes/NAME/sync`` (``slimvec.Client``'s
    ``RemoteIndex.sync``) makes a served index equal to a changed file, as ``slimvec ingest
    --sync`` does, and its job's summary says what it did."""
    import slimvec

    srv, root, data = served
    src = data / "sync.jsonl"
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(BEFORE[:30])]  # unchanged
    rows += [{"id": f"d{i}", "text": f"{t} (edited)"} for i, t in enumerate(BEFORE[30:35], 30)]
    rows += [{"id": f"n{i}", "text": t} for i, t in enumerate(TEXTS[52:56])]  # new; d35-d39 left
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    first = data / "first.jsonl"  # the corpus as it was: ingested by a job
    first.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                             for i, t in enumerate(BEFORE)), "utf-8")
    with httpx.Client(base_url=srv.url, timeout=120) as http:
        body = {"reducer": "rp:16", "store": "qdrant-edge", "encoder": "minilm",
                "sample_texts": BEFORE}
        assert http.put("/indexes/s", json=body).status_code == 201
        ingest = http.post("/indexes/s/jobs", json={"path": str(first), "batch_size": 8}).json()
        rec = _wait(http, ingest["id"], lambda x: x["state"] not in ("queued", "running"))
        assert rec["state"] == "done" and http.get("/indexes/s").json()["count"] == len(BEFORE)
        job = slimvec.Client(srv.url, timeout=120).index("s").sync(str(src), batch_size=8)
        assert job["kind"] == "sync" and job["state"] == "queued", job
        rec = _wait(http, job["id"], lambda x: x["state"] not in ("queued", "running"))
        assert rec["state"] == "done" and rec["phase"] == "done", rec
        assert rec["summary"]["added"] == 4 and rec["summary"]["updated"] == 5, rec
        assert rec["summary"]["unchanged"] == 30 and rec["summary"]["deleted"] == 5, rec
        assert rec["rows"] == len(rows) and rec["ingested"] == 9, rec
        assert http.get("/indexes/s").json()["count"] == 39
        got = http.post("/indexes/s/get", json={"ids": ["d31", "d36", "n2"]}).json()
        assert [d and d["id"] for d in got["documents"]] == ["d31", None, "n2"], got
        for text, want in ((f"{BEFORE[31]} (edited)", "d31"), (TEXTS[54], "n2")):
            top = http.post("/indexes/s/search", json={"texts": [text], "k": 1}).json()
            assert top["hits"][0][0]["source_id"] == want and top["hits"][0][0]["text"] == text
