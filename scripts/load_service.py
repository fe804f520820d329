"""Bounded load run of ``slimvec serve`` on loopback (stops by itself), for docs/benchmarks/service.md.

Measures, in one run on the same corpus (unique sentences of the bundled STS-B train file):

1. ingest: CLI ``slimvec ingest`` of N new documents into an existing fitted index vs the same
   documents POSTed over HTTP (``--clients`` concurrent writers, ``--batch`` docs per request,
   ``wait=true``: every response is a durable commit), into an index fitted on the same sample;
2. search: in-process ``slimvec.open(DIR).search(text, k)`` vs HTTP single-text searches at 1, 4,
   16 concurrent clients, with dynamic batching (``--batch-wait-ms 2``) and without (0);
3. time from process start to ``/readyz`` (MiniLM loaded, index open);
4. RSS of an idle server holding one 100k-vector index built with ``slimvec migrate`` from a .npy
   of random 384-d vectors (no encoding time; the index has no encoder, so MiniLM is not loaded).

Usage: PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/load_service.py --out /tmp/load.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import bundled_sentences  # noqa: E402
from tests.service.server import Server  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
       "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _jsonl(path: Path, texts: list[str], prefix: str) -> None:
    path.write_text("".join(json.dumps({"id": f"{prefix}{i}", "text": t}) + "\n"
                            for i, t in enumerate(texts)))


def _cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True, text=True,
                         env=ENV, timeout=1800, check=True)
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _load(url: str, name: str, queries: list[str], clients: int, seconds: float) -> dict:
    lat: list[float] = []
    errors = [0]
    stop = time.monotonic() + seconds

    def worker(w: int) -> None:
        with httpx.Client(timeout=60) as c:
            i = w
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                r = c.post(f"{url}/indexes/{name}/search",
                           json={"texts": [queries[i % len(queries)]], "k": 10, "payloads": False})
                lat.append(time.perf_counter() - t0)
                errors[0] += r.status_code != 200
                i += clients

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "requests": len(lat), "errors": errors[0],
            "qps": round(len(lat) / wall, 1), "p50_ms": round(_pct(lat, 0.5) * 1000, 2),
            "p99_ms": round(_pct(lat, 0.99) * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2000, help="documents ingested each way")
    ap.add_argument("--fit", type=int, default=1000, help="documents the reducer is fitted on")
    ap.add_argument("--batch", type=int, default=256, help="documents per HTTP request")
    ap.add_argument("--clients", type=int, default=2, help="concurrent HTTP writers")
    ap.add_argument("--seconds", type=float, default=6.0, help="per search configuration")
    ap.add_argument("--big", type=int, default=100_000, help="vectors of the idle-RSS index")
    ap.add_argument("--reducer", default="pca:96")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    sents = bundled_sentences(a.fit + 2 * a.docs + 200)
    fit, cli_docs, http_docs = sents[:a.fit], sents[a.fit:a.fit + a.docs], sents[a.fit + a.docs:a.fit + 2 * a.docs]
    queries = sents[-200:]
    res: dict = {"docs": a.docs, "fit": a.fit, "batch": a.batch, "clients": a.clients,
                 "reducer": a.reducer, "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / "root"
        root.mkdir()
        _jsonl(tmp / "fit.jsonl", fit, "f")
        _jsonl(tmp / "cli.jsonl", cli_docs, "c")
        # --- ingest: CLI (existing fitted index, steady state; model load excluded by the CLI)
        _cli("ingest", str(tmp / "fit.jsonl"), "--index", str(root / "cli"), "--reducer", a.reducer,
             "--json")
        s = _cli("ingest", str(tmp / "cli.jsonl"), "--index", str(root / "cli"), "--json")
        res["ingest_cli"] = {"docs_per_s": s["docs_per_s"], "seconds": s["total_seconds"]}
        # --- in-process search on the CLI-built index
        import slimvec

        with slimvec.open(root / "cli") as idx:
            idx.search(queries[:2], k=10)
            lat = []
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < a.seconds:
                q = queries[len(lat) % len(queries)]
                t1 = time.perf_counter()
                idx.search(q, k=10)
                lat.append(time.perf_counter() - t1)
            res["search_inprocess"] = {"clients": 1, "qps": round(len(lat) / (time.perf_counter() - t0), 1),
                                       "p50_ms": round(_pct(lat, .5) * 1000, 2),
                                       "p99_ms": round(_pct(lat, .99) * 1000, 2)}
        # --- HTTP: start-to-ready, ingest, search with / without dynamic batching
        for wait_ms in (2.0, 0.0):
            t0 = time.perf_counter()
            with Server(root, "--batch-wait-ms", str(wait_ms), ready_timeout=600) as srv:
                ready_s = time.perf_counter() - t0
                url = srv.url
                if wait_ms:
                    res["start_to_ready_s"] = round(ready_s, 2)
                    with httpx.Client(timeout=600) as c:
                        body = {"reducer": a.reducer, "encoder": "minilm", "sample_texts": fit}
                        assert c.put(f"{url}/indexes/http", json=body).status_code == 201
                        c.post(f"{url}/indexes/http/documents", json={"documents": [{"text": "warm up"}]})
                    chunks = [http_docs[i:i + a.batch] for i in range(0, len(http_docs), a.batch)]
                    nxt = [0]
                    lock = threading.Lock()

                    def writer() -> None:
                        with httpx.Client(timeout=600) as c:
                            while True:
                                with lock:
                                    if nxt[0] >= len(chunks):
                                        return
                                    chunk = chunks[nxt[0]]
                                    nxt[0] += 1
                                docs = [{"id": f"h{hash(t)}", "text": t} for t in chunk]
                                r = c.post(f"{url}/indexes/http/documents", json={"documents": docs})
                                assert r.status_code == 200 and r.json()["committed"], r.text

                    t1 = time.perf_counter()
                    ws = [threading.Thread(target=writer) for _ in range(a.clients)]
                    for w in ws:
                        w.start()
                    for w in ws:
                        w.join()
                    secs = time.perf_counter() - t1
                    res["ingest_http"] = {"docs_per_s": round(len(http_docs) / secs, 1),
                                          "seconds": round(secs, 2)}
                key = "search_http_batched" if wait_ms else "search_http_unbatched"
                _load(url, "cli", queries, 1, 1.0)  # warm-up
                res[key] = [_load(url, "cli", queries, c, a.seconds) for c in (1, 4, 16)]
                rss = Path(f"/proc/{srv.proc.pid}/status").read_text()
                res.setdefault("rss_text_server_mb", round(int(
                    [x for x in rss.splitlines() if x.startswith("VmRSS")][0].split()[1]) / 1024, 1))
        # --- idle RSS with one 100k-vector index (migrate from .npy: no encoding)
        big_root = tmp / "bigroot"
        big_root.mkdir()
        X = np.random.default_rng(0).standard_normal((a.big, 384)).astype(np.float32)
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        np.save(tmp / "big.npy", X)
        del X
        t0 = time.perf_counter()
        _cli("migrate", "--from", str(tmp / "big.npy"), "--index", str(big_root / "big"),
             "--reducer", a.reducer, "--json")
        res["migrate_100k_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        with Server(big_root, ready_timeout=600) as srv:
            res["big_start_to_ready_s"] = round(time.perf_counter() - t0, 2)
            time.sleep(3)
            status = Path(f"/proc/{srv.proc.pid}/status").read_text()
            rss_kb = int([x for x in status.splitlines() if x.startswith("VmRSS")][0].split()[1])
            res["idle_rss_100k_mb"] = round(rss_kb / 1024, 1)
            res["big_count"] = httpx.get(f"{srv.url}/indexes/big").json()["count"]
    res["ingest_ratio_http_vs_cli"] = round(res["ingest_http"]["docs_per_s"]
                                            / res["ingest_cli"]["docs_per_s"], 3)
    res["loadavg_end"] = os.getloadavg()
    text = json.dumps(res, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
