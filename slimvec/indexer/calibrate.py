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
memory-mapped file, never loaded whole). Depths are tried up the ladder 1, 2, 3, 4, 6, 9, 14,
21, 32, 48, ... (:func:`depth_ladder`: ×1.5 steps) up to ``max_depth`` and the first whose
measured recall@k reaches the target wins, so the step below it did not reach it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.connectors.fullvectors import IDS, FullVectors
from slimvec.errors import ConfigError
from slimvec.index.manifest import RescoreInfo, shortfall_message
from slimvec.measure import TRUTH_BLOCK, exact_knn, paired_similarities, recall_at_k, rescored_search

__all__ = ["RescoreCalibration", "calibrate_rescore", "rescore_for_recipe", "CALIBRATION_QUERIES", "CORPUS_HEADROOM", "CORPUS_MISS_SHARE", "LADDER_STEP", "depth_ladder", "pick_sample", "exact_neighbours", "exact_neighbours_of", "corpus_ids",
           "tie_tolerance", "shortfall_message"]

log = logging.getLogger(__name__)
#: corpus vectors used as calibration queries by :func:`rescore_for_recipe`. 200 left the
#: measured recall +-0.004 around 0.99 (2,000 neighbour slots), so the chosen depth moved with the
#: draw; 500 halves that for 2.5x the (seconds-long) truth and ladder searches.
CALIBRATION_QUERIES = 500
#: share of the target's miss rate that corpus vectors used as queries may keep:
#: :func:`rescore_for_recipe` calibrates them for ``1 - (1 - target) * CORPUS_MISS_SHARE``
#: (0.995 for a 0.99 target). A corpus vector is a node of the graph it searches, so the graph
#: leads it to its own neighbours, and a corpus sentence's paraphrase is often in the corpus; a
#: real query has neither. On 100,000 real sentences (issue 28) corpus vectors missed about half
#: as often as held-out queries at the same depth on FAISS graphs (HNSW16,SQ4: 0.9945 against
#: 0.9838 at depths 2-6, where the beam of 64 limits both). The old rule, one ladder step past the
#: depth reaching 0.99, gave the held-out queries 0.980-0.990 on five of nine recipes there once
#: the ladder stepped by x1.5 instead of doubling; the stricter target reached 0.99 on them for
#: every recipe whose graph beam was not the limit (no depth can fix a beam too small for real
#: queries: the default recipe fixes its beam instead; docs/benchmarks/default-recipe.md). Queries given by the user (``slimvec calibrate``) are
#: the real distribution and are calibrated for the target itself.
CORPUS_MISS_SHARE = 0.5
#: ladder steps past the depth reaching the (stricter) corpus target: none since the target is
#: tightened instead (kept for :func:`calibrate_rescore`'s ``headroom`` argument)
CORPUS_HEADROOM = 0
#: corpus rows scored at once by the exact-truth search (memory ``queries × block`` floats)
_TRUTH_BLOCK = TRUTH_BLOCK

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

    @property
    def message(self) -> str | None:
        """``None`` when the target was reached, else what happened and what to do
        (:func:`shortfall_message`)."""
        return None if self.reached else shortfall_message(self.recall, self.depth, self.target, self.k)

    def to_json(self) -> dict[str, Any]:
        """JSON form for the manifest (``ladder`` keys as strings)."""
        out = asdict(self)
        out["ladder"] = {str(r): round(v, 6) for r, v in self.ladder.items()}
        out["recall"] = round(self.recall, 6)
        return out


def _kept_dtype(full: Any) -> str:
    """The dtype the full vectors are kept at (``float16`` or ``float32``)."""
    if isinstance(full, FullVectors):
        return str(full.dtype)
    if isinstance(full, tuple) and len(full) == 2:
        return "float16" if np.asarray(full[1]).dtype == np.float16 else "float32"
    return "float32"


#: depths below this are each tried; from it on the ladder grows by :data:`LADDER_STEP`
_LADDER_BASE = 4
#: growth per ladder step from :data:`_LADDER_BASE` on (rounded up): 4, 6, 9, 14, 21, 32, 48, 72...
LADDER_STEP = 1.5


def depth_ladder(max_depth: int) -> list[int]:
    """Depths tried by calibration: 1, 2, 3, 4, then ×1.5 steps rounded up (6, 9, 14, 21, 32,
    48, 72, ...), up to ``max_depth`` (included even when not on the ladder).

    Doubling (1, 2, 4, ..., 32, 64) made every depth up to twice what the target needed, and the
    corpus headroom step doubled it again: on 20,000 real sentences the default recipe stopped
    at 64 (640 candidates), and a search's cost grows with its candidates (issue 28 item 4).
    """
    if int(max_depth) < 1:
        raise ConfigError(f"max_depth must be >= 1, got {max_depth}.")
    out, r = [], 1
    while r < max_depth:
        out.append(r)
        r = r + 1 if r < _LADDER_BASE else math.ceil(r * LADDER_STEP)
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
    return _exact_top_scored(corpus, queries, k, metric, block, own)[0]


def _exact_top_scored(corpus: tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]], queries: np.ndarray,
                      k: int, metric: str, block: int, own: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Ids (q, k) and exact scores (q, k) of the exact top k (:func:`slimvec.measure.exact_knn`)."""
    all_ids, lookup = corpus
    ids, scores = exact_knn(lookup, queries, k, metric=metric, ids=all_ids, exclude=own, block=block)
    if ids.shape[1] < k:  # fewer corpus vectors than k: padded as before
        pad = k - ids.shape[1]
        ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
        scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
    return ids, scores


#: float32 ulps of slack when the full vectors are float32: the truth and the re-ranking sum the
#: same products in another order (BLAS blocking), so exact duplicates can differ in the last bits
_F32_ULPS = 16


def tie_tolerance(scores: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """How far below the k-th true score a candidate may score and still count as a hit.

    The full vectors are kept at ``dtype``: two scores closer than that precision's spacing at
    the score (``float16``: 4.9e-4 near 0.8) cannot be told apart by the re-ranking, which sees
    only the kept vectors. So a candidate within one spacing of the k-th true score is a tie,
    not a miss (duplicate texts give exact ties; near-duplicates give gaps of 1e-5 that float16
    cannot hold). ``float32`` allows :data:`_F32_ULPS` spacings (summation order).
    """
    s = np.abs(np.asarray(scores, dtype=np.float64))
    if dtype == "float16":
        return np.spacing(s.astype(np.float16)).astype(np.float64)
    return _F32_ULPS * np.spacing(s.astype(np.float32)).astype(np.float64)


def _found_scores(found: np.ndarray, full_q: np.ndarray, lookup: Callable[[np.ndarray], np.ndarray],
                  metric: str) -> np.ndarray:
    """Exact scores (truth's formula) of the found ids; -inf for padding (-1)."""
    out = np.full(found.shape, -np.inf, dtype=np.float64)
    valid = found >= 0
    if not valid.any():
        return out
    uniq, inv = np.unique(found[valid], return_inverse=True)
    rows = np.nonzero(valid)[0]
    out[valid] = paired_similarities(np.asarray(full_q, dtype=np.float32)[rows], lookup(uniq)[inv], metric)
    return out


def calibrate_rescore(store: VectorStore, reducer: Any, full_vectors: FullVectors | tuple[np.ndarray, np.ndarray],
                      sample_ids: np.ndarray | None, *, k: int = 10, target: float = 0.99, max_depth: int = 64,
                      search: RescoredSearch | None = None, metric: str | None = None,
                      queries: np.ndarray | None = None, headroom: int = 0,
                      **params: Any) -> RescoreCalibration:
    """Smallest rescoring depth R on the ladder 1, 2, 3, 4, 6, 9, ... (:func:`depth_ladder`) whose
    neighbour recall@k reaches ``target`` (then ``headroom`` steps further up the ladder, when
    asked).

    Parameters
    ----------
    store : VectorStore
        The open reduced (or quantized) index, holding every corpus id.
    reducer : Reducer
        The fitted reducer (its ``transform_query`` reduces the queries).
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
        truth, truth_s = _exact_top_scored(corpus, full_q, k, metric, _TRUTH_BLOCK, None)
        extra = 0
    else:
        own = np.asarray(sample_ids if sample_ids is not None else [], dtype=np.int64).ravel()
        if len(own) == 0:
            raise ConfigError("calibrate_rescore needs a non-empty sample of corpus ids.")
        full_q = lookup(own)
        truth, truth_s = _exact_top_scored(corpus, full_q, k, metric, _TRUTH_BLOCK, own)
        extra = 1  # the query's own id is found and dropped
    reduced_q = reducer.transform_query(full_q)
    if search is None:
        if not isinstance(full_vectors, FullVectors):
            raise ConfigError("calibrate_rescore: pass search=... when the full vectors are not a FullVectors.")

        def search(rq: np.ndarray, fq: np.ndarray, kk: int, n_cand: int) -> SearchResult:
            return rescored_search(store, rq, fq, kk, n_cand, full_vectors, **params)  # Index.search's path

    # ties within the kept precision count as hits: a candidate scoring within tie_tolerance of
    # the k-th true score is as near as the truth's own k-th (duplicates, near-duplicates)
    kth = np.min(np.where(np.isfinite(truth_s), truth_s, np.inf), axis=1)
    kth = np.where(np.isfinite(kth), kth, np.inf)
    floor = kth - tie_tolerance(np.where(np.isfinite(kth), kth, 0.0), _kept_dtype(full_vectors))
    measured: dict[int, float] = {}
    chosen = ladder[-1]
    steps_left: int | None = None  # ladder steps still to take once the target is reached
    for R in ladder:
        found = search(reduced_q, full_q, k + extra, k * R + extra).ids
        measured[R] = recall_at_k(found, truth, k, exclude=own,
                                  found_scores=_found_scores(found, full_q, lookup, metric), floor=floor)
        log.debug("rescore depth %d: recall@%d %.4f", R, k, measured[R])
        if steps_left is None and measured[R] >= target:
            steps_left = int(headroom)
        if steps_left is not None:
            chosen = R
            if steps_left == 0:
                break
            steps_left -= 1
    reached = measured[chosen] >= target
    out = RescoreCalibration(depth=int(chosen), recall=float(measured[chosen]), target=float(target), k=int(k),
                              n_queries=int(len(full_q)), n_corpus=int(len(all_ids)), reached=reached,
                              ladder=measured)
    if not reached:
        log.warning("%s", out.message)
    return out


def rescore_for_recipe(recipe: str | None, store: VectorStore, reducer: Any,
                       full_vectors: FullVectors | None, *, n_queries: int = CALIBRATION_QUERIES,
                       k: int = 10, seed: int = 0, queries: np.ndarray | None = None
                       ) -> RescoreInfo | None:
    """The rescoring record of a finished index built with ``recipe`` (for the manifest).

    A fixed ``rescore=R`` is recorded as is; ``rescore=auto`` is calibrated with
    :func:`calibrate_rescore` on ``n_queries`` corpus vectors drawn at random (seeded), for the
    stricter target of :data:`CORPUS_MISS_SHARE` (the recorded ``target`` is that one), or on
    ``queries`` (full-dimension query vectors) when given, for the recipe's target; searched with the store's own search parameters. No recipe, no
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
        strict = 1.0 - (1.0 - float(rec.target_recall)) * CORPUS_MISS_SHARE
        cal = calibrate_rescore(store, reducer, full_vectors, sample, k=kk, target=strict,
                                headroom=CORPUS_HEADROOM)
    return RescoreInfo(depth=cal.depth, calibrated=True, recall=round(cal.recall, 6),
                       target=cal.target, k=cal.k, n_queries=cal.n_queries, n_corpus=cal.n_corpus,
                       reached=cal.reached)
