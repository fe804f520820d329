"""Small dense eigen/singular decompositions on one BLAS thread (used by every reducer fit).

A reducer's fit ends in a decomposition of a (d x d) matrix, d a few hundred. Threaded LAPACK
gains nothing at that size and loses a great deal when the cores are busy: measured on this
project's 2-core machine under load, ``numpy.linalg.eigh`` of a 384 x 384 covariance took 2.2-8.3 s
with OpenBLAS's two threads spinning against other work, 0.19-0.22 s on one thread (the rebuild
profile of issue 25 item 5 found 9.2 s of a 26.9 s rebuild there). The large products before the
decomposition (``X.T @ X``) keep the default threads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["eigh", "svd", "one_thread"]

#: Above this many rows the decomposition is left to the default threads.
SMALL = 4096


def one_thread() -> Any:
    """A context manager limiting BLAS/OpenMP pools to one thread (threadpoolctl)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def eigh(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`numpy.linalg.eigh`, on one thread when ``a`` is small (see the module docstring)."""
    if a.shape[0] > SMALL:
        return np.linalg.eigh(a)
    with one_thread():
        return np.linalg.eigh(a)


def svd(a: np.ndarray, full_matrices: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`numpy.linalg.svd`, on one thread when ``a`` is small (see the module docstring)."""
    if max(a.shape) > SMALL:
        return np.linalg.svd(a, full_matrices=full_matrices)
    with one_thread():
        return np.linalg.svd(a, full_matrices=full_matrices)
