"""The one measuring core (issue 24 item 3): exact kNN, recall@k and the rescored search that
``Index.search``, calibration, the bench runner and tune all run (real MiniLM vectors, real
hnswlib / Qdrant Edge indexes built by ``migrate``, real full-vector files)."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.measure import IndexUnderTest, exact_knn, recall_at_k, similarities

N, NQ = 700, 40


@pytest.fixture(scope="module")
def data(minilm_vectors):
    return minilm_vectors[:N], minilm_vectors[2000:2000 + NQ]


@pytest.fixture(scope="module")
def built(data, tmp_path_factory):
    """Two product-built indexes: full vectors in the side file (hnswlib) and in the store
    (Qdrant Edge's float32 named vector, searched with ``search_rescored``)."""
    from slimvec.migrate import MigrateOptions, migrate

    root = tmp_path_factory.mktemp("measure")
    np.save(root / "corpus.npy", data[0], allow_pickle=False)
    out = {}
    for name, store in (("side", "hnsw"), ("in_store", "qdrant-edge")):
        migrate(str(root / "corpus.npy"), root / name,
                MigrateOptions(reducer="pca:32", store=store, keep_full="float32", progress=False,
                               batch_size=256))
        out[name] = root / name
    return out


@pytest.mark.parametrize("name", ["side", "in_store"])
def test_the_runner_index_under_test_returns_index_search_ids(built, data, name):
    """What a bench row times (IndexUnderTest: the runner's and tune's search) is Index.search:
    the same ids for the same queries, with and without re-ranking."""
    import slimvec

    queries = data[1]
    with slimvec.open(built[name]) as idx:
        assert idx.manifest.full is not None and idx.manifest.full.in_store == (name == "in_store")
        under = IndexUnderTest(idx.store, idx.reducer, None if name == "in_store" else idx.full_vectors)
        for R in (1, 4):
            want = idx.search(queries, 10, rescore=R)
            got = under.search(queries, 10, 10 * R)
            assert np.array_equal(got.ids, want.ids)
            assert np.allclose(got.scores, want.scores)
        plain = idx.search(queries, 10, rescore=0)
        assert np.array_equal(under.search(queries, 10).ids, plain.ids)
        # re-ranking changes the answer here, so the comparison above could fail
        assert not np.array_equal(plain.ids, idx.search(queries, 10, rescore=4).ids)


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_exact_knn_streamed_in_blocks_is_brute_force(data, metric):
    corpus, queries = data
    corpus = corpus * np.linspace(0.5, 2.0, len(corpus), dtype=np.float32)[:, None]  # unequal norms
    sims = similarities(queries, corpus, metric)
    want = np.argsort(-sims, axis=1, kind="stable")[:, :10]
    ids = np.arange(len(corpus), dtype=np.int64) + 100
    got, scores = exact_knn(lambda wanted: corpus[wanted - 100], queries, 10, metric=metric,
                            ids=ids, block=97)  # 8 blocks: the merge across blocks is exercised
    assert np.array_equal(np.sort(got, axis=1), np.sort(want + 100, axis=1))
    assert np.all(np.diff(scores, axis=1) <= 0)  # best first
    whole, _ = exact_knn(corpus, queries, 10, metric=metric)
    assert np.array_equal(np.sort(whole, axis=1), np.sort(want, axis=1))


def test_exact_knn_leaves_each_query_out_of_its_own_neighbours(data):
    corpus = data[0]
    own = np.array([3, 50, 699])
    got, _ = exact_knn(corpus, corpus[own], 5, exclude=own, block=64)
    assert not any(o in row for o, row in zip(own, got))
    assert got.shape == (3, 5) and (got >= 0).all()


def test_recall_at_k_drops_own_ids_and_counts_ties_within_the_floor():
    truth = np.array([[1, 2], [3, 4]])
    found = np.array([[9, 1, 7, -1], [4, 3, 8, 8]])
    assert recall_at_k(found, truth, 2) == pytest.approx(3 / 4)  # query 0 finds 1 of 2
    assert recall_at_k(found, truth, 2, exclude=np.array([9, -1])) == pytest.approx(3 / 4)
    # own id 9 dropped, 7 scores above the floor of query 0: a tie with the truth's 2nd
    scores = np.array([[0.0, 0.9, 0.8, -np.inf], [0.9, 0.9, 0.1, 0.1]])
    assert recall_at_k(found, truth, 2, exclude=np.array([9, -1]), found_scores=scores,
                       floor=np.array([0.79, 0.5])) == pytest.approx(1.0)


def test_index_recipe_rows_measure_the_built_index_with_index_search(data, tmp_path):
    """Recipe rows (scripts/bench_rescore.py folded into the harness): the recipe is built by
    migrate, measured with Index.search at its calibrated depth and at each R of the run, in the
    one row schema, with the bytes split into searchable / full vectors / folder."""
    from slimvec.benchmarks.datasets import from_vectors
    from slimvec.benchmarks.recipes import recipe_rows
    from slimvec.benchmarks.runner import BenchConfig

    np.save(tmp_path / "v.npy", data[0], allow_pickle=False)
    ds = from_vectors(tmp_path / "v.npy", max_queries=20, seed=1)
    recipe = "pca:32|hnsw|rescore=auto,keep_full=float32"
    cfg = BenchConfig(reducers=[], stores=[], work_dir=tmp_path / "work", baselines=False, rescore=[1, 64],
                      index_recipes=[recipe], latency_queries=3, latency_repeats=1)
    cfg.validate()
    rows = recipe_rows(cfg, ds, recipe, tmp_path / "v.npy", tmp_path / "idx")
    calibrated = rows[0].extra["calibrated_depth"]
    assert [r.rescore for r in rows] == [calibrated] + [R for R in (1, 64) if R != calibrated]
    assert {r.kind for r in rows} == {"recipe"} and {r.store for r in rows} == {recipe}
    by_depth = {r.rescore: r for r in rows}
    # store ids map to corpus rows: re-ranking 64 x 11 of 700 candidates finds the exact neighbours
    assert by_depth[64].neighbor_recall_at_k == pytest.approx(1.0)
    assert by_depth[1].neighbor_recall_at_k < by_depth[64].neighbor_recall_at_k
    row = rows[0]
    assert row.full_bytes_per_vector >= 384 * 4 and row.bytes_per_vector < row.full_bytes_per_vector
    assert row.extra["disk_bytes_per_vector"] > row.bytes_per_vector + row.full_bytes_per_vector - 1
    assert row.latency_p50_ms > 0 and row.reranked and row.dim_out == 32
    from slimvec.benchmarks.rescore_tables import render_recipes

    table = [line for line in render_recipes(rows) if line.startswith(f"| {recipe}")]
    assert len(table) == len(rows) and f"| {calibrated} (auto) |" in table[0]


def test_two_stage_table_ratios_to_full_hnsw_and_marks_the_goal():
    """scripts/rescore_table.py's table, now a report.md section rendered from rows."""
    from slimvec.benchmarks.rescore_tables import render_two_stage
    from slimvec.planner.rows import Row

    def row(reducer, store, R, bpv, p50, recall):
        return Row(dataset="d", reducer=reducer, store=store, kind="reducer", dim_out=8, rescore=R,
                   bytes_per_vector=bpv, latency_p50_ms=p50, neighbor_recall_at_k=recall, task_recall_at_k=0.5)

    rows = [row("none", "hnsw", None, 1000.0, 0.2, 0.99), row("pca:8", "hnsw", 4, 200.0, 0.1, 0.995),
            row("pca:8", "hnsw", 8, 200.0, 0.3, 0.999)]
    lines = render_two_stage(rows)
    got = {line.split(" | ")[1]: line for line in lines if line.startswith("| pca:8")}
    assert "| 0.20 |" in got["4"] and "| 0.50 | **yes** |" in got["4"]
    assert "| 1.50 |  |" in got["8"]  # slower than full HNSW: not the goal
    assert render_two_stage(rows[:1]) == []  # nothing re-ranked: no table
