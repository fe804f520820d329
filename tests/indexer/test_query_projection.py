"""An index whose reducer has a separate query projection (leanvec fitted with a query sample)
reduces queries with it in Index.search (the one-line hook in slimvec/index/folder.py)."""

from __future__ import annotations

import numpy as np

import slimvec
from slimvec.migrate.run import MigrateOptions, migrate


def test_search_reduces_queries_with_transform_query(minilm_vectors, tmp_path):
    X = minilm_vectors[:1500]
    # a shifted query sample: the OOD fit then learns A != B
    _, _, Vt = np.linalg.svd(X - X.mean(0), full_matrices=False)
    Q = minilm_vectors[1500:2500] @ Vt[100:160].T @ Vt[100:160] * 5 + minilm_vectors[1500:2500] * 0.2
    np.save(tmp_path / "q.npy", Q)
    np.save(tmp_path / "x.npy", X)
    migrate(str(tmp_path / "x.npy"), tmp_path / "idx",
            MigrateOptions(reducer=f"leanvec:16,iters=5,queries={tmp_path / 'q.npy'}", store="faiss:Flat",
                           progress=False))
    queries = Q[:50]
    with slimvec.open(tmp_path / "idx") as idx:
        got = idx.search(queries, 10).ids
        via_query = idx.store.search(idx.reducer.transform_query(queries), 10).ids
        via_docs = idx.store.search(idx.reducer.transform(queries), 10).ids
    np.testing.assert_array_equal(got, via_query)
    assert (got != via_docs).any()  # the two projections really differ on these queries
