"""Rescoring depth calibrated on the corpus itself (``rescore=auto``), not guessed.

Two-stage search fetches ``k × R`` candidates from the reduced (or quantized) index and re-ranks
them with the full vectors. The depth R needed for a given neighbour recall grows with the corpus:
more vectors crowd each query's true neighbours, so the reduced index ranks more impostors above
them (issue 17: ``pca:96`` + ×8 reaches 0.99 on 2,700 vectors, 0.981 on 19k). So R is measured at
build time, on the finished index::

    cal = calibrate_rescore(store, reducer, full_vectors, sample_ids, k=10, target=0.99)
    cal.depth, cal.recall          # record both in the manifest; `info` reports them

The sample is a set of corpus ids used as queries (each one's own id is left out of its results,
as the bench does); it should be held out from the reducer's fit sample
(:func:`pick_sample`). Truth is exact search over every full vector (streamed in blocks from the
memory-mapped file, never loaded whole). Depths are tried up the ladder 1, 2, 4, 8, ... up to
``max_depth`` and the first whose measured recall@k reaches the target wins, so half that depth
did not reach it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.connectors.fullvectors import IDS, FullVectors
from slimvec.errors import ConfigError
from slimvec.indexer.manifest import RescoreInfo

__all__ = ["RescoreCalibration", "calibrate_rescore", "rescore_for_recipe", "CALIBRATION_QUERIES", "CORPUS_HEADROOM", "depth_ladder", "pick_sample", "exact_neighbours", "exact_neighbours_of", "corpus_ids"]

log = logging.getLogger(__name__)
#: corpus vectors used as calibration queries by :func:`rescore_for_recipe`
CALIBRATION_QUERIES = 200
#: ladder steps :func:`rescore_for_recipe` adds past the depth that reaches the target on corpus
#: vectors. Corpus vectors used as queries flatter the reduced index (a corpus sentence's
#: paraphrase is usually in the corpus; a real query's is not): on 24,722 bundled sentences the
#: depth reaching 0.99 on them (16) gave held-out queries 0.983 (MiniLM) and 0.985 (mpnet), one
#: step more 0.992 and 0.9955 (``scripts/bench_rescore.py --calibration``). Queries given by the
#: user (``slimvec calibrate``) are the real distribution and get none.
CORPUS_HEADROOM = 1
#: corpus rows scored at once by the exact-truth search (memory ``queries × block`` floats)
_TRUTH_BLOCK = 65536

#: rescored search: (reduced queries, full queries, k, candidates) -> SearchResult
RescoredSearch = Callable[[np.ndarray, np.ndarray, int, int], SearchResult]


@dataclass
class RescoreCalibration:
    """Outcome of :func:`calibrate_rescore`.

    Attributes
    ----------
    depth : int
        The chosen R (candidates per result).
    recall : float
        Measured neighbour recall@k at ``depth`` on the sample.
    target : float
    k : int
    n_queries : int
        Sample size.
    n_corpus : int
        Vectors in the index when calibrated (R grows with it: recalibrate after large appends).
    reached : bool
        False when even ``max_depth`` missed the target (``depth`` is then ``max_depth``).
    ladder : dict
        Every depth tried -> its measured recall.
    """

    depth: int
    recall: float
    target: float
    k: int
    n_queries: int
    n_corpus: int
    reached: bool
    ladder: dict[int, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON form for the manifest (``ladder`` keys as strings)."""
        out = asdict(self)
        out["ladder"] = {str(r): round(v, 6) for r, v in self.ladder.items()}
        out["recall"] = round(self.recall, 6)
        return out


def depth_ladder(max_depth: int) -> list[int]:
    """1, 2, 4, ... up to ``max_depth`` (included even when not a power of two)."""
    if int(max_depth) < 1:
        raise ConfigError(f"max_depth must be >= 1, got {max_depth}.")
    out, r = [], 1
    while r < max_depth:
        out.append(r)
        r *= 2
    return out + [int(max_depth)]


def pick_sample(ids: np.ndarray, n: int, *, exclude: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """``n`` ids drawn without replacement from ``ids``, avoiding ``exclude`` (the fit sample)
    when enough others exist."""
    ids = np.unique(np.asarray(ids, dtype=np.int64))
    pool = ids if exclude is None else np.setdiff1d(ids, np.asarray(exclude, dtype=np.int64))
    if len(pool) < n:
        pool = ids
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(pool, size=min(int(n), len(pool)), replace=False))


def _corpus(full: FullVectors | tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """All ids of the full vectors and a lookup ids -> float32 vectors."""
    if isinstance(full, FullVectors):
        raw = np.fromfile(full.folder / IDS, dtype=np.int64, count=full.rows)
        return np.unique(raw), lambda wanted: full.get(wanted)[0]
    ids, vecs = full
    ids = np.asarray(ids, dtype=np.int64)
    vecs = np.asarray(vecs)
    order = np.argsort(ids, kind="stable")
    sid = ids[order]

    def lookup(wanted: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(sid, wanted)
        pos = np.minimum(pos, len(sid) - 1)
        if not np.array_equal(sid[pos], wanted):
            raise ConfigError("calibrate_rescore: a sample id is not among the corpus ids.")
        return np.asarray(vecs[order[pos]], dtype=np.float32)
    return sid, lookup


def corpus_ids(full: FullVectors | tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Sorted unique ids held by the full vectors (to draw a calibration sample from)."""
    return _corpus(full)[0]


def exact_neighbours(full: FullVectors | tuple[np.ndarray, np.ndarray], query_ids: np.ndarray,
                     k: int, *, metric: str = "cosine", block: int = _TRUTH_BLOCK) -> np.ndarray:
    """Ids (q, k) of the exact ``k`` nearest corpus vectors of each sample vector, itself excluded.

    Streams the corpus in blocks of ``block`` rows (memory ``q × block`` floats).
    """
    query_ids = np.asarray(query_ids, dtype=np.int64)
    corpus = _corpus(full)
    return _exact_top(corpus, corpus[1](query_ids), k, metric, block, query_ids)


def exact_neighbours_of(full: FullVectors | tuple[np.ndarray, np.ndarray], queries: np.ndarray,
                        k: int, *, metric: str = "cosine", block: int = _TRUTH_BLOCK,
                        own: np.ndarray | None = None) -> np.ndarray:
    """Ids (q, k) of the exact ``k`` nearest corpus vectors of query vectors (full dimension).

    ``own``: each query's own corpus id, left out of its neighbours (``None``: queries that are
    not corpus vectors, e.g. real queries). Streams the corpus in blocks of ``block`` rows.
    """
    return _exact_top(_corpus(full), queries, k, metric, block, own)


def _exact_top(corpus: tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]], queries: np.ndarray,
               k: int, metric: str, block: int, own: np.ndarray | None) -> np.ndarray:
    """:func:`exact_neighbours_of` over an already read corpus (ids, lookup)."""
    all_ids, lookup = corpus
    q = np.asarray(queries, dtype=np.float32)
    if metric == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    best_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    best_i = np.full((len(q), k), -1, dtype=np.int64)
    for lo in range(0, len(all_ids), block):
        ids = all_ids[lo:lo + block]
        x = lookup(ids)
        if metric == "cosine":
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        s = q @ x.T
        if metric == "l2":
            s = 2.0 * s - np.einsum("ij,ij->i", x, x)[None, :]
        if own is not None:
            s[ids[None, :] == np.asarray(own)[:, None]] = -np.inf  # a query is not its own neighbour
        cat_s = np.concatenate([best_s, s.astype(np.float32)], axis=1)
        cat_i = np.concatenate([best_i, np.broadcast_to(ids, s.shape)], axis=1)
        top = np.argpartition(-cat_s, k - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(cat_s, top, axis=1)
        best_i = np.take_along_axis(cat_i, top, axis=1)
    return best_i


def _recall(found: np.ndarray, truth: np.ndarray, own: np.ndarray, k: int) -> float:
    hits = 0
    for res, tru, me in zip(found, truth, own):
        res = res[(res >= 0) & (res != me)][:k]
        hits += len(set(res.tolist()) & set(tru.tolist()))
    return hits / (len(truth) * k)


def calibrate_rescore(store: VectorStore, reducer: Any, full_vectors: FullVectors | tuple[np.ndarray, np.ndarray],
                      sample_ids: np.ndarray | None, *, k: int = 10, target: float = 0.99, max_depth: int = 64,
                      search: RescoredSearch | None = None, metric: str | None = None,
                      queries: np.ndarray | None = None, headroom: int = 0,
                      **params: Any) -> RescoreCalibration:
    """Smallest rescoring depth R on the ladder 1, 2, 4, ... whose neighbour recall@k reaches
    ``target`` (then ``headroom`` steps further up the ladder, when asked).

    Parameters
    ----------
    store : VectorStore
        The open reduced (or quantized) index, holding every corpus id.
    reducer : Reducer
        The fitted reducer (``transform_query`` is used for queries when it has one).
    full_vectors : FullVectors or (ids, vectors)
        The full vectors kept on disk (re-ranking and exact truth), or ids with an array.
    sample_ids : ndarray of int or None
        Corpus ids used as queries (held out from the reducer's fit sample: :func:`pick_sample`);
        ignored when ``queries`` is given.
    k : int
        Results per query (recall@k).
    target : float
        Neighbour recall@k to reach, in (0, 1].
    max_depth : int
        Largest R tried.
    search : callable, optional
        ``search(reduced_q, full_q, k, n_candidates) -> SearchResult`` when the store rescores by
        itself (Qdrant Edge named vectors); default ``store.search`` then ``full_vectors.rerank``.
    metric : str, optional
        Similarity of the full vectors (default: ``full_vectors.metric``, else cosine).
    queries : ndarray, optional
        Query vectors of full dimension (n, dim_in) to calibrate on instead of corpus vectors:
        real queries, whose neighbours the index must find (corpus vectors used as queries
        flatter the reduced index when real queries come from another distribution).
    headroom : int
        Ladder steps past the first depth that reaches the target (capped by ``max_depth``): the
        writer takes one when it calibrates on corpus vectors, which flatter the reduced index
        (:data:`CORPUS_HEADROOM`).
    **params
        Store search parameters (e.g. ``ef``), as used at query time.

    Returns
    -------
    RescoreCalibration

    Raises
    ------
    ConfigError
        Bad target, k or depth; an empty sample.
    """
    if not 0.0 < float(target) <= 1.0:
        raise ConfigError(f"target must be a recall in (0, 1], got {target!r}.")
    if int(k) < 1:
        raise ConfigError(f"k must be >= 1, got {k}.")
    ladder = depth_ladder(max_depth)
    metric = metric or getattr(full_vectors, "metric", "cosine")
    corpus = _corpus(full_vectors)  # read once: the truth and the queries below use it
    all_ids, lookup = corpus
    if queries is not None:
        full_q = np.asarray(queries, dtype=np.float32)
        if full_q.ndim != 2 or not len(full_q):
            raise ConfigError(f"calibrate_rescore needs query vectors of shape (n > 0, dim), got "
                              f"{full_q.shape}.")
        own = np.full(len(full_q), -1, dtype=np.int64)  # real queries: no own id to drop
        truth = _exact_top(corpus, full_q, k, metric, _TRUTH_BLOCK, None)
        extra = 0
    else:
        own = np.asarray(sample_ids if sample_ids is not None else [], dtype=np.int64).ravel()
        if len(own) == 0:
            raise ConfigError("calibrate_rescore needs a non-empty sample of corpus ids.")
        full_q = lookup(own)
        truth = _exact_top(corpus, full_q, k, metric, _TRUTH_BLOCK, own)
        extra = 1  # the query's own id is found and dropped
    to_query = getattr(reducer, "transform_query", reducer.transform)
    reduced_q = to_query(full_q)
    if search is None:
        if not isinstance(full_vectors, FullVectors):
            raise ConfigError("calibrate_rescore: pass search=... when the full vectors are not a FullVectors.")

        def search(rq: np.ndarray, fq: np.ndarray, kk: int, n_cand: int) -> SearchResult:
            return full_vectors.rerank(fq, store.search(rq, n_cand, **params), kk)

    measured: dict[int, float] = {}
    chosen = ladder[-1]
    steps_left: int | None = None  # ladder steps still to take once the target is reached
    for R in ladder:
        found = search(reduced_q, full_q, k + extra, k * R + extra).ids
        measured[R] = _recall(found, truth, own, k)
        log.debug("rescore depth %d: recall@%d %.4f", R, k, measured[R])
        if steps_left is None and measured[R] >= target:
            steps_left = int(headroom)
        if steps_left is not None:
            chosen = R
            if steps_left == 0:
                break
            steps_left -= 1
    reached = measured[chosen] >= target
    if not reached:
        log.warning("rescoring depth %d reaches neighbour recall@%d %.4f, below the target %.4f; "
                    "use a larger reducer dimension or a larger max_depth", chosen, k, measured[chosen], target)
    return RescoreCalibration(depth=int(chosen), recall=float(measured[chosen]), target=float(target), k=int(k),
                              n_queries=int(len(full_q)), n_corpus=int(len(all_ids)), reached=reached,
                              ladder=measured)


def rescore_for_recipe(recipe: str | None, store: VectorStore, reducer: Any,
                       full_vectors: FullVectors | None, *, n_queries: int = CALIBRATION_QUERIES,
                       k: int = 10, seed: int = 0, queries: np.ndarray | None = None
                       ) -> RescoreInfo | None:
    """The rescoring record of a finished index built with ``recipe`` (for the manifest).

    A fixed ``rescore=R`` is recorded as is; ``rescore=auto`` is calibrated with
    :func:`calibrate_rescore` on ``n_queries`` corpus vectors drawn at random (seeded), with
    :data:`CORPUS_HEADROOM` ladder steps of headroom, or on ``queries`` (full-dimension query
    vectors) when given, without; searched with the store's own search parameters. No recipe, no
    rescoring, or fewer than two vectors (nothing to calibrate on) gives ``None``.

    Raises
    ------
    ConfigError
        ``rescore=auto`` without full vectors in the side file (Qdrant keeps them in the store,
        where calibration is not supported).
    """
    from slimvec.recipe import parse_recipe

    if recipe is None:
        return None
    rec = parse_recipe(recipe)
    if rec.rescore is None:
        return None
    if not rec.auto_rescore:
        return RescoreInfo(depth=int(rec.rescore))
    if full_vectors is None:
        raise ConfigError(f"recipe {rec}: rescore=auto needs the full vectors in the side file "
                          "(FAISS, hnswlib, or keep_full=float16); give a fixed rescore=R.")
    ids = corpus_ids(full_vectors)
    if len(ids) < 2:  # no neighbour to find: calibrated by the next run that adds vectors
        log.warning("rescore=auto: %d vector(s) in the index, nothing to calibrate on", len(ids))
        return None
    if queries is not None:
        kk = max(1, min(int(k), len(ids)))
        cal = calibrate_rescore(store, reducer, full_vectors, None, k=kk, target=rec.target_recall,
                                queries=queries)
    else:
        sample = pick_sample(ids, min(int(n_queries), len(ids)), seed=seed)
        kk = max(1, min(int(k), len(ids) - 1))
        cal = calibrate_rescore(store, reducer, full_vectors, sample, k=kk, target=rec.target_recall,
                                headroom=CORPUS_HEADROOM)
    return RescoreInfo(depth=cal.depth, calibrated=True, recall=round(cal.recall, 6),
                       target=cal.target, k=cal.k, n_queries=cal.n_queries, n_corpus=cal.n_corpus,
                       reached=cal.reached)
