"""scikit-learn's estimator checks over every reducer, with the genuine exceptions listed."""

from __future__ import annotations

import warnings

from sklearn.utils.estimator_checks import parametrize_with_checks

from slimvec.reducers import make_reducer

# Small configurations: the checks use data with 1-10 features and a few dozen rows.
ESTIMATORS = [
    make_reducer(spec)
    for spec in (
        "none",
        "pca:2",
        "pca:2,whiten=true",
        "leanvec:2",
        "whiten:2",
        "svd:2",
        "rp:2",
        "truncate:2",
        "algo:1,k=1",
        "kpca:2",
        "kpca:2,kernel=poly",
        "kpca:2,kernel=cosine",
        "ae:2,epochs=3",
        "umap:2",
    )
]

#: Behaviours every slimvec reducer chooses on purpose (see slimvec.reducers.base).
COMMON_EXCEPTIONS = {
    "check_n_features_in_after_fitting": (
        "a wrong input dimension raises DimensionMismatchError ('expected dimension 384, got "
        "383'), a ValueError, but not with scikit-learn's exact 'X has n features' wording"
    ),
    "check_dtype_object": (
        "non-numeric input raises ConfigError (a ValueError) so every bad-input error is one "
        "catchable class; the check insists on TypeError"
    ),
    "check_fit1d": "a 1-D array is read as a single vector (one row), by design of as_float32_2d",
    "check_fit2d_predict1d": "transform of a 1-D array returns the one reduced vector, by design",
}

#: algo removes 2*k directions besides the D it keeps: it needs dim >= D + 2k = 3 here, and
#: these checks fit on 1- or 2-feature data, where it rightly refuses with a ConfigError.
ALGO_SMALL_DIM = {
    name: "algo:1,k=1 needs at least 3 input features; this check fits on 1-2 features"
    for name in (
        "check_estimators_overwrite_params",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_fit2d_1feature",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
    )
}


def expected_failures(estimator) -> dict[str, str]:
    out = dict(COMMON_EXCEPTIONS)
    if estimator.name == "algo":
        out.update(ALGO_SMALL_DIM)
    return out


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # umap/numba chatter on tiny data
        check(estimator)
