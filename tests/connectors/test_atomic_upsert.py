"""Issue 23 A2: an upsert a store refuses leaves nothing behind, on every store.

The builder's row check (slimvec/sources/rowcheck.py) keeps such payloads away from the stores;
this is the store's own guarantee behind it. On hnswlib the vectors used to be added before the
payloads were encoded: a lone surrogate left the batch's vectors without payloads (the store
counted them, the manifest did not); Qdrant Edge wrote the chunks of 512 points before the bad one.
"""
from __future__ import annotations

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.errors import StoreError
from tests.connectors.stores import fast_specs

N = 600  # over Qdrant Edge's chunk of 512 points, with the bad payload in the second chunk


@pytest.mark.parametrize("spec", fast_specs())
@pytest.mark.parametrize("bad", [{"k\udc00": 1}, {"v": "x\udc00"}])
def test_a_refused_upsert_writes_nothing(tmp_path, spec, bad):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N + 10, 8)).astype(np.float32)
    store = make_store(spec, tmp_path / "store").create(8, "cosine")
    try:
        payloads = [{"i": i} for i in range(N)]
        payloads[-1] = bad
        with pytest.raises(StoreError, match="nothing of (this batch|it) was written"):
            store.upsert(np.arange(N), X[:N], payloads)
        assert store.count() == 0
        store.upsert(np.arange(N, N + 10), X[N:], [{"i": i} for i in range(N, N + 10)])
        store.flush()
        assert store.count() == 10
        assert store.get_payloads([N, N + 9]) == [{"i": N}, {"i": N + 9}]
        assert store.search(X[N:N + 1], 1).ids[0, 0] == N
    finally:
        store.close()
