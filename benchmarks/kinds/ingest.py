"""Ingest throughput against the encoder (``python -m benchmarks ingest`` and ``ingest-ceiling``).

``measure_ingest``: per store, encoder-only documents/s over the corpus measured right before the
store's full ``ingest`` (``pca:96``, whole wall time: sampling pass, fit-sample encoding, fit,
streaming, index build), the ratio of the two, allocated bytes at full dimension (``none``) and
with ``pca:96``, and the p50 single-query search latency (reduced queries, k=10, after warm-up).

``measure_ceiling``: the ceiling is the *best* encoder-only run of the same texts: one
``Encoder.encode`` over the whole list (length-sorted, so batches pad little) at 32 and at 128
sentences per pass, on one torch thread and on every core, the fastest, re-run before each store's
ingest (model loading excluded). The store ``default`` runs plain ``slimvec ingest``: the default recipe, the reducer
ignored.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["INGEST_STORES", "measure_ingest", "ingest_markdown", "measure_ceiling", "ceiling_markdown",
           "MatrixEncoder", "measure_pipeline", "pipeline_markdown"]

log = logging.getLogger(__name__)

INGEST_STORES = ("qdrant-edge", "qdrant", "faiss", "hnsw")


def _p50_search_ms(index: Path, queries: np.ndarray) -> float:
    from slimvec.index.folder import open_index

    with open_index(index) as idx:
        reduced = idx.reducer.transform(queries)
        idx.store.search(reduced[:20], 10)  # warm-up
        times = []
        for q in reduced:
            t0 = time.perf_counter()
            idx.store.search(q[None, :], 10)
            times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1000)


def measure_ingest(corpus: Path, stores: Sequence[str] = INGEST_STORES, batch_size: int = 256,
                   reducer: str = "pca:96") -> dict[str, Any]:
    """Measure ingest against encoder-only per store on a JSONL corpus.

    Returns
    -------
    dict
        ``{"corpus", "documents", "batch_size", "reducer", "rows": [{"store",
        "encoder_docs_per_s", "ingest_docs_per_s", "ratio", "bytes_full", "bytes_reduced",
        "p50_search_ms"}]}``.
    """
    from benchmarks.corpora.sentences import jsonl_rows
    from slimvec.encoder import Encoder
    from slimvec.index.folder import open_index
    from slimvec.indexer.pipeline import IngestOptions, ingest

    texts = [str(r["text"]) for r in jsonl_rows(corpus)]
    enc = Encoder(batch_size=128)
    enc.encode(texts[:256])  # warm-up
    queries = enc.encode(texts[:200])
    rows = []
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-ingest-") as tmp:
        for store in stores:
            t0 = time.perf_counter()
            for i in range(0, len(texts), batch_size):
                enc.encode(texts[i:i + batch_size])
            enc_dps = len(texts) / (time.perf_counter() - t0)
            sizes, rate, p50 = {}, 0.0, 0.0
            for red in ("none", reducer):
                index = Path(tmp) / f"{store}-{red.replace(':', '')}"
                summary = ingest(corpus, index, IngestOptions(reducer=red, store=store, batch_size=batch_size,
                                                              progress=False))
                with open_index(index) as idx:
                    sizes[red] = idx.store.size_bytes()
                if red != "none":
                    rate = summary.ingested / summary.total_seconds
                    p50 = _p50_search_ms(index, queries)
            rows.append({"store": store, "encoder_docs_per_s": round(enc_dps, 1), "ingest_docs_per_s": round(rate, 1),
                         "ratio": round(rate / enc_dps, 3), "bytes_full": sizes["none"],
                         "bytes_reduced": sizes[reducer], "p50_search_ms": round(p50, 4)})
            log.info("%s: %s", store, rows[-1])
    return {"corpus": str(corpus), "documents": len(texts), "batch_size": batch_size, "reducer": reducer,
            "rows": rows}


def ingest_markdown(result: dict[str, Any]) -> str:
    """The Markdown table of docs/benchmarks/ingest-table.md from :func:`measure_ingest`'s result."""
    n, red = result["documents"], result["reducer"]
    lines = [
        f"Corpus: {result['corpus']} ({n:,} documents), encoder all-MiniLM-L6-v2 (384-d) on CPU, "
        f"batch {result['batch_size']}. Encoder-only is re-measured right before each store's ingest.",
        "",
        f"| store | encoder-only docs/s | ingest docs/s ({red}) | ratio | bytes on disk, 384-d (none) | "
        f"bytes on disk ({red}) | bytes/vector 384-d | bytes/vector ({red}) | p50 search ms ({red}) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        lines.append(f"| {r['store']} | {r['encoder_docs_per_s']:,.0f} | {r['ingest_docs_per_s']:,.0f} | "
                     f"{r['ratio']:.2f} | {r['bytes_full']:,} | {r['bytes_reduced']:,} | "
                     f"{r['bytes_full'] / n:,.0f} | {r['bytes_reduced'] / n:,.0f} | {r['p50_search_ms']:.3f} |")
    return "\n".join(lines) + "\n"


def measure_ceiling(texts: Sequence[str], stores: Sequence[str] = ("qdrant-edge", "hnsw", "faiss"),
                    reducer: str = "pca:96", batches: Sequence[int] = (32, 128),
                    threads: Sequence[int] = ()) -> dict[str, Any]:
    """Measure each store's ``ingest`` against a fresh encoder-only ceiling run before it.

    The ceiling is the best of one ``Encoder.encode`` over every text at each batch size in
    ``batches`` and each torch thread count of ``threads`` (default: 1 and every core; length-sorted, so
    batches pad little; model loading excluded). The ingest runs as a user's would, its encoder
    threads chosen by :func:`slimvec.encoder.default_encoder_threads` (recorded).

    Returns
    -------
    dict
        ``{"documents", "reducer", "batches", "rows": [{"store", "encoder_docs_per_s":
        {"b32/t1": rate, ...}, "ceiling_docs_per_s", "ingest_docs_per_s", "ratio", "ingest_s",
        "encode_s", "ingest_threads"}]}``.
    """
    import os

    from slimvec.encoder import Encoder, default_encoder_threads, encoder_threads
    from slimvec.indexer.pipeline import IngestOptions, ingest

    texts = list(texts)
    encoders = [Encoder("minilm", batch_size=b) for b in batches]
    for encoder in encoders:
        encoder.encode(texts[:64])  # warm-up
    threads = sorted(set(threads) or {1, os.cpu_count() or 1})
    rows = []
    with tempfile.TemporaryDirectory(prefix="slimvec-ceiling-") as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
        for store in stores:
            rates = {}
            for n_threads in threads:
                with encoder_threads(n_threads):
                    for encoder in encoders:
                        t0 = time.perf_counter()
                        encoder.encode(texts)
                        rates[f"b{encoder.batch_size}/t{n_threads}"] = round(len(texts) / (time.perf_counter() - t0), 1)
            ceiling = max(rates.values())
            # "default": plain `slimvec ingest` (the default recipe: full vectors kept as float16
            # and the rescoring depth calibrated at the end, both inside the measured time)
            opts = IngestOptions(progress=False) if store == "default" else IngestOptions(
                reducer=reducer, store=store, progress=False)
            chosen = default_encoder_threads()  # what the ingest below picks (it samples again)
            summary = ingest(corpus, Path(tmp) / f"index-{store}", opts)
            rate = summary.ingested / summary.total_seconds
            rows.append({"store": store, "encoder_docs_per_s": rates, "ceiling_docs_per_s": ceiling,
                         "ingest_docs_per_s": round(rate, 1), "ratio": round(rate / ceiling, 3),
                         "ingest_s": round(summary.total_seconds, 2), "encode_s": round(summary.encode_seconds, 2),
                         "ingest_threads": chosen})
            log.info("%s: %s", store, rows[-1])
    return {"documents": len(texts), "reducer": reducer, "batches": list(batches), "rows": rows}


def ceiling_markdown(result: dict[str, Any]) -> str:
    """The Markdown table of docs/benchmarks/ingest.md's ceiling section."""
    batches = " and ".join(str(b) for b in result["batches"])
    lines = [f"Corpus: {result['documents']:,} unique bundled sentences, one per line; all-MiniLM-L6-v2 on "
             f"CPU; reducer {result['reducer']} (the store 'default' is the default recipe); ceiling = the "
             f"fastest one length-sorted `Encoder.encode` over all texts at {batches} sentences per pass and "
             "1 or every torch thread, re-run before each store; the ingest's encoder threads are its default.",
             "", "| store | ceiling docs/s (best of) | ingest docs/s | encoder threads | ratio | ingest s | "
             "stream encoding s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        rates = r["encoder_docs_per_s"]
        best = max(rates, key=lambda name: rates[name]) if isinstance(rates, dict) and rates else ""
        lines.append(f"| {r['store']} | {r['ceiling_docs_per_s']:,.0f} ({best}) | {r['ingest_docs_per_s']:,.0f} | "
                     f"{r.get('ingest_threads', '–')} | {r['ratio']:.2f} | {r['ingest_s']:.1f} | {r['encode_s']:.1f} |")
    return "\n".join(lines) + "\n"


class MatrixEncoder:
    """The ingest's encoder with the model call removed: each text's vector is looked up in a
    precomputed matrix (one row per corpus text), behind :class:`~slimvec.encoder.Encoder`'s
    interface (``name``, ``dim``, ``batch_size``, ``max_seq_length``, ``model.tokenizer``,
    ``encode``). The real tokenizer still runs over every text ``encode`` gets (as
    sentence-transformers does before its forward pass, on the CPU even when the model is on a GPU)
    and for the truncation checks; only the forward pass is gone. Everything else the ingest does
    (reading, row checks, ids, the fit sample, the store, kept vectors, payloads, commits,
    calibration) is the unchanged code of ``slimvec ingest``.

    The matrix is unit rows of a rank-48 mixture plus a little noise (seeded), so the store and the
    calibration see clustered vectors as from a sentence encoder, not uniform noise.
    """

    def __init__(self, texts: Sequence[str], dim: int = 384, seed: int = 0,
                 batch_size: int = 32) -> None:
        from types import SimpleNamespace

        from transformers import AutoTokenizer

        from slimvec.models import resolve_model

        rng = np.random.default_rng(seed)
        n = len(texts)
        basis = rng.standard_normal((48, dim)).astype(np.float32)
        m = rng.standard_normal((n, 48)).astype(np.float32) @ basis
        m += 0.3 * rng.standard_normal((n, dim)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        self.matrix = m
        self.rows = {t: i for i, t in enumerate(texts)}
        self.dim, self.batch_size, self.name, self.device = dim, batch_size, "minilm", "cpu"
        self.max_seq_length = 256
        self.model = SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(
            str(resolve_model("minilm"))))

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """The texts' rows of the matrix, after tokenizing them as the model would."""
        texts = list(texts)
        for i in range(0, len(texts), self.batch_size):
            self.model.tokenizer(texts[i:i + self.batch_size], padding=True, truncation=True,
                                 max_length=self.max_seq_length, return_tensors="np")
        return self.matrix[[self.rows[t] for t in texts]]


def measure_pipeline(corpus: Path, docs: int = 200_000,
                     stores: Sequence[str] = ("default", "faiss", "hnsw", "qdrant-edge"),
                     threads: Sequence[int] = (1, 2), reducer: str = "pca:96",
                     recipe: str | None = None) -> dict[str, Any]:
    """docs/s of ``slimvec ingest`` without the model call (:class:`MatrixEncoder`), per store and
    thread count.

    Each run is confined to ``n`` cores (CPU affinity) with ``n`` FAISS OpenMP threads and ``n``
    torch threads, and timed whole (sampling pass, fit, stream, commits, calibration). The store
    ``default`` is the default recipe (or ``recipe``); the others get ``reducer``. Others' load is sampled before
    each run (:func:`~slimvec.encoder.busy_cores`).

    Returns
    -------
    dict
        ``{"documents", "reducer", "rows": [{"store", "threads", "seconds", "docs_per_s",
        "cpu_seconds", "others_cores"}]}`` (``cpu_seconds``: this process's, every thread).
    """
    import json
    import os

    import faiss

    from slimvec.encoder import busy_cores
    from slimvec.indexer.pipeline import IngestOptions, ingest
    from slimvec.recipe import DEFAULT_RECIPE

    texts = []
    with open(corpus, encoding="utf-8") as fh:
        for line in fh:
            texts.append(str(json.loads(line)["text"]))
            if len(texts) >= docs:
                break
    encoder = MatrixEncoder(texts)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    rows = []
    with tempfile.TemporaryDirectory(prefix="slimvec-pipeline-") as tmp:
        path = Path(tmp) / "corpus.jsonl"
        path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                                for i, t in enumerate(texts)), encoding="utf-8")
        for store in stores:
            for n in threads:
                opts = IngestOptions(progress=False, threads=n, encoder_instance=encoder)
                if recipe is not None:
                    opts = replace(opts, default_recipe=recipe)
                if store != "default":
                    opts = replace(opts, reducer=reducer, store=store, default_recipe=None)
                others = busy_cores(1.0)
                old_omp = faiss.omp_get_max_threads()
                if cpus:
                    os.sched_setaffinity(0, cpus[:n])
                faiss.omp_set_num_threads(n)
                try:
                    t0, c0 = time.perf_counter(), time.process_time()
                    summary = ingest(path, Path(tmp) / f"{store}-{n}", opts)
                    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
                finally:
                    faiss.omp_set_num_threads(old_omp)
                    if cpus:
                        os.sched_setaffinity(0, cpus)
                rows.append({"store": store, "threads": n, "seconds": round(seconds, 2),
                             "docs_per_s": round(summary.ingested / seconds, 1),
                             "cpu_seconds": round(cpu, 2),
                             "others_cores": None if others is None else round(others, 2)})
                log.info("pipeline %s", rows[-1])
    return {"documents": len(texts), "reducer": reducer, "recipe": recipe or DEFAULT_RECIPE, "rows": rows}


def pipeline_markdown(result: dict[str, Any]) -> str:
    """The Markdown table of :func:`measure_pipeline`'s result."""
    lines = [f"{result['documents']:,} real-text documents, the model call removed "
             f"(`MatrixEncoder`); `default` is {result.get('recipe', 'the default recipe')}, the other stores "
             f"have {result['reducer']}.", "",
             "| store | threads | seconds | docs/s | CPU s | docs per CPU s | others' cores busy |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        cpu = r.get("cpu_seconds") or 0.0
        per_cpu = f"{result['documents'] / cpu:,.0f}" if cpu else "–"
        lines.append(f"| {r['store']} | {r['threads']} | {r['seconds']:.1f} | {r['docs_per_s']:,.0f} | "
                     f"{cpu:.1f} | {per_cpu} | {r['others_cores']} |")
    return "\n".join(lines) + "\n"
