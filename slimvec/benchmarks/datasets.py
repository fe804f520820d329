"""Benchmark datasets: what the runner searches, and the ground truth it scores against.

Four kinds of input end up as one :class:`BenchDataset`:

- sentence-pair TSV files (:func:`from_pairs`): the corpus is the union of unique sentences,
  duplicate pairs (score >= threshold) give the task queries, all pairs give STS;
- a vectors file (:func:`from_vectors`): ``.npy`` or Parquet with an id column and a vector column,
  with an optional queries file;
- an ann-benchmarks HDF5 file (:func:`from_hdf5`): ``train`` / ``test`` / ``neighbors``;
- a VectorDBBench folder (:func:`from_vectordbbench`): ``train.parquet`` / ``test.parquet`` /
  ``neighbors.parquet``.

Neighbour ground truth is exact search in the full-dimension space (the query itself excluded when
queries are corpus rows), or the dataset's own ``neighbors`` when it ships them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.benchmarks.metrics import drop_rows, exact_topk, recall_at_k, task_recall_mrr
from slimvec.benchmarks.pairs import PairsCorpus, TrainPairs
from slimvec.errors import ConfigError
from slimvec.sources.checks import check_vector_column, check_vector_dtype, npy_dtype

__all__ = [
    "BenchDataset",
    "from_pairs",
    "from_vectors",
    "from_hdf5",
    "from_vectordbbench",
    "load_vector_file",
    "load_dataset_path",
    "choose_sts_file",
    "encode_pairs_dataset",
    "pairs_datasets",
]

log = logging.getLogger(__name__)

K_TRUTH = 10


@dataclass
class BenchDataset:
    """Everything one benchmark dataset contributes to a run.

    Attributes
    ----------
    name : str
    corpus : ndarray float32 (n, dim)
        Full-dimension corpus vectors; store ids are ``row + 1``.
    queries : ndarray float32 (n_queries, dim)
    query_rows : ndarray int64 (n_queries,) or None
        Corpus row of each query (excluded from its own results), or None for outside queries.
    truth : ndarray int64 (n_queries, 10)
        Exact full-dimension top-10 corpus rows of each query.
    metric : str
        ``cosine`` (normalised vectors, inner product) or ``l2``.
    encoder : str or None
        Encoder name when the vectors were encoded here.
    task_query, task_target : ndarray int64
        Task entries: query index (into ``queries``) and the corpus row to find.
    dup_pairs : ndarray int64 (n, 2)
        Corpus rows of duplicate pairs (cluster-routed accuracy).
    sts : dict
        ``file name -> (rows_a, rows_b, gold scores)`` for STS Spearman.
    sts_file : str or None
        The file whose Spearman is the headline ``sts_spearman``.
    train_vectors : ndarray or None
        Vectors of the training-pair sentences (pairs-learning reducers only).
    train_pairs : ndarray int64 (n, 2) or None
        Rows of ``train_vectors`` forming positive pairs.
    notes : list of str
        Facts about the dataset for the report (rows skipped, pairs dropped...).
    """

    name: str
    corpus: np.ndarray
    queries: np.ndarray
    query_rows: np.ndarray | None
    truth: np.ndarray
    metric: str = "cosine"
    encoder: str | None = None
    task_query: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    task_target: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dup_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    sts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    sts_file: str | None = None
    train_vectors: np.ndarray | None = None
    train_pairs: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def dim(self) -> int:
        return int(self.corpus.shape[1])

    @property
    def has_task(self) -> bool:
        return len(self.task_query) > 0

    def quality(self, rows: np.ndarray, k: int) -> dict[str, Any]:
        """Neighbour recall@k against :attr:`truth` and task recall / MRR@k of found corpus
        ``rows`` (q, >= k + 1: each query's own row is dropped first when it is a corpus row)."""
        found = drop_rows(rows, self.query_rows, k)
        task_r, task_mrr = task_recall_mrr(found, self.task_query, self.task_target, k)
        return {"neighbor_recall_at_k": recall_at_k(found, self.truth, k),
                "task_recall_at_k": task_r, "task_mrr_at_k": task_mrr}

    def summary(self) -> dict[str, Any]:
        """JSON description for ``results.json``."""
        return {
            "name": self.name, "n_corpus": int(len(self.corpus)), "n_queries": int(len(self.queries)),
            "dim": self.dim, "metric": self.metric, "encoder": self.encoder,
            "n_task_queries": int(len(self.task_query)), "n_dup_pairs": int(len(self.dup_pairs)),
            "sts_files": sorted(self.sts), "sts_file": self.sts_file,
            "n_train_pairs": None if self.train_pairs is None else int(len(self.train_pairs)),
            "notes": list(self.notes),
        }


def choose_sts_file(names: list[str]) -> str | None:
    """Headline STS file: the first ``*sts*test*``, else the first ``*sts*``, else the first file."""
    for pred in (lambda n: "sts" in n and "test" in n, lambda n: "sts" in n, lambda n: True):
        for n in names:
            if pred(n.lower()):
                return n
    return None


def from_pairs(corpus: PairsCorpus, vectors: np.ndarray, *, name: str = "pairs",
               encoder: str | None = None, max_queries: int = 2000, seed: int = 0,
               train: TrainPairs | None = None, train_vectors: np.ndarray | None = None,
               sts_file: str | None = None) -> BenchDataset:
    """Build the dataset of a sentence-pair corpus whose sentences were encoded to ``vectors``.

    Queries are the sentences of duplicate pairs (both directions: each side looks for the
    other), at most ``max_queries`` unique sentences sampled with ``seed``.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if len(vectors) != len(corpus.texts):
        raise ConfigError(f"{len(corpus.texts)} corpus sentences but {len(vectors)} vectors.")
    dups = corpus.dup_pairs()
    notes = []
    if corpus.skipped:
        notes.append(f"{corpus.skipped} malformed pair row(s) skipped (--skip-bad-rows)")
    if len(dups) == 0:
        notes.append(f"no pair scores >= {corpus.dup_threshold}: task recall not measured")
    q_from = np.concatenate([dups[:, 0], dups[:, 1]])
    q_to = np.concatenate([dups[:, 1], dups[:, 0]])
    unique_q = np.unique(q_from)
    if len(unique_q) == 0:  # no duplicates: neighbour queries are a corpus sample
        rng = np.random.default_rng(seed)
        unique_q = np.sort(rng.choice(len(vectors), size=min(max_queries, len(vectors)),
                                      replace=False))
    elif len(unique_q) > max_queries:
        rng = np.random.default_rng(seed)
        unique_q = np.sort(rng.choice(unique_q, size=max_queries, replace=False))
        notes.append(f"queries: {max_queries} of the duplicate-pair sentences, sampled with seed {seed}")
    pos = {int(r): i for i, r in enumerate(unique_q)}
    keep = np.fromiter((int(r) in pos for r in q_from), dtype=bool, count=len(q_from))
    task_query = np.fromiter((pos[int(r)] for r in q_from[keep]), dtype=np.int64)
    task_target = q_to[keep].astype(np.int64)
    queries = vectors[unique_q]
    truth = exact_topk(vectors, queries, K_TRUTH, exclude=unique_q, metric="cosine")
    sts = {}
    for fname in corpus.files:
        idx = corpus.file_pairs(fname)
        sts[fname] = (corpus.pair_a[idx], corpus.pair_b[idx], corpus.scores[idx])
    ds = BenchDataset(
        name=name, corpus=vectors, queries=queries, query_rows=unique_q.astype(np.int64),
        truth=truth, metric="cosine", encoder=encoder, task_query=task_query,
        task_target=task_target, dup_pairs=dups, sts=sts,
        sts_file=sts_file if sts_file else choose_sts_file(corpus.files), notes=notes,
    )
    if ds.sts_file is not None and ds.sts_file not in sts:
        raise ConfigError(f"--sts-file {ds.sts_file!r} is not one of the --pairs files: "
                          f"{', '.join(corpus.files)}.")
    if train is not None and train_vectors is not None:
        ds.train_vectors = np.ascontiguousarray(train_vectors, dtype=np.float32)
        ds.train_pairs = train.pairs
        if train.dropped_overlap:
            notes.append(f"{train.dropped_overlap} training pair(s) dropped: also evaluation pairs")
    return ds


# --------------------------------------------------------------------------- vectors
def _require(found: set[str], needed: list[str], where: str, what: str) -> None:
    missing = [n for n in needed if n not in found]
    if missing:
        raise ConfigError(
            f"{where} has no {', '.join(repr(m) for m in missing)} {what}; found: "
            f"{', '.join(sorted(found)) or 'nothing'}. Expected {', '.join(needed)}."
        )


def _vector_column(table: Any, where: str, id_column: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of a pyarrow table: the list-typed column is the vector column."""
    import pyarrow as pa

    names = table.column_names
    list_cols = [n for n in names if pa.types.is_list(table.schema.field(n).type)
                 or pa.types.is_large_list(table.schema.field(n).type)
                 or pa.types.is_fixed_size_list(table.schema.field(n).type)]
    if not list_cols:
        raise ConfigError(f"{where} has no vector column (a list of floats); columns: {', '.join(names)}.")
    vec_col = "emb" if "emb" in list_cols else list_cols[0]
    id_col = id_column or ("id" if "id" in names else None)
    if id_col is None or id_col not in names:
        raise ConfigError(f"{where} has no id column {id_column or 'id'!r}; columns: {', '.join(names)}."
                          " Pass the id column's name.")
    check_vector_column(table.schema.field(vec_col).type, f"{where}: column {vec_col!r}")
    col = table.column(vec_col).combine_chunks()
    flat = np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    n = len(col)
    if n == 0 or flat.size % n:
        raise ConfigError(f"{where}: vectors in column {vec_col!r} do not all have the same length.")
    ids = np.asarray(table.column(id_col).to_numpy(zero_copy_only=False))
    return ids, flat.reshape(n, flat.size // n)


def load_vector_file(path: str | os.PathLike[str], id_column: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read ``.npy`` (ids are row numbers) or Parquet (id column + list-of-float column).

    Returns
    -------
    ids : ndarray
    vectors : ndarray float32 (n, dim)
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Vectors file {path} does not exist.")
    if path.suffix == ".npy":
        check_vector_dtype(npy_dtype(path), f"{path}: dtype")  # before loading: never unpickled
        try:
            arr = np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise ConfigError(f"{path} is not a numeric .npy array: {exc}.") from exc
        if arr.ndim != 2:
            raise ConfigError(f"{path}: expected a 2-D array (n, dim), got shape {arr.shape}.")
        return np.arange(len(arr)), np.ascontiguousarray(arr, dtype=np.float32)
    if path.suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        return _vector_column(pq.read_table(path), str(path), id_column)
    raise ConfigError(f"Vectors file {path}: expected .npy or .parquet, got {path.suffix or 'no suffix'}.")


def _normalise_if_cosine(x: np.ndarray, metric: str) -> np.ndarray:
    if metric != "cosine":
        return np.ascontiguousarray(x, dtype=np.float32)
    from slimvec.reducers.base import l2_normalize

    return l2_normalize(x)


def from_vectors(path: str | os.PathLike[str], queries_path: str | os.PathLike[str] | None = None, *,
                 metric: str = "cosine", max_queries: int = 1000, seed: int = 0,
                 id_column: str | None = None) -> BenchDataset:
    """A dataset of precomputed vectors; queries from ``queries_path`` or a corpus sample."""
    _ids, corpus = load_vector_file(path, id_column)
    corpus = _normalise_if_cosine(corpus, metric)
    notes = []
    if queries_path is not None:
        _qids, queries = load_vector_file(queries_path, id_column)
        if queries.shape[1] != corpus.shape[1]:
            raise ConfigError(f"Queries {queries_path} have dimension {queries.shape[1]}, the corpus "
                              f"{path} {corpus.shape[1]}. Use queries from the same encoder.")
        queries = _normalise_if_cosine(queries[:max_queries], metric)
        rows = None
    else:
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(len(corpus), size=min(max_queries, len(corpus)), replace=False))
        queries = corpus[rows]
        notes.append(f"queries: {len(rows)} corpus vectors (seed {seed}), each excluded from its own results")
    truth = exact_topk(corpus, queries, K_TRUTH, exclude=rows, metric=metric)
    return BenchDataset(Path(path).stem, corpus, queries, rows, truth, metric=metric, notes=notes)


def _ann_metric(distance: str) -> str:
    d = distance.lower()
    if d in ("angular", "cosine", "ip", "dot"):
        return "cosine"
    if d in ("euclidean", "l2"):
        return "l2"
    raise ConfigError(f"Unsupported dataset distance {distance!r}: expected angular/cosine or euclidean/l2.")


def from_hdf5(path: str | os.PathLike[str], *, max_queries: int = 1000) -> BenchDataset:
    """An ann-benchmarks HDF5 file with ``train``, ``test`` and ``neighbors`` datasets."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"HDF5 dataset {path} does not exist.")
    try:
        fh = h5py.File(path, "r")
    except OSError as exc:
        raise ConfigError(f"{path} is not a readable HDF5 file: {exc}.") from exc
    with fh:
        _require(set(fh.keys()), ["train", "test", "neighbors"], f"HDF5 dataset {path}", "field")
        metric = _ann_metric(str(fh.attrs.get("distance", "angular")))
        for name in ("train", "test"):
            check_vector_dtype(fh[name].dtype, f"{path}: dataset {name!r} dtype")
        corpus = _normalise_if_cosine(np.asarray(fh["train"]), metric)
        queries = _normalise_if_cosine(np.asarray(fh["test"])[:max_queries], metric)
        neighbors = np.asarray(fh["neighbors"])[:max_queries]
    return _with_given_truth(path.stem, corpus, queries, neighbors, metric, str(path))


def from_vectordbbench(folder: str | os.PathLike[str], *, max_queries: int = 1000,
                       metric: str = "cosine") -> BenchDataset:
    """A VectorDBBench dataset folder: ``train.parquet``, ``test.parquet``, ``neighbors.parquet``.

    ``train`` / ``test`` hold ``id`` and ``emb``; ``neighbors`` holds ``id`` and ``neighbors_id``.
    """
    import pyarrow.parquet as pq

    folder = Path(folder)
    found = {p.stem for p in folder.glob("*.parquet")} if folder.is_dir() else set()
    _require(found, ["train", "test", "neighbors"], f"VectorDBBench dataset {folder}", "parquet file")
    train_ids, corpus = _vector_column(pq.read_table(folder / "train.parquet"), str(folder / "train.parquet"), "id")
    test_ids, queries = _vector_column(pq.read_table(folder / "test.parquet"), str(folder / "test.parquet"), "id")
    nb = pq.read_table(folder / "neighbors.parquet")
    _require(set(nb.column_names), ["id", "neighbors_id"], str(folder / "neighbors.parquet"), "column")
    by_qid = dict(zip(nb.column("id").to_pylist(), nb.column("neighbors_id").to_pylist()))
    row_of = {int(i): r for r, i in enumerate(train_ids)}
    n_q = min(max_queries, len(queries))
    missing = [int(q) for q in test_ids[:n_q] if int(q) not in by_qid]
    if missing:
        raise ConfigError(f"{folder / 'neighbors.parquet'} has no neighbors_id for query id {missing[0]} "
                          f"({len(missing)} queries without ground truth).")
    neighbors = np.asarray([[row_of.get(int(i), -1) for i in by_qid[int(q)][:K_TRUTH]]
                            for q in test_ids[:n_q]], dtype=np.int64)
    corpus = _normalise_if_cosine(corpus, metric)
    queries = _normalise_if_cosine(queries[:n_q], metric)
    return _with_given_truth(folder.name, corpus, queries, neighbors, metric, str(folder))


def _with_given_truth(name: str, corpus: np.ndarray, queries: np.ndarray, neighbors: np.ndarray,
                      metric: str, where: str) -> BenchDataset:
    if queries.shape[1] != corpus.shape[1]:
        raise ConfigError(f"{where}: test vectors have dimension {queries.shape[1]}, train vectors "
                          f"{corpus.shape[1]}.")
    if neighbors.ndim != 2 or neighbors.shape[1] < K_TRUTH or len(neighbors) < len(queries):
        raise ConfigError(f"{where}: 'neighbors' must hold at least {K_TRUTH} ids for each of the "
                          f"{len(queries)} queries; got shape {neighbors.shape}.")
    truth = np.ascontiguousarray(neighbors[: len(queries), :K_TRUTH], dtype=np.int64)
    return BenchDataset(name, np.ascontiguousarray(corpus), np.ascontiguousarray(queries), None,
                        truth, metric=metric, notes=[f"ground truth: the dataset's own 'neighbors' ({where})"])


def load_dataset_path(path: str | os.PathLike[str], *, max_queries: int = 1000) -> BenchDataset:
    """An ann-benchmarks ``.hdf5`` file or a VectorDBBench folder, by what ``path`` is."""
    p = Path(path)
    if p.is_dir():
        return from_vectordbbench(p, max_queries=max_queries)
    if p.suffix in (".hdf5", ".h5"):
        return from_hdf5(p, max_queries=max_queries)
    raise ConfigError(f"Dataset {p}: expected an ann-benchmarks .hdf5 file or a VectorDBBench folder "
                      "with train/test/neighbors parquet files.")


def encode_pairs_dataset(corpus: PairsCorpus, encoder: Any, cache: Any, *, name: str,
                         max_queries: int, seed: int, train: TrainPairs | None,
                         sts_file: str | None,
                         on_progress: Callable[[int], None] | None = None) -> BenchDataset:
    """Encode (through the cache) the corpus and training sentences, then :func:`from_pairs`."""
    vectors = cache.encode(encoder, corpus.texts, on_progress=on_progress)
    train_vectors = None
    if train is not None and len(train.texts):
        train_vectors = cache.encode(encoder, train.texts, on_progress=on_progress)
    return from_pairs(corpus, vectors, name=name, encoder=encoder.name, max_queries=max_queries,
                      seed=seed, train=train, train_vectors=train_vectors, sts_file=sts_file)


def pairs_datasets(pairs: Sequence[str | os.PathLike[str]], encoders: Sequence[str | None], *,
                   train_pairs: Sequence[str | os.PathLike[str]] = (), dup_threshold: float = 4.0,
                   skip_bad_rows: bool = False, cache_dir: str | os.PathLike[str] | None = None,
                   max_queries: int = 2000, seed: int = 0, sts_file: str | None = None,
                   on_progress: Callable[[int], None] | None = None) -> list[BenchDataset]:
    """One dataset per encoder from sentence-pair files (encodings read from / added to the cache).

    Parameters
    ----------
    pairs : sequence of path
        Evaluation ``sentence1<TAB>sentence2<TAB>score`` files; their union is the corpus.
    encoders : sequence of str or None
        Encoder specs (``None`` = the packaged MiniLM); each gives its own dataset.
    train_pairs : sequence of path
        Files whose positive pairs train pair-learning reducers (evaluation pairs removed).
    """
    from slimvec.benchmarks.encoding_cache import EncodingCache, default_cache_dir
    from slimvec.benchmarks.pairs import build_corpus, build_train_pairs, load_pairs
    from slimvec.encoder import Encoder

    files = [load_pairs(p, skip_bad_rows=skip_bad_rows) for p in pairs]
    corpus = build_corpus(files, dup_threshold)
    train = None
    if train_pairs:
        train = build_train_pairs([load_pairs(p, skip_bad_rows=skip_bad_rows) for p in train_pairs],
                                  dup_threshold, eval_corpus=corpus)
    base = "+".join(Path(str(p)).stem for p in pairs)
    out = []
    from slimvec.benchmarks.mpnet import bench_encoder

    for spec in encoders or [None]:
        encoder = Encoder(bench_encoder(spec))  # "mpnet": assembled from the bench-mpnet extra
        cache = EncodingCache(cache_dir or default_cache_dir(), encoder.fingerprint)
        name = base if len(encoders) <= 1 else f"{base}@{Path(encoder.name).name}"
        out.append(encode_pairs_dataset(corpus, encoder, cache, name=name, max_queries=max_queries,
                                        seed=seed, train=train, sts_file=sts_file,
                                        on_progress=on_progress))
    return out
