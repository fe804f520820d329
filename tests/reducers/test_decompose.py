"""Reducer fits decompose small matrices on one BLAS thread (slimvec.reducers.decompose)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

from slimvec.reducers import decompose

REDUCERS = Path(__file__).resolve().parents[2] / "slimvec" / "reducers"


def test_small_decompositions_match_numpy_and_restore_the_thread_pools() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 48))
    cov = x.T @ x
    before = [p["num_threads"] for p in threadpool_info()]
    evals, evecs = decompose.eigh(cov)
    ref_vals, _ = np.linalg.eigh(cov)
    np.testing.assert_allclose(evals, ref_vals, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(cov @ evecs, evecs * evals, atol=1e-6)
    u, s, vt = decompose.svd(x[:48])
    np.testing.assert_allclose((u * s) @ vt, x[:48], atol=1e-8)
    assert [p["num_threads"] for p in threadpool_info()] == before


def test_no_reducer_calls_a_threaded_decomposition_directly() -> None:
    direct = re.compile(r"np\.linalg\.(eigh|svd)\(")
    offenders = [p.name for p in REDUCERS.glob("*.py")
                 if p.name != "decompose.py" and direct.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
