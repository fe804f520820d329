"""The README's service quick-start, run as written, and what it relies on: an index created
without a sample answers searches from its first document (exact search until its reducer is
fitted), a job can fill an index that is still collecting its fit sample, and ``POST .../fit``
fits it now."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import slimvec
from tests.conftest import bundled_sentences, readme_commands
from tests.service.server import Server, free_port


def test_readme_service_quickstart_runs_as_written(tmp_path):
    """Every command of the block runs as written; only the port (8000 -> a free loopback port)
    and the allowed folder (/data/corpora -> a temp folder) are substituted, and the foreground
    ``slimvec serve`` is started in the background with a bounded readiness wait."""
    commands = readme_commands("Serve")
    assert any(c.startswith("slimvec serve") for c in commands), commands
    port = free_port()
    data = tmp_path / "data" / "corpora"
    data.mkdir(parents=True)
    sentences = bundled_sentences(300)
    (data / "docs.jsonl").write_text("".join(
        json.dumps({"id": f"d{i}", "text": s}) + "\n" for i, s in enumerate(sentences)), "utf-8")
    (tmp_path / "indexes").mkdir()
    lines = ["set -euo pipefail",
             # every curl of the block must succeed (a 409 fails the script) and end its line
             "curl() { command curl -sS --fail-with-body --max-time 300 -w '\\n' \"$@\"; }"]
    for cmd in commands:
        cmd = cmd.replace("localhost:8000", f"127.0.0.1:{port}").replace(
            "--port 8000", f"--port {port}").replace("/data/corpora", str(data))
        if cmd.startswith("slimvec serve"):
            cmd = cmd.split("#")[0].strip()
            lines += [f"{cmd} > serve.log 2>&1 &", "SERVER=$!",
                      # wait for its exit: it holds the index's writer lock until then
                      "trap 'kill $SERVER; wait $SERVER || true' EXIT",
                      f"for i in $(seq 1 400); do command curl -s 127.0.0.1:{port}/healthz "
                      "> /dev/null && break; sleep 0.25; done"]
        else:
            lines.append(cmd)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("SLIMVEC_API_KEY", None)
    script = "\n".join(lines) + "\n" + _wait_for_job(port)
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=400)
    log = (tmp_path / "serve.log").read_text() if (tmp_path / "serve.log").exists() else ""
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n--- server log\n{log[-3000:]}"
    outputs = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    search = next(o for o in outputs if "hits" in o)
    assert search["hits"][0][0]["source_id"] == "a1"  # the one document, found before the fit
    job = outputs[-1]
    assert job["state"] == "done", job
    with slimvec.open(tmp_path / "indexes" / "docs") as idx:  # the job's file + the early doc
        assert idx.info()["count"] == 301


def _wait_for_job(port: int) -> str:
    """Bash that polls the last job (the block's last answer) until it ends, then prints it."""
    return (
        "JOB=$(ls indexes/.jobs | head -1 | sed 's/.json$//')\n"
        "for i in $(seq 1 600); do\n"
        f"  OUT=$(command curl -sS -H \"$H\" 127.0.0.1:{port}/jobs/$JOB)\n"
        "  case \"$OUT\" in *'\"state\":\"done\"'*|*'\"state\":\"failed\"'*) break;; esac\n"
        "  sleep 0.5\n"
        "done\n"
        "echo \"$OUT\"\n")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return bundled_sentences(200)


def test_pending_index_is_searchable_then_fitted_on_demand(tmp_path, texts):
    root = tmp_path / "root"
    root.mkdir()
    with Server(root) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        body = {"reducer": "pca:8", "store": "hnsw", "encoder": "minilm", "fit_after": 1000}
        assert http.put("/indexes/p", json=body).status_code == 201
        docs = [{"id": f"x{i}", "text": t, "payload": {"n": i}} for i, t in enumerate(texts[:40])]
        out = http.post("/indexes/p/documents", json={"documents": docs}).json()
        assert out["pending_fit"] and out["accepted"] == 40
        # a later version of a document replaces the earlier one in the pending search too
        http.post("/indexes/p/documents", json={"documents": [
            {"id": "x3", "text": texts[3], "payload": {"n": "new"}}]})
        r = http.post("/indexes/p/search", json={"texts": [texts[3], texts[7]], "k": 3})
        assert r.status_code == 200, r.text
        hits = r.json()["hits"]
        assert hits[0][0]["source_id"] == "x3" and hits[0][0]["payload"]["n"] == "new"
        assert hits[1][0]["source_id"] == "x7" and hits[1][0]["score"] == pytest.approx(1, abs=1e-4)
        assert len({h["source_id"] for h in hits[0]}) == 3  # no duplicate of the replaced row
        before = r.json()["ids"]
        r = http.post("/indexes/p/search", json={"vectors": [[0.1] * 5], "k": 3})
        assert r.status_code == 422 and "dimension 384" in r.json()["detail"]

        fitted = http.post("/indexes/p/fit")
        assert fitted.status_code == 200, fitted.text
        assert fitted.json()["state"] == "ready" and fitted.json()["count"] == 40
        assert http.post("/indexes/p/fit").status_code == 409  # fitted already
        after = http.post("/indexes/p/search", json={"texts": [texts[3], texts[7]], "k": 3})
        assert after.json()["ids"][0][0] == before[0][0] and after.json()["ids"][1][0] == before[1][0]


def test_fit_with_too_few_documents_says_so_and_keeps_them(tmp_path, texts):
    root = tmp_path / "root"
    root.mkdir()
    with Server(root) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        http.put("/indexes/s", json={"reducer": "pca:16", "store": "hnsw", "encoder": "minilm"})
        assert http.post("/indexes/s/fit").status_code == 422  # nothing collected yet
        http.post("/indexes/s/documents", json={"documents": [{"id": 1, "text": texts[0]},
                                                              {"id": 2, "text": texts[1]}]})
        r = http.post("/indexes/s/fit")
        assert r.status_code == 422 and "at least 16" in r.json()["detail"], r.text
        info = http.get("/indexes/s").json()
        assert info["state"] == "pending" and info["pending"] == 2
        assert not (root / "s").exists()  # no half-made index folder left behind
        hit = http.post("/indexes/s/search", json={"texts": [texts[1]], "k": 1}).json()
        assert hit["hits"][0][0]["source_id"] == 2


def test_job_into_an_index_collecting_its_sample(tmp_path, texts):
    root = tmp_path / "root"
    data = tmp_path / "data"
    root.mkdir()
    data.mkdir()
    (data / "docs.jsonl").write_text("".join(
        json.dumps({"id": f"f{i}", "text": t}) + "\n" for i, t in enumerate(texts[50:200])))
    with Server(root, "--allow-dir", str(data)) as srv, \
            httpx.Client(base_url=srv.url, timeout=120) as http:
        http.put("/indexes/j", json={"reducer": "pca:16", "store": "hnsw", "encoder": "minilm"})
        http.post("/indexes/j/documents", json={"documents": [{"id": "early", "text": texts[0]}]})
        clash = http.post("/indexes/j/jobs", json={"path": str(data / "docs.jsonl"),
                                                    "reducer": "rp:16"})
        assert clash.status_code == 409 and "pca:16" in clash.json()["detail"]
        r = http.post("/indexes/j/jobs", json={"path": str(data / "docs.jsonl")})
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 180
        rec = r.json()
        while rec["state"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.3)
            rec = http.get(f"/jobs/{rec['id']}").json()
        assert rec["state"] == "done", rec
        info = http.get("/indexes/j").json()
        assert info["state"] == "ready" and info["count"] == 151, info
        assert info["reducer"].startswith("pca:16")
        top = http.post("/indexes/j/search", json={"texts": [texts[0]], "k": 1}).json()
        assert top["hits"][0][0]["source_id"] == "early"
