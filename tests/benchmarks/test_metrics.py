"""Each benchmark metric on small cases computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.benchmarks.metrics import (
    cluster_accuracy,
    drop_rows,
    exact_topk,
    latency_summary,
    recall_at_k,
    routed_search,
    sts_spearman,
    task_recall_mrr,
)

# four unit vectors on a circle: 0 at 0°, 1 at 10°, 2 at 90°, 3 at 180°
ANGLES = np.deg2rad([0.0, 10.0, 90.0, 180.0])
CORPUS = np.stack([np.cos(ANGLES), np.sin(ANGLES)], axis=1).astype(np.float32)


def test_exact_topk_orders_by_cosine_and_excludes_the_query_itself():
    found = exact_topk(CORPUS, CORPUS[[0, 2]], 2, exclude=np.array([0, 2]))
    # from 0°: 10° then 90° (cos 0) ; from 90°: 10° (cos .17) then 0° (cos 0)
    assert found.tolist() == [[1, 2], [1, 0]]
    assert exact_topk(CORPUS, CORPUS[[0]], 2).tolist() == [[0, 1]]


def test_exact_topk_l2_matches_euclidean_order():
    corpus = np.array([[0.0, 0.0], [3.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    found = exact_topk(corpus, np.array([[2.0, 0.0]], dtype=np.float32), 3, metric="l2")
    assert found.tolist() == [[1, 2, 0]]  # distances 1, sqrt(2), 2


def test_drop_rows_removes_own_row_and_keeps_k():
    found = np.array([[5, 1, 2], [1, 7, 8]])
    assert drop_rows(found, np.array([5, 8]), 2).tolist() == [[1, 2], [1, 7]]
    assert drop_rows(found, None, 2).tolist() == [[5, 1], [1, 7]]


def test_recall_at_k_counts_overlap_and_ignores_missing():
    truth = np.array([[1, 2, 4], [7, 8, 9]])
    found = np.array([[4, 2, 3], [9, -1, -1]])
    assert recall_at_k(found, truth, 3) == pytest.approx((2 / 3 + 1 / 3) / 2)
    with pytest.raises(ValueError):
        recall_at_k(np.zeros((0, 3)), np.zeros((0, 3)), 3)


def test_task_recall_and_mrr():
    found = np.array([[3, 4, 5], [6, 7, 8]])
    # entry 0: query 0 looks for 3 (rank 1); entry 1: query 1 for 7 (rank 2); entry 2: query 1 for 3 (miss)
    recall, mrr = task_recall_mrr(found, np.array([0, 1, 1]), np.array([3, 7, 3]), k=3)
    assert recall == pytest.approx(2 / 3)
    assert mrr == pytest.approx((1 + 0.5 + 0) / 3)
    # only the top k count
    recall_k1, _ = task_recall_mrr(found, np.array([1]), np.array([7]), k=1)
    assert recall_k1 == 0.0
    assert task_recall_mrr(found, np.array([], dtype=int), np.array([], dtype=int)) == (None, None)


def test_sts_spearman_is_rank_correlation_of_cosines():
    a, b = np.array([0, 0, 0]), np.array([1, 2, 3])  # cos(0°,10°) > cos(0°,90°) > cos(0°,180°)
    assert sts_spearman(CORPUS, a, b, np.array([5.0, 2.5, 0.0])) == pytest.approx(1.0)
    assert sts_spearman(CORPUS, a, b, np.array([0.0, 2.5, 5.0])) == pytest.approx(-1.0)
    assert sts_spearman(CORPUS, a[:1], b[:1], np.array([1.0])) is None


def test_latency_summary_percentiles():
    out = latency_summary(np.arange(1, 101, dtype=float))
    assert out["latency_p50_ms"] == pytest.approx(50.5)
    assert out["latency_p99_ms"] == pytest.approx(99.01)
    assert out["latency_p50_ms"] <= out["latency_p95_ms"] <= out["latency_p99_ms"]


def test_cluster_accuracy_share_of_pairs_in_one_cluster():
    labels = np.array([0, 0, 1, 1])
    assert cluster_accuracy(labels, np.array([[0, 1], [1, 2]])) == 0.5
    assert cluster_accuracy(labels, np.zeros((0, 2), dtype=int)) is None


def test_routed_search_only_scans_routed_clusters():
    labels = np.array([0, 0, 1, 1])
    q = CORPUS[[0]]
    found, frac = routed_search(CORPUS, labels, q, np.array([[1]]), 2)
    assert set(found[0].tolist()) == {2, 3}  # the true neighbour 1 is in the other cluster
    assert frac == pytest.approx(0.5)
    found, frac = routed_search(CORPUS, labels, q, np.array([[0, 1]]), 2, exclude=np.array([0]))
    assert found[0].tolist() == [1, 2] and frac == pytest.approx(0.75)


def test_cluster_balance_sees_a_collapsed_clustering() -> None:
    from slimvec.benchmarks.metrics import cluster_balance

    even = cluster_balance(np.repeat(np.arange(4), 25))
    assert even["clusters_used"] == 4 and even["effective_clusters"] == pytest.approx(4.0)
    assert even["largest_cluster_share"] == pytest.approx(0.25)
    collapsed = cluster_balance(np.array([0] * 97 + [1, 2, 3]))
    assert collapsed["clusters_used"] == 4 and collapsed["effective_clusters"] < 1.3
    assert collapsed["largest_cluster_share"] == pytest.approx(0.97)
