"""FAISS HNSW fetches a deep candidate list for rescoring: efSearch is raised to the list's size."""

from __future__ import annotations

import numpy as np

from slimvec.connectors import make_store
from slimvec.connectors.fullvectors import FullVectors
from slimvec.indexer.calibrate import calibrate_rescore
from slimvec.reducers import make_reducer


def test_faiss_hnsw_sq8_rescoring_reaches_full_recall_at_depth_64(minilm_vectors, tmp_path):
    """Before the fix recall levelled off at ~0.98 (efSearch 64 < 641 candidates)."""
    X = minilm_vectors
    ids = np.arange(len(X), dtype=np.int64)
    reducer = make_reducer("pca:24")
    reducer.fit(X)
    store = make_store("faiss:HNSW32,SQ8", tmp_path / "store").create(24, "cosine")
    store.upsert(ids, reducer.transform(X))
    store.finalize()
    full = FullVectors.create(tmp_path / "full", X.shape[1], "float32", "cosine")
    full.append(ids, X)
    full.commit()
    cal = calibrate_rescore(store, reducer, full, ids[::15], k=10, target=0.999, max_depth=64)
    assert cal.ladder[64] >= 0.995, cal.ladder
    # the store's own efSearch is back to its setting after a deep search
    faiss_index = store._require()
    assert faiss_index.hnsw.efSearch == 64
    store.close()
    full.close()
