"""Text indexes over HTTP with the packaged MiniLM: documents, 8 searchers during an ingest, jobs."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest

import slimvec
from slimvec.ids import doc_ids, text_key
from tests.conftest import bundled_sentences
from tests.service.server import Server


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return bundled_sentences(400)


def test_documents_and_8_searchers_during_an_ingest(tmp_path, sentences):
    root = tmp_path / "root"
    root.mkdir()
    queries = sentences[10:18]  # row 5 is made bad below
    with Server(root) as srv, httpx.Client(timeout=120) as http:
        url = srv.url
        body = {"reducer": "rp:64", "encoder": "minilm", "sample_texts": sentences[:100]}
        assert http.put(f"{url}/indexes/t", json=body).status_code == 201
        docs = [{"text": s, "payload": {"n": i}} for i, s in enumerate(sentences[:150])]
        docs[5] = {"id": "bad", "text": "   "}
        out = http.post(f"{url}/indexes/t/documents", json={"documents": docs}).json()
        assert out["accepted"] == 149 and out["committed"]
        assert out["rejected"][0]["row"] == 5 and out["rejected"][0]["field"] == "text"
        rejects = [json.loads(x) for x in (root / "t" / "rejects.jsonl").read_text().splitlines()]
        # the reason slimvec ingest gives the same row (the shared text check, issue 24 item 4)
        assert rejects[0]["reason"] == "empty or whitespace-only text"
        again = http.post(f"{url}/indexes/t/documents", json={"documents": docs[:50]}).json()
        assert again["accepted"] == 49 and http.get(f"{url}/indexes/t").json()["count"] == 149
        # issue 23 A2: a text with a lone surrogate is a row reject (it was a 500)
        raw = ('{"documents": [{"text": "lone \\udc00 surrogate"}, '
               '{"id": "s2", "text": "also \\ud800 bad"}, {"id": "s\\udc00", "text": "ok"}]}')
        r = http.post(f"{url}/indexes/t/documents", content=raw.encode(),
                      headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert [(x["row"], x["field"]) for x in r.json()["rejected"]] == [
            (0, "text"), (1, "text"), (2, "source_id")]
        reasons = [x["reason"] for x in r.json()["rejected"]]
        # texts: the ingest readers' reason (shared text check); an id: the payload check's
        assert reasons[:2] == ["invalid UTF-8", "invalid UTF-8"] and "lone surrogate" in reasons[2]
        assert http.get(f"{url}/indexes/t").json()["count"] == 149

        errors: list[str] = []
        rounds = [0] * 8
        done = threading.Event()

        def searcher(w: int) -> None:
            with httpx.Client(timeout=120) as c:
                while not done.is_set() and rounds[w] < 15:
                    r = c.post(f"{url}/indexes/t/search", json={"texts": [queries[w]], "k": 3})
                    rounds[w] += 1
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                    elif r.json()["hits"][0][0]["source_id"] != text_key(queries[w]):
                        errors.append(f"query {w}: top hit is not its own document")

        threads = [threading.Thread(target=searcher, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        more = sentences[150:300]
        for i in range(0, len(more), 50):
            r = http.post(f"{url}/indexes/t/documents",
                          json={"documents": [{"text": s} for s in more[i:i + 50]]})
            assert r.status_code == 200, r.text
        done.set()
        for t in threads:
            t.join(120)
        assert errors == [] and min(rounds) >= 1
        final = http.post(f"{url}/indexes/t/search", json={"texts": queries, "k": 5}).json()
        srv.terminate()
    with slimvec.open(root / "t") as idx:  # the library (and CLI) on the same folder
        direct = idx.search(queries, k=5)
        assert idx.info()["count"] == 299
    assert direct.ids.tolist() == final["ids"]
    assert np.allclose(direct.scores, np.array(final["scores"], dtype=np.float32), atol=1e-5)


def test_job_survives_kill9_by_resuming(tmp_path, sentences):
    root = tmp_path / "root"
    data = tmp_path / "data"
    root.mkdir()
    data.mkdir()
    src = data / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": s}) + "\n"
                           for i, s in enumerate(sentences[:150])))
    (tmp_path / "outside.jsonl").write_text('{"text": "x"}\n')
    args = ("--allow-dir", str(data))
    with Server(root, *args) as srv:
        url = srv.url
        r = httpx.post(f"{url}/indexes/j/jobs", json={"path": str(tmp_path / "outside.jsonl")})
        assert r.status_code == 403 and "not under an allowed folder" in r.json()["detail"]
        body = {"path": str(src), "reducer": "rp:16", "fit_sample": 50, "batch_size": 10}
        r = httpx.post(f"{url}/indexes/j/jobs", json=body)
        assert r.status_code == 202, r.text
        job = r.json()["id"]
        time.sleep(0.5)
        srv.kill()  # kill -9 during the job
    with Server(root, *args) as srv:
        deadline = time.monotonic() + 120
        rec = httpx.get(f"{srv.url}/jobs/{job}").json()
        while rec["state"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
            rec = httpx.get(f"{srv.url}/jobs/{job}").json()
        assert rec["state"] == "done" and rec["resumes"] == 1, rec
        assert rec["rows"] == 150
        info = httpx.get(f"{srv.url}/indexes/j").json()
        assert info["count"] == 150 and info["state"] == "ready"


def test_searches_answer_from_the_last_commit_while_a_job_writes(tmp_path):
    """Issue 25 item 7: reads never wait for a job. An hnswlib index keeps answering searches
    (from its last commit before the job) while an ingest job writes 800 more documents; writes
    meanwhile get 409 saying why; after the job every document is searchable."""
    texts = bundled_sentences(1000)
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    data.mkdir()
    src = data / "more.jsonl"
    src.write_text("".join(json.dumps({"id": f"m{i}", "text": s}) + "\n"
                           for i, s in enumerate(texts[200:])))
    with Server(root, "--allow-dir", str(data)) as srv, httpx.Client(timeout=120) as http:
        url = srv.url
        body = {"reducer": "rp:32", "store": "hnsw", "encoder": "minilm", "sample_texts": texts[:100]}
        assert http.put(f"{url}/indexes/r", json=body).status_code == 201
        docs = [{"id": f"d{i}", "text": s} for i, s in enumerate(texts[:200])]
        assert http.post(f"{url}/indexes/r/documents", json={"documents": docs}).status_code == 200
        r = http.post(f"{url}/indexes/r/jobs", json={"path": str(src), "batch_size": 10})
        assert r.status_code == 202, r.text
        job = r.json()["id"]
        during = http.post(f"{url}/indexes/r/search", json={"texts": [texts[3]], "k": 3})
        state = http.get(f"{url}/jobs/{job}").json()["state"]
        info = http.get(f"{url}/indexes/r").json()
        write = http.post(f"{url}/indexes/r/documents", json={"documents": [{"id": "x", "text": "x"}]})
        assert state in ("queued", "running"), "the job ended before the searches: make it longer"
        assert during.status_code == 200, during.text  # was 409 "being written by an ingest job"
        hits = during.json()["hits"][0]
        assert hits and hits[0]["source_id"] == "d3"  # the documents committed before the job
        # the job writes through the index's writer: the count may include its first rows
        assert info["state"] == "busy" and info["count"] >= 200 and "last commit" in info["reads"]
        assert write.status_code == 409 and "being written by an ingest job" in write.json()["detail"]
        deadline = time.monotonic() + 600
        rec = http.get(f"{url}/jobs/{job}").json()
        while rec["state"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.5)
            rec = http.get(f"{url}/jobs/{job}").json()
        assert rec["state"] == "done", rec
        after = http.post(f"{url}/indexes/r/search", json={"texts": [texts[900]], "k": 3}).json()
        assert "hits" in after, (after, http.get(f"{url}/indexes/r").json())
        assert after["hits"][0][0]["source_id"] == "m700"
        assert http.get(f"{url}/indexes/r").json()["count"] == 1000


def test_put_sets_the_prefixes_and_searches_use_them(tmp_path, encoder):
    """``PUT /indexes/NAME`` takes ``doc_prefix`` / ``query_prefix`` (issue 35): documents and
    the fit sample are encoded after the one, text searches after the other, also once a new
    server reopened the index; re-creating it with other prefixes is a 409."""
    from slimvec.index.folder import open_index

    texts, doc, query = bundled_sentences(40), "passage: ", "query: "
    questions = [texts[3][:40], "a question about the weather"]
    body = {"reducer": "none", "store": "hnsw", "keep_full": "float32", "encoder": "minilm",
            "doc_prefix": doc, "query_prefix": query, "sample_texts": texts[:20]}
    want = encoder.encode([query + q for q in questions])
    assert np.abs(want - encoder.encode(questions)).max() > 1e-2  # the prefix changes them
    root = tmp_path / "root"
    root.mkdir()
    for restart in (False, True):  # the second server reopens the index from its manifest
        with Server(root) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
            if not restart:
                assert http.put("/indexes/p", json=body).status_code == 201
                docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)]
                assert http.post("/indexes/p/documents", json={"documents": docs}).json()["committed"]
            info = http.get("/indexes/p").json()
            assert (info["doc_prefix"], info["query_prefix"]) == (doc, query)
            assert http.put("/indexes/p", json=body).status_code == 200  # the same index
            other = http.put("/indexes/p", json={**body, "query_prefix": "query:"})
            assert other.status_code == 409 and "query_prefix" in other.text, other.text
            by_text = http.post("/indexes/p/search", json={"texts": questions, "k": 5}).json()
            by_vector = http.post("/indexes/p/search", json={"vectors": want.tolist(), "k": 5}).json()
            assert by_text["ids"] == by_vector["ids"]
            np.testing.assert_allclose(by_text["scores"], by_vector["scores"], atol=1e-5)
    with open_index(root / "p") as idx:
        stored, found = idx.full_vectors.get(doc_ids([f"d{i}" for i in range(40)]))
    assert found.all()
    np.testing.assert_allclose(stored, encoder.encode([doc + t for t in texts]), atol=2e-5)
