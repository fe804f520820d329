"""Scale data: the mixture fitted to real MiniLM vectors, streamed deterministically to .npy;
GloVe 6B-50d from its PyPI package."""

from __future__ import annotations

import numpy as np
import pytest

import benchmarks.corpora.synthetic as syn
from slimvec.errors import ConfigError


@pytest.fixture(scope="module")
def mixture(minilm_vectors):
    return syn.fit_mixture(minilm_vectors[:2500], k=8, seed=0, source="test")


def test_stream_is_deterministic_chunked_and_memory_mapped(mixture, tmp_path, monkeypatch):
    monkeypatch.setattr(syn, "CHUNK", 300)  # several chunks
    a = syn.write_vectors(tmp_path / "a.npy", mixture, 1000, seed=3)
    b = syn.write_vectors(tmp_path / "b.npy", mixture, 1000, seed=3)
    c = syn.write_vectors(tmp_path / "c.npy", mixture, 1000, seed=4)
    A = np.load(a, mmap_mode="r")
    assert A.shape == (1000, 384) and A.dtype == np.float32
    np.testing.assert_array_equal(A, np.load(b))
    assert not np.allclose(A[:10], np.load(c)[:10])
    np.testing.assert_allclose(np.linalg.norm(A, axis=1), 1.0, atol=1e-5)
    sub = syn.prefix(a, 400, tmp_path / "sub.npy")
    np.testing.assert_array_equal(np.load(sub), A[:400])
    with pytest.raises(ConfigError, match="fewer than the 2000"):
        syn.prefix(a, 2000, tmp_path / "x.npy")


def test_samples_look_like_the_real_vectors(mixture, minilm_vectors, tmp_path):
    real = minilm_vectors[:2500].astype(np.float64)  # what the mixture was fitted to
    fake = mixture.sample(3000, np.random.default_rng(0)).astype(np.float64)
    # the same mean direction and a similar spread of similarities to it
    assert np.dot(real.mean(0), fake.mean(0)) / (np.linalg.norm(real.mean(0)) * np.linalg.norm(fake.mean(0))) > 0.95
    ev_real = np.linalg.eigvalsh(np.cov(real, rowvar=False))[::-1][:10]
    ev_fake = np.linalg.eigvalsh(np.cov(fake, rowvar=False))[::-1][:10]
    assert np.all(np.abs(ev_fake / ev_real - 1) < 0.5)
    # neighbour structure exists (not isotropic noise): nearest real neighbour of a sample is close
    nn = (fake[:200] @ minilm_vectors[:2500].T).max(axis=1)
    iso = np.random.default_rng(1).standard_normal((200, 384))
    iso /= np.linalg.norm(iso, axis=1, keepdims=True)
    assert nn.mean() > (iso @ minilm_vectors[:2500].T).max(axis=1).mean() + 0.3
    # the artifact round-trips (JSON + safetensors)
    back = syn.Mixture.load(mixture.save(tmp_path / "mix"))
    np.testing.assert_array_equal(back.sample(5, np.random.default_rng(2)), mixture.sample(5, np.random.default_rng(2)))


def test_too_few_vectors_for_k(minilm_vectors):
    with pytest.raises(ConfigError, match="2k"):
        syn.fit_mixture(minilm_vectors[:10], k=8)


def test_glove_50d_loads_real_vectors():
    vectors, words = syn.load_glove_50d(words=True)
    assert vectors.shape == (400000, 50) and vectors.dtype == np.float32
    assert words[:3] == ["the", ",", "."]
    king, queen, man, woman = (vectors[words.index(w)] for w in ("king", "queen", "man", "woman"))
    guess = king - man + woman
    cos = lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))  # noqa: E731
    assert cos(guess, queen) > cos(guess, man)
