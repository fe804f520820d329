import numpy as np
import pytest
from sklearn.decomposition import PCA

from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError
from slimvec.reducers import load_reducer, make_reducer


def test_pca_round_trip_is_equal(minilm_vectors, tmp_path):
    red = make_reducer("pca:96").fit(minilm_vectors[:2000])
    out = red.transform(minilm_vectors[2000:])
    assert out.dtype == np.float32 and out.shape == (1000, 96)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    red.save(tmp_path / "pca")
    back = load_reducer(tmp_path / "pca")
    assert back.spec == "pca:96"
    np.testing.assert_array_equal(back.transform(minilm_vectors[2000:]), out)


def test_pca_reconstruction_matches_sklearn(minilm_vectors):
    X = minilm_vectors[:2000]
    ours = make_reducer("pca:48,normalize=false").fit(X)
    ref = PCA(48, svd_solver="full").fit(X)
    err_ours = np.mean((ours.inverse_transform(ours.transform(X)) - X) ** 2)
    err_ref = np.mean((ref.inverse_transform(ref.transform(X)) - X) ** 2)
    assert err_ours == pytest.approx(err_ref, rel=1e-3)


def test_wrong_dimension_names_both(minilm_vectors):
    red = make_reducer("pca:16").fit(minilm_vectors[:500])
    with pytest.raises(DimensionMismatchError, match="384.*383"):
        red.transform(minilm_vectors[:3, :383])


def test_bad_inputs_are_clear(minilm_vectors, tmp_path):
    X = minilm_vectors[:100].copy()
    X[7, 3] = np.nan
    with pytest.raises(ConfigError, match="1 row.*row 7"):
        make_reducer("pca:8").fit(X)
    with pytest.raises(ConfigError, match="Unknown reducer 'pcaa'. Known:"):
        make_reducer("pcaa:8")
    with pytest.raises(ConfigError, match="500.*384"):
        make_reducer("pca:500").fit(minilm_vectors[:600])
    red = make_reducer("pca:8").fit(minilm_vectors[:100])
    red.save(tmp_path / "r")
    with open(tmp_path / "r" / "state.safetensors", "r+b") as fh:
        fh.seek(-4, 2)
        fh.write(b"\0\0\0\1")
    with pytest.raises(PersistenceError, match="state.safetensors"):
        load_reducer(tmp_path / "r")
