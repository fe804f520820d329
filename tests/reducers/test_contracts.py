"""Issue 3: the contract every registered reducer keeps, on real MiniLM vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError
from slimvec.reducers import load_reducer, make_reducer
from slimvec.reducers.registry import known_reducers

#: A small, fast configuration of every registered reducer (D=8 out of 384).
SPECS = {
    "none": "none",
    "pca": "pca:8",
    "leanvec": "leanvec:8",
    "whiten": "whiten:8",
    "svd": "svd:8",
    "rp": "rp:8",
    "truncate": "truncate:8",
    "algo": "algo:8,k=1",
    "kpca": "kpca:8,fit_max=300",
    "ae": "ae:8,epochs=2",
    "umap": "umap:8",
    "embedtextnet": "embedtextnet:8,epochs=1,width=4",
    "mcr2": "mcr2:8,clusters=4,hidden=32,epochs=2,warmup_epochs=1,batch_size=100",
    "lle": "lle:8,fit_max=300",
    "npe": "npe:8,fit_max=300",
}
FIT_ROWS = 300


def test_every_registered_reducer_is_covered():
    assert sorted(SPECS) == known_reducers()


@pytest.fixture(scope="module")
def fitted(minilm_vectors):
    import torch

    torch.set_num_threads(1)
    X = minilm_vectors[:FIT_ROWS]
    return {name: make_reducer(spec).fit(X) for name, spec in SPECS.items()}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_save_load_transform_equal_float32(name, fitted, minilm_vectors, tmp_path):
    red = fitted[name]
    Q = minilm_vectors[FIT_ROWS : FIT_ROWS + 50]
    out = red.transform(Q)
    assert out.dtype == np.float32
    assert out.shape == (50, red.n_components_)
    if name == "umap":  # umap-learn serialises only with pickle: saving is refused, clearly
        with pytest.raises(PersistenceError, match="pickle"):
            red.save(tmp_path / name)
        return
    red.save(tmp_path / name)
    back = load_reducer(tmp_path / name)
    assert type(back) is type(red)
    assert back.spec == red.spec
    np.testing.assert_allclose(back.transform(Q), out, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_dimension_mismatch_names_both(name, fitted, minilm_vectors):
    with pytest.raises(DimensionMismatchError, match="384.*383"):
        fitted[name].transform(minilm_vectors[:2, :383])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("name", ["pca", "ae", "mcr2", "lle"])
def test_non_finite_rows_are_named(name, bad, fitted, minilm_vectors):
    X = minilm_vectors[:60].copy()
    X[[11, 40], 5] = bad
    with pytest.raises(ConfigError, match="2 row.*row 11"):
        make_reducer(SPECS[name]).fit(X)
    with pytest.raises(ConfigError, match="2 row.*row 11"):
        fitted[name].transform(X)


@pytest.mark.parametrize("name", sorted(set(SPECS) - {"none"}))
def test_too_many_components_names_both_numbers(name, minilm_vectors):
    base = SPECS[name].split(",", 1)
    spec = ",".join([base[0].split(":")[0] + ":500"] + base[1:])
    with pytest.raises(ConfigError, match="500.*384"):
        make_reducer(spec).fit(minilm_vectors[:20])


@pytest.mark.parametrize("name", ["pca", "svd", "kpca", "lle", "npe"])
def test_more_components_than_samples(name, minilm_vectors):
    base = SPECS[name].split(",", 1)
    spec = ",".join([base[0].split(":")[0] + ":40"] + base[1:])
    with pytest.raises(ConfigError, match="40.*30"):
        make_reducer(spec).fit(minilm_vectors[:30])


@pytest.mark.parametrize("name", sorted(SPECS))
def test_transform_before_fit(name, minilm_vectors):
    with pytest.raises(NotFittedError):
        make_reducer(SPECS[name]).transform(minilm_vectors[:2])


def _edit_config(folder, **changes):
    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(changes)
    cfg_path.write_text(json.dumps(cfg))
    return cfg


def test_unknown_type_is_named(fitted, tmp_path):
    fitted["pca"].save(tmp_path / "r")
    _edit_config(tmp_path / "r", type="quantum")
    with pytest.raises(PersistenceError, match="config.json.*quantum"):
        load_reducer(tmp_path / "r")


def test_newer_format_version_is_refused(fitted, tmp_path):
    fitted["pca"].save(tmp_path / "r")
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    key = "format_version"
    _edit_config(tmp_path / "r", **{key: int(cfg[key]) + 1})
    with pytest.raises(PersistenceError, match="config.json"):
        load_reducer(tmp_path / "r")


@pytest.mark.parametrize("name", ["pca", "ae", "mcr2", "npe"])
def test_wrong_shapes_are_named(name, fitted, tmp_path):
    from safetensors.numpy import load_file, save_file

    fitted[name].save(tmp_path / "r")
    st = tmp_path / "r" / "state.safetensors"
    arrays = load_file(str(st))
    key = sorted(arrays)[0]
    arrays[key] = np.zeros(tuple(s + 1 for s in arrays[key].shape), arrays[key].dtype)
    save_file(arrays, str(st))
    with pytest.raises(PersistenceError, match="state.safetensors"):
        load_reducer(tmp_path / "r")


def test_faiss_export_matches_transform(minilm_vectors):
    red = make_reducer("pca:32").fit(minilm_vectors[:1000])
    Q = minilm_vectors[1000:1100]
    ours = red.transform(Q)
    t = red.to_faiss()
    got = t.apply(np.ascontiguousarray(Q)) if hasattr(t, "apply") else t.apply_py(Q)
    np.testing.assert_allclose(got, ours, atol=1e-5)


def test_sentence_transformers_export_matches_transform(encoder, sentences, minilm_vectors):
    red = make_reducer("pca:32").fit(minilm_vectors[:1000])
    st = red.to_sentence_transformers(encoder.model)
    texts = sentences[2000:2010]
    got = st.encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(got, red.transform(encoder.encode(texts)), atol=1e-4)
    dense = [m for m in st if type(m).__name__ == "Dense"]
    assert dense and dense[0].linear.bias is not None


def _recon_mse(X, R):
    return float(np.mean((X - R) ** 2))


def test_autoencoder_reconstructs_better_than_random_projection(minilm_vectors):
    X, T = minilm_vectors[:2500], minilm_vectors[2500:]
    ae = make_reducer("ae:32,activation=identity,epochs=40,normalize=false").fit(X)
    rp = make_reducer("rp:32,normalize=false").fit(X)
    err_ae = _recon_mse(T, ae.inverse_transform(ae.transform(T)))
    # best linear reconstruction from the random projection (least squares on the fit rows)
    Zf = rp.transform(X)
    W, *_ = np.linalg.lstsq(np.c_[Zf, np.ones(len(Zf))], X, rcond=None)
    err_rp = _recon_mse(T, np.c_[rp.transform(T), np.ones(len(T))] @ W)
    assert err_ae < 0.9 * err_rp
