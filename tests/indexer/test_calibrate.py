"""rescore=auto: the calibrated depth reaches the target, is the smallest that does, and grows
with the corpus (real MiniLM vectors, real hnswlib / FAISS stores, full vectors on disk)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slimvec.benchmarks.metrics import exact_topk
from slimvec.connectors import make_store
from slimvec.connectors.fullvectors import FullVectors
from slimvec.errors import ConfigError
from slimvec.indexer.calibrate import calibrate_rescore, corpus_ids, depth_ladder, exact_neighbours, exact_neighbours_of, pick_sample
from slimvec.reducers import make_reducer


def _build(tmp_path, vectors, reducer_spec, store_spec):
    n = len(vectors)
    ids = np.arange(1, n + 1)
    fit_ids = ids[: n // 2]
    reducer = make_reducer(reducer_spec).fit(vectors[: n // 2])
    store = make_store(store_spec, tmp_path / "store").create(reducer.n_components_)
    store.upsert(ids, reducer.transform(vectors))
    store.finalize()
    store.flush()
    full = FullVectors.create(tmp_path / "full", vectors.shape[1])
    full.append(ids, vectors)
    full.commit()
    return reducer, store, full, pick_sample(ids, 200, exclude=fit_ids, seed=0)


def _step_below(depth, max_depth=64):
    """The ladder step just below ``depth`` (which must be on the ladder)."""
    ladder = depth_ladder(max_depth)
    return ladder[ladder.index(depth) - 1]


def test_ladder_and_sample():
    # x1.5 steps from 4 (rounded up), not doubling: headroom and graph noise cost half as much
    # (issue 28 item 4: doubling stopped the default recipe at 64 on 20,000 real sentences)
    assert depth_ladder(64) == [1, 2, 3, 4, 6, 9, 14, 21, 32, 48, 64]
    assert depth_ladder(20) == [1, 2, 3, 4, 6, 9, 14, 20]
    assert depth_ladder(100)[-3:] == [48, 72, 100]
    ladder = depth_ladder(1000)
    assert all(b == math.ceil(1.5 * a) for a, b in zip(ladder[3:-2], ladder[4:-1]))  # x1.5, rounded up
    with pytest.raises(ConfigError):
        depth_ladder(0)
    s = pick_sample(np.arange(1, 101), 10, exclude=np.arange(1, 51), seed=1)
    assert len(s) == 10 and s.min() > 50


def test_exact_neighbours_match_brute_force(tmp_path, minilm_vectors):
    X = minilm_vectors[:1200]
    full = FullVectors.create(tmp_path / "full", 384)
    full.append(np.arange(1, 1201), X)
    full.commit()
    q = np.array([3, 40, 999])
    np.testing.assert_array_equal(corpus_ids(full), np.arange(1, 1201))
    got = exact_neighbours(full, q, 10, block=500)  # several blocks
    want = exact_topk(X, X[q - 1], 10, exclude=q - 1) + 1
    assert [set(r) for r in got.tolist()] == [set(r) for r in want.tolist()]


@pytest.mark.parametrize("store_spec", ["hnsw:threads=1", "faiss:HNSW32"])
def test_depth_reaches_target_and_is_smallest(tmp_path, minilm_vectors, store_spec):
    reducer, store, full, sample = _build(tmp_path, minilm_vectors[:2000], "pca:48", store_spec)
    cal = calibrate_rescore(store, reducer, full, sample, k=10, target=0.99, max_depth=64)
    assert cal.reached and cal.recall >= 0.99 and cal.depth > 1
    assert cal.ladder[cal.depth] == cal.recall
    assert cal.ladder[_step_below(cal.depth)] < 0.99  # the step below did not reach it
    # the recorded recall is what a rescored search of the same sample measures
    found = full.rerank(full.get(sample)[0], store.search(reducer.transform(full.get(sample)[0]),
                                                           10 * cal.depth + 1), 11).ids
    truth = exact_neighbours(full, sample, 10)
    hits = sum(len(set(f[f != s][:10].tolist()) & set(t.tolist())) for f, t, s in zip(found, truth, sample))
    assert hits / (10 * len(sample)) == pytest.approx(cal.recall)
    assert cal.to_json()["depth"] == cal.depth and cal.n_corpus == 2000
    store.close()
    full.close()


def test_depth_grows_with_the_corpus(tmp_path, minilm_vectors):
    depths = {}
    for n in (500, 3000):
        reducer, store, full, sample = _build(tmp_path / str(n), minilm_vectors[:n], "pca:32", "hnsw:threads=1")
        depths[n] = calibrate_rescore(store, reducer, full, sample, target=0.99, max_depth=128).depth
        store.close()
        full.close()
    # measured 8 at 500 vectors and 64 at 3,000: assert only that it grows
    assert depths[3000] > depths[500]


def test_unreachable_target_is_reported(tmp_path, minilm_vectors):
    reducer, store, full, sample = _build(tmp_path, minilm_vectors[:1500], "pca:8", "hnsw:threads=1")
    cal = calibrate_rescore(store, reducer, full, sample, target=0.999, max_depth=2)
    assert not cal.reached and cal.depth == 2 and cal.recall < 0.999
    with pytest.raises(ConfigError, match="target"):
        calibrate_rescore(store, reducer, full, sample, target=1.5)
    store.close()
    full.close()


def test_calibration_on_query_vectors_that_are_not_in_the_corpus(tmp_path, minilm_vectors):
    """Real queries: exact truth over the corpus (nothing left out), the smallest depth that
    reaches the target on them, and the recall a rescored search of those queries measures."""
    reducer, store, full, _ = _build(tmp_path, minilm_vectors[:2000], "pca:48", "hnsw:threads=1")
    queries = minilm_vectors[2500:2700]  # not corpus vectors
    got = exact_neighbours_of(full, queries, 10, block=700)
    want = exact_topk(minilm_vectors[:2000], queries, 10) + 1  # ids are row + 1
    assert [set(r) for r in got.tolist()] == [set(r) for r in want.tolist()]
    cal = calibrate_rescore(store, reducer, full, None, k=10, target=0.99, queries=queries)
    assert cal.reached and cal.n_queries == 200 and cal.depth > 1
    assert cal.ladder[_step_below(cal.depth)] < 0.99
    found = full.rerank(queries, store.search(reducer.transform(queries), 10 * cal.depth), 10).ids
    hits = sum(len(set(f.tolist()) & set(t.tolist())) for f, t in zip(found, want))
    assert hits / (10 * len(queries)) == pytest.approx(cal.recall)
    with pytest.raises(ConfigError, match="query vectors"):
        calibrate_rescore(store, reducer, full, None, queries=np.zeros((0, 384), np.float32))
    store.close()
    full.close()


def test_headroom_takes_ladder_steps_and_the_writer_calibrates_corpus_vectors_for_a_stricter_target(
        tmp_path, minilm_vectors):
    """Corpus vectors flatter the reduced index (a graph leads a corpus vector to its own node), so
    the writer's calibration asks them for half the target's miss rate (CORPUS_MISS_SHARE: 0.995
    for 0.99) instead of a ladder step of headroom; given queries get the target itself."""
    from slimvec.indexer.calibrate import CALIBRATION_QUERIES, CORPUS_HEADROOM, CORPUS_MISS_SHARE, rescore_for_recipe

    reducer, store, full, sample = _build(tmp_path, minilm_vectors[:2000], "pca:48", "hnsw:threads=1")
    exact = calibrate_rescore(store, reducer, full, sample, target=0.99)
    padded = calibrate_rescore(store, reducer, full, sample, target=0.99, headroom=1)
    ladder = depth_ladder(64)
    assert padded.depth == ladder[ladder.index(exact.depth) + 1]  # one x1.5 step, not a doubling
    assert padded.recall == padded.ladder[padded.depth]
    assert padded.reached and padded.recall >= exact.recall
    capped = calibrate_rescore(store, reducer, full, sample, target=0.99, headroom=5, max_depth=exact.depth)
    assert capped.depth == exact.depth  # the ladder ends at max_depth
    assert CORPUS_HEADROOM == 0 and CORPUS_MISS_SHARE == 0.5 and CALIBRATION_QUERIES == 500
    recipe = "pca:48|hnsw|rescore=auto,keep_full=float32"
    # the writer draws its own sample and calibrates it for 0.995
    info = rescore_for_recipe(recipe, store, reducer, full)
    strict = calibrate_rescore(store, reducer, full, pick_sample(corpus_ids(full), 500, seed=0),
                               target=0.995)
    assert info.depth == strict.depth and info.target == pytest.approx(0.995) and info.queries is None
    assert info.depth >= calibrate_rescore(store, reducer, full, pick_sample(corpus_ids(full), 500, seed=0),
                                           target=0.99).depth
    given = rescore_for_recipe(recipe, store, reducer, full, queries=minilm_vectors[2500:2700])
    assert given.depth == calibrate_rescore(store, reducer, full, None, target=0.99,
                                            queries=minilm_vectors[2500:2700]).depth
    assert given.target == pytest.approx(0.99)
    store.close()
    full.close()


def _build_kept(tmp_path, vectors, reducer_spec, dtype):
    """Like :func:`_build`, with the full vectors kept at ``dtype`` (the default recipe: float16)."""
    n = len(vectors)
    ids = np.arange(1, n + 1)
    reducer = make_reducer(reducer_spec).fit(vectors[: n // 2])
    store = make_store("hnsw:threads=1", tmp_path / "store").create(reducer.n_components_)
    store.upsert(ids, reducer.transform(vectors))
    store.finalize()
    full = FullVectors.create(tmp_path / "full", vectors.shape[1], dtype=dtype)
    full.append(ids, vectors)
    full.commit()
    return reducer, store, full, pick_sample(ids, 200, seed=0)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_duplicate_texts_count_as_ties_and_do_not_inflate_the_depth(tmp_path, minilm_vectors, dtype):
    """Issue 27 item 3: every text four times (ids differ, vectors equal). The truth keeps one of
    the tied copies at rank 10 and the re-ranking another, which used to count as a miss at every
    depth: depth 64, recall 0.92, target never met. Ties now count: the depth of the same corpus
    without duplicates (8), target met."""
    dup = np.repeat(minilm_vectors[:600], 4, axis=0)
    reducer, store, full, sample = _build_kept(tmp_path, dup, "pca:48", dtype)
    cal = calibrate_rescore(store, reducer, full, sample, k=10, target=0.99, max_depth=64)
    assert cal.reached and cal.recall >= 0.99, cal.ladder
    assert cal.depth <= 16, cal.ladder
    assert cal.message is None
    store.close()
    full.close()


def test_near_ties_below_float16_resolution_count_as_hits(tmp_path, minilm_vectors):
    """A tie-heavy corpus: five copies of each sentence vector moved by noise of 2e-5, below what
    float16 full vectors keep. Scores at rank 10 differ by less than the kept precision, so which
    copy the truth ranks 10th is noise; a copy within float16 rounding of the 10th true score counts."""
    rng = np.random.default_rng(0)
    near = np.repeat(minilm_vectors[:500], 5, axis=0) + rng.normal(0, 2e-5, (2500, 384)).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    reducer, store, full, sample = _build_kept(tmp_path, near, "pca:48", "float16")
    cal = calibrate_rescore(store, reducer, full, sample, k=10, target=0.99, max_depth=64)
    assert cal.reached and cal.depth <= 16, cal.ladder
    store.close()
    full.close()


def test_tie_tolerance_is_the_kept_precision():
    from slimvec.indexer.calibrate import tie_tolerance

    tol16 = float(tie_tolerance(np.array([0.8]), "float16")[0])
    tol32 = float(tie_tolerance(np.array([0.8]), "float32")[0])
    assert tol16 == pytest.approx(2.0 ** -11)  # float16 spacing in [0.5, 1)
    assert 0 < tol32 < 1e-5 and tol32 < tol16 / 100


def test_a_capped_depth_says_what_it_reached_at_which_cap(tmp_path, minilm_vectors):
    reducer, store, full, sample = _build(tmp_path, minilm_vectors[:1500], "pca:2", "hnsw:threads=1")
    cal = calibrate_rescore(store, reducer, full, sample, target=0.99, max_depth=16)
    assert not cal.reached and cal.depth == 16
    assert cal.message.startswith(f"target not met: reached {cal.recall:.4f} at depth cap 16")
    assert "larger reducer dimension" in cal.message
    store.close()
    full.close()
