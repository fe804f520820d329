"""``slimvec serve`` measured on loopback (``python -m benchmarks service`` and ``qdrant-compat``).

``measure_service`` (bounded: stops by itself), on the unique sentences of the bundled STS-B
train file:

1. ingest: ``slimvec ingest`` of N new documents into an existing fitted index against the same
   N documents POSTed over HTTP (``clients`` concurrent writers, ``batch`` documents a request,
   every response a durable commit) into an index fitted on the same sample. Both sides encode
   the same texts: the file's later sentences are 1.5x longer in tokens, and splitting them
   between the two sides made HTTP look 0.65x the CLI when both encoded as fast per token;
2. search: in-process ``slimvec.open(DIR).search(text, k)`` against HTTP single-text searches at
   1, 4 and 16 concurrent clients, with dynamic batching (``--batch-wait-ms 2``) and without (0);
3. time from process start to ``/readyz`` (MiniLM loaded, index open);
4. RSS of an idle server holding one ``big``-vector index built with ``slimvec migrate`` from a
   .npy of random 384-d vectors (no encoder, so MiniLM is not loaded).

``measure_qdrant_compat``: RSS and p50 latency of ``query_points``, ``count`` and
``get_collection`` on one collection behind ``slimvec serve``'s Qdrant-compatible API through
qdrant-client's REST transport (``--n`` below the server's ``--fit-after``, 1,000: a collection
still collecting its fit sample, answered exactly from memory); the same collection in
qdrant-client's local mode (pure Python, in process) is a congruence reference only.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpora.sentences import pair_sentences, write_jsonl
from benchmarks.kinds.proc import ServeProcess, rss_mib, run_cli

__all__ = ["measure_service", "measure_qdrant_compat", "search_load"]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _summary(lat: list[float], wall: float) -> dict[str, float]:
    return {"qps": round(len(lat) / wall, 1), "p50_ms": round(_pct(lat, .5) * 1000, 2),
            "p99_ms": round(_pct(lat, .99) * 1000, 2)}


def search_load(url: str, name: str, queries: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads POSTing single-text searches for ``seconds``: QPS, p50/p99, errors."""
    import httpx

    lat: list[float] = []
    errors = [0]
    stop = time.monotonic() + seconds

    def worker(w: int) -> None:
        with httpx.Client(timeout=60) as c:
            i = w
            while True:  # at least one request per client, however late its thread started
                t0 = time.perf_counter()
                r = c.post(f"{url}/indexes/{name}/search",
                           json={"texts": [queries[i % len(queries)]], "k": 10, "payloads": False})
                lat.append(time.perf_counter() - t0)
                errors[0] += r.status_code != 200
                i += clients
                if time.monotonic() >= stop:
                    break

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"clients": clients, "requests": len(lat), "errors": errors[0],
            **_summary(lat, time.perf_counter() - t0)}


def _inprocess_search(index: Path, queries: list[str], seconds: float) -> dict[str, Any]:
    from slimvec.index.folder import open_index

    with open_index(index) as idx:
        idx.search(queries[:2], k=10)
        lat: list[float] = []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            t1 = time.perf_counter()
            idx.search(queries[len(lat) % len(queries)], k=10)
            lat.append(time.perf_counter() - t1)
        return {"clients": 1, **_summary(lat, time.perf_counter() - t0)}


def _build_args(reducer: str, recipe: str | None) -> list[str]:
    """The CLI options naming what the measured indexes are built with."""
    return ["--recipe", recipe] if recipe else ["--reducer", reducer]


def _http_ingest(url: str, fit: list[str], docs: list[str], reducer: str, batch: int, clients: int,
                 recipe: str | None = None) -> dict:
    import httpx

    from slimvec.errors import SlimvecError

    with httpx.Client(timeout=600) as c:
        spec = {"recipe": recipe} if recipe else {"reducer": reducer}
        made = c.put(f"{url}/indexes/http", json={**spec, "encoder": "minilm", "sample_texts": fit})
        if made.status_code != 201:
            raise SlimvecError(f"PUT /indexes/http answered {made.status_code}: {made.text[:500]}")
        c.post(f"{url}/indexes/http/documents", json={"documents": [{"text": "warm up"}]})
    chunks = [docs[i:i + batch] for i in range(0, len(docs), batch)]
    nxt, lock, failures = [0], threading.Lock(), []

    def writer() -> None:
        with httpx.Client(timeout=600) as c:
            while True:
                with lock:
                    if nxt[0] >= len(chunks):
                        return
                    chunk = chunks[nxt[0]]
                    nxt[0] += 1
                body = {"documents": [{"id": f"h{hash(t)}", "text": t} for t in chunk]}
                r = c.post(f"{url}/indexes/http/documents", json=body)
                if r.status_code != 200 or not r.json().get("committed"):
                    failures.append(r.text[:300])

    t0 = time.perf_counter()
    ws = [threading.Thread(target=writer) for _ in range(clients)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    secs = time.perf_counter() - t0
    if failures:
        raise SlimvecError(f"{len(failures)} HTTP ingest request(s) failed, first: {failures[0]}")
    return {"docs_per_s": round(len(docs) / secs, 1), "seconds": round(secs, 2)}


def _idle_rss(tmp: Path, big: int, reducer: str, recipe: str | None = None) -> dict[str, Any]:
    import httpx

    root = tmp / "bigroot"
    root.mkdir()
    X = np.random.default_rng(0).standard_normal((big, 384)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    np.save(tmp / "big.npy", X, allow_pickle=False)
    del X
    migrate_s, _ = run_cli(["migrate", "--from", str(tmp / "big.npy"), "--index", str(root / "big"),
                            *_build_args(reducer, recipe), "--json"])
    t0 = time.perf_counter()
    with ServeProcess(root) as srv:
        ready = time.perf_counter() - t0
        time.sleep(3)
        return {"migrate_big_s": round(migrate_s, 1), "big_start_to_ready_s": round(ready, 2),
                "idle_rss_big_mb": rss_mib(srv.pid), "big_count": httpx.get(f"{srv.url}/indexes/big").json()["count"]}


def measure_service(docs: int = 2000, fit: int = 1000, batch: int = 256, clients: int = 2,
                    seconds: float = 6.0, big: int = 100_000, reducer: str = "pca:96",
                    recipe: str | None = None) -> dict[str, Any]:
    """Run the bounded service load (see the module docstring); returns its figures. ``recipe``
    (when given) builds every index instead of ``reducer`` alone."""
    # as many sentences as when each side took its own N, so the 200 queries stay the same ones
    sents = pair_sentences(fit + 2 * docs + 200, files=("stsb-train.tsv",), collapse=False)
    fit_t, new_t = sents[:fit], sents[fit:fit + docs]  # the same new texts on both sides
    queries = sents[-200:]
    res: dict[str, Any] = {"docs": docs, "fit": fit, "batch": batch, "clients": clients, "reducer": reducer,
                           "recipe": recipe, "big": big}
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-service-") as name:
        tmp = Path(name)
        root = tmp / "root"
        root.mkdir()
        write_jsonl(tmp / "fit.jsonl", [{"id": f"f{i}", "text": t} for i, t in enumerate(fit_t)])
        write_jsonl(tmp / "cli.jsonl", [{"id": f"c{i}", "text": t} for i, t in enumerate(new_t)])
        run_cli(["ingest", str(tmp / "fit.jsonl"), "--index", str(root / "cli"), *_build_args(reducer, recipe), "--json"])
        _, s = run_cli(["ingest", str(tmp / "cli.jsonl"), "--index", str(root / "cli"), "--json"])
        res["ingest_cli"] = {"docs_per_s": s["docs_per_s"], "seconds": s["total_seconds"]}
        res["search_inprocess"] = _inprocess_search(root / "cli", queries, seconds)
        for wait_ms in (2.0, 0.0):
            t0 = time.perf_counter()
            with ServeProcess(root, "--batch-wait-ms", str(wait_ms)) as srv:
                if wait_ms:
                    res["start_to_ready_s"] = round(time.perf_counter() - t0, 2)
                    res["ingest_http"] = _http_ingest(srv.url, fit_t, new_t, reducer, batch, clients, recipe)
                search_load(srv.url, "cli", queries, 1, min(1.0, seconds))  # warm-up
                key = "search_http_batched" if wait_ms else "search_http_unbatched"
                res[key] = [search_load(srv.url, "cli", queries, c, seconds) for c in (1, 4, 16)]
                res.setdefault("rss_text_server_mb", rss_mib(srv.pid))
        res.update(_idle_rss(tmp, big, reducer, recipe))
    res["ingest_ratio_http_vs_cli"] = round(res["ingest_http"]["docs_per_s"] / res["ingest_cli"]["docs_per_s"], 3)
    return res


def _load_and_time(client: Any, X: np.ndarray, n: int, nq: int) -> dict[str, float]:
    from qdrant_client import models as m

    client.create_collection("bench", vectors_config=m.VectorParams(size=X.shape[1], distance=m.Distance.COSINE))
    t0 = time.perf_counter()
    for lo in range(0, n, 500):
        client.upsert("bench", wait=True, points=[
            m.PointStruct(id=i, vector=X[i].tolist(), payload={"row": i}) for i in range(lo, min(n, lo + 500))])
    load_s = time.perf_counter() - t0
    times: dict[str, list[float]] = {"query": [], "count": [], "get_collection": []}
    for q in X[n:n + nq]:
        t = time.perf_counter()
        client.query_points("bench", query=q.tolist(), limit=10, with_payload=True)
        times["query"].append(time.perf_counter() - t)
        for what, call in (("count", lambda: client.count("bench", exact=True)),
                           ("get_collection", lambda: client.get_collection("bench"))):
            t = time.perf_counter()
            call()
            times[what].append(time.perf_counter() - t)
    out = {"upsert_s": round(load_s, 2)}
    for what, ts in times.items():
        pre = "" if what == "query" else f"{what}_"
        out.update({f"{pre}p50_ms": round(1000 * statistics.median(ts), 2),
                    f"{pre}p95_ms": round(1000 * float(np.percentile(ts, 95)), 2)})
    return out


def measure_qdrant_compat(n: int = 5000, nq: int = 200, vectors: np.ndarray | None = None) -> dict[str, Any]:
    """Load ``n`` vectors through qdrant-client into ``slimvec serve`` and time ``nq`` queries.

    ``vectors`` (``n + nq`` rows) defaults to MiniLM vectors of the bundled STS-B train sentences
    from the test suite's encoding cache (encoded when missing).
    """
    import tracemalloc

    import httpx
    from qdrant_client import QdrantClient

    X = _minilm(n + nq) if vectors is None else np.asarray(vectors, dtype=np.float32)
    out: dict[str, Any] = {"n": n, "queries": nq, "dim": int(X.shape[1])}
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-qdrant-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with ServeProcess(root) as srv:
            rss_idle = rss_mib(srv.pid)
            res = _load_and_time(QdrantClient(url=srv.url, timeout=300), X, n, nq)
            info = QdrantClient(url=srv.url, timeout=300).get_collection("bench")
            state = httpx.get(f"{srv.url}/indexes/bench", timeout=60).json().get("state")
            out["slimvec_serve"] = {**res, "rss_idle_mib": rss_idle, "rss_loaded_mib": rss_mib(srv.pid),
                                    "points": info.points_count, "state": state,
                                    "recipe": "server default"}
    tracemalloc.start()
    res = _load_and_time(QdrantClient(":memory:"), X, n, nq)
    out["qdrant_client_memory_reference"] = {
        **res, "python_heap_peak_mib": round(tracemalloc.get_traced_memory()[1] / 2 ** 20, 1),
        "note": "pure-Python local mode in process: a congruence reference, not a fair timing"}
    tracemalloc.stop()
    return out


def _minilm(count: int) -> np.ndarray:
    from benchmarks.corpora.sentences import suite_cache_dir
    from slimvec.benchmarks.encoding_cache import EncodingCache
    from slimvec.encoder import Encoder

    enc = Encoder()
    texts = pair_sentences(count, files=("stsb-train.tsv",), collapse=False)
    return np.asarray(EncodingCache(suite_cache_dir(), enc.fingerprint).encode(enc, texts), dtype=np.float32)
