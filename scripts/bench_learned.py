"""Quick measurement of the learned reducers' claims (issue 4); not a test, not the official bench.

- ``embedtextnet`` vs PCA at the same D on *task recall@10*: for duplicate pairs (score >= 4 in
  STS-B dev/test, paraphrases in MSRP) is the partner in the top 10 of the whole corpus (every
  sentence of those files) searched by the other side?  Also neighbour recall@10 against exact
  search on the full vectors.
- ``mcr2`` cluster-routed accuracy (share of duplicate pairs whose two sentences share a cluster)
  against FAISS spherical k-means with the same K, on the full vectors and on PCA-D vectors.

Reducers are fitted on train-split sentences only (STS-B train + SICK train); MCR² trains on their
pairs with score >= 4. MiniLM vectors are cached under ``--cache``.

Usage::

    python scripts/bench_learned.py embedtextnet --dims 16 --epochs 30
    python scripts/bench_learned.py mcr2 --dims 128 --clusters 128
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
from pathlib import Path

import numpy as np

from slimvec.reducers import make_reducer

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"
log = logging.getLogger("bench_learned")


def read_pairs(name: str, min_score: float | None = None) -> list[tuple[str, str, float]]:
    rows = []
    with open(DATA / name, encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            s1, s2, score = line.rstrip("\n").split("\t")
            if min_score is None or float(score) >= min_score:
                rows.append((s1, s2, float(score)))
    return rows


def encode_cached(texts: list[str], cache: Path) -> np.ndarray:
    from slimvec.indexer.encoder import Encoder

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"minilm-{key}.npy"
    if path.exists():
        return np.load(path, allow_pickle=False)
    t0 = time.perf_counter()
    vecs = Encoder().encode(texts)
    log.info("encoded %d sentences in %.1fs", len(texts), time.perf_counter() - t0)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs, allow_pickle=False)
    return vecs


def load_data(cache: Path) -> dict:
    """Train sentences + train pairs; eval corpus + duplicate pairs as corpus row indices."""
    train_rows = read_pairs("stsb-train.tsv") + read_pairs("sick-train.tsv")
    train_texts = list(dict.fromkeys(t for s1, s2, _ in train_rows for t in (s1, s2)))
    pos = {t: i for i, t in enumerate(train_texts)}
    train_pairs = np.array([(pos[s1], pos[s2]) for s1, s2, sc in train_rows if sc >= 4 and s1 != s2])
    eval_rows = read_pairs("stsb-dev.tsv") + read_pairs("stsb-test.tsv") + read_pairs("msrp-train.tsv")
    corpus = list(dict.fromkeys(t for s1, s2, _ in eval_rows for t in (s1, s2)))
    cpos = {t: i for i, t in enumerate(corpus)}
    dups = np.array([(cpos[s1], cpos[s2]) for s1, s2, sc in eval_rows if sc >= 4 and s1 != s2])
    return {
        "X_train": encode_cached(train_texts, cache),
        "train_pairs": train_pairs,
        "X_corpus": encode_cached(corpus, cache),
        "dups": dups,
    }


def task_recall(Z: np.ndarray, dups: np.ndarray, k: int = 10) -> float:
    """Share of duplicate pairs (both directions) whose partner is in the query's top k."""
    import faiss

    Z = np.ascontiguousarray(Z, dtype=np.float32)
    index = faiss.IndexFlatIP(Z.shape[1])
    index.add(Z)
    q = np.concatenate([dups[:, 0], dups[:, 1]])
    target = np.concatenate([dups[:, 1], dups[:, 0]])
    _, ids = index.search(Z[q], k + 1)  # +1: the query itself is usually first
    hits = [(t in row[row != qi][:k]) for qi, t, row in zip(q, target, ids)]
    return float(np.mean(hits))


def neighbour_recall(Z: np.ndarray, X: np.ndarray, k: int = 10, n_queries: int = 2000) -> float:
    import faiss

    rng = np.random.default_rng(0)
    q = rng.choice(X.shape[0], size=min(n_queries, X.shape[0]), replace=False)
    _, gt = faiss.knn(np.ascontiguousarray(X[q]), X, k + 1)
    _, got = faiss.knn(np.ascontiguousarray(Z[q]), np.ascontiguousarray(Z), k + 1)
    return float(np.mean([len(set(a[1:]) & set(b[1:])) / k for a, b in zip(gt, got)]))


def same_cluster(ids: np.ndarray, dups: np.ndarray) -> dict:
    counts = np.bincount(ids)
    p = counts[counts > 0] / counts.sum()
    return {
        "same_cluster": float(np.mean(ids[dups[:, 0]] == ids[dups[:, 1]])),
        "clusters_used": int((counts > 0).sum()),
        "effective_clusters": float(np.exp(-(p * np.log(p)).sum())),
        "largest_cluster_share": float(p.max()),
    }


def kmeans_ids(Z: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, float]:
    import faiss

    t0 = time.perf_counter()
    km = faiss.Kmeans(Z.shape[1], k, niter=20, spherical=True, seed=seed, verbose=False)
    km.train(np.ascontiguousarray(Z, dtype=np.float32))
    _, ids = km.index.search(np.ascontiguousarray(Z, dtype=np.float32), 1)
    return ids[:, 0], time.perf_counter() - t0


def run_embedtextnet(data: dict, dims: list[int], epochs: int, seed: int, extra: str = "") -> list[dict]:
    rows = []
    Xc, dups = data["X_corpus"], data["dups"]
    rows.append({"reducer": "none", "dim": Xc.shape[1], "task_recall@10": task_recall(Xc, dups)})
    for d in dims:
        for spec in (f"pca:{d}", f"embedtextnet:{d},epochs={epochs},seed={seed}{extra}"):
            t0 = time.perf_counter()
            red = make_reducer(spec).fit(data["X_train"])
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            Z = red.transform(Xc)
            transform_s = time.perf_counter() - t0
            rows.append({
                "reducer": spec, "dim": d, "fit_s": round(fit_s, 1),
                "transform_ms_per_1k": round(1000 * transform_s / len(Xc) * 1000, 2),
                "task_recall@10": task_recall(Z, dups),
                "neighbour_recall@10": neighbour_recall(Z, Xc),
            })
            log.info("%s", rows[-1])
    return rows


def run_mcr2(data: dict, dims: list[int], clusters: int, epochs: int, seed: int, extra: str) -> list[dict]:
    rows = []
    Xc, dups = data["X_corpus"], data["dups"]
    ids, secs = kmeans_ids(Xc, clusters, seed)
    rows.append({"clusters": f"faiss spherical k-means K={clusters}, full {Xc.shape[1]}-d",
                 "assign_s": round(secs, 2), **same_cluster(ids, dups)})
    log.info("%s", rows[-1])
    for d in dims:
        Zp = make_reducer(f"pca:{d}").fit(data["X_train"]).transform(Xc)
        ids, secs = kmeans_ids(Zp, clusters, seed)
        rows.append({"clusters": f"faiss spherical k-means K={clusters}, pca:{d}",
                     "assign_s": round(secs, 2), **same_cluster(ids, dups),
                     "task_recall@10": task_recall(Zp, dups)})
        log.info("%s", rows[-1])
        spec = f"mcr2:{d},clusters={clusters},epochs={epochs},seed={seed}{extra}"
        t0 = time.perf_counter()
        red = make_reducer(spec).fit(data["X_train"], pairs=data["train_pairs"])
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        Z, ids = red.transform_with_clusters(Xc)
        secs = time.perf_counter() - t0
        rows.append({"clusters": spec, "fit_s": round(fit_s, 1), "assign_s": round(secs, 2),
                     "collapsed": red.collapsed_, **same_cluster(ids, dups),
                     "task_recall@10": task_recall(Z, dups)})
        log.info("%s", rows[-1])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["embedtextnet", "mcr2"])
    ap.add_argument("--dims", type=int, nargs="+", default=[16])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--clusters", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra", default="", help="extra spec options, e.g. ',eps2=0.2' or ',gamma=1000'")
    ap.add_argument("--fit-max", type=int, default=None,
                    help="fit on this many train sentences (first ones; pairs kept among them)")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "slimvec-bench")
    ap.add_argument("--out", type=Path, default=None, help="write rows as JSON here")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    data = load_data(args.cache)
    log.info("train %d sentences, %d pairs; corpus %d sentences, %d duplicate pairs",
             len(data["X_train"]), len(data["train_pairs"]), len(data["X_corpus"]), len(data["dups"]))
    if args.fit_max:
        n = args.fit_max
        data["X_train"] = data["X_train"][:n]
        tp = data["train_pairs"]
        data["train_pairs"] = tp[(tp < n).all(axis=1)]
    if args.what == "embedtextnet":
        rows = run_embedtextnet(data, args.dims, args.epochs, args.seed, args.extra)
    else:
        rows = run_mcr2(data, args.dims, args.clusters, args.epochs, args.seed, args.extra)
    text = json.dumps(rows, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
