"""slimvec export: the reducer as numpy arrays, a FAISS IndexPreTransform, a sentence-transformers
model; each reproduces ``index.reducer.transform``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import slimvec
from slimvec.cli import app
from slimvec.errors import ConfigError
from slimvec.migrate import MigrateOptions, migrate
from slimvec.migrate.export import export_reducer


@pytest.fixture()
def migrated(tmp_path, minilm_vectors):
    np.save(tmp_path / "v.npy", minilm_vectors[:500])
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx",
            MigrateOptions(reducer="pca:32", store="faiss:Flat", progress=False))
    return tmp_path / "idx"


def test_npy_and_faiss_exports_reproduce_the_reducer(tmp_path, migrated, minilm_vectors):
    import faiss

    x = minilm_vectors[2900:2950]
    with slimvec.open(migrated) as idx:
        expected = idx.reducer.transform(x)
    result = CliRunner().invoke(app, ["export", "--index", str(migrated), "--format", "npy",
                                      "--out", str(tmp_path / "np")])
    assert result.exit_code == 0, result.output
    A = np.load(tmp_path / "np" / "components.npy", allow_pickle=False)
    b = np.load(tmp_path / "np" / "offset.npy", allow_pickle=False)
    meta = json.loads((tmp_path / "np" / "linear.json").read_text())
    y = (x - b) @ A.T
    if meta["normalize"]:
        y /= np.linalg.norm(y, axis=1, keepdims=True)
    np.testing.assert_allclose(y, expected, atol=1e-5)

    path = export_reducer(migrated, "faiss-transform", tmp_path / "pre.faiss")
    index = faiss.read_index(str(path))
    pre = faiss.downcast_index(index)
    y = x.copy()
    for i in range(pre.chain.size()):
        y = faiss.downcast_VectorTransform(pre.chain.at(i)).apply(np.ascontiguousarray(y))
    np.testing.assert_allclose(y, expected, atol=1e-5)
    index.add(minilm_vectors[:500])  # full-size vectors in, reduced index inside
    _, ids = index.search(x[:5], 1)
    with slimvec.open(migrated) as idx:
        assert (ids[:, 0] == idx.search(x[:5], 1).ids[:, 0]).all()


def test_sentence_transformers_export_needs_the_encoder_for_a_migrated_index(tmp_path, migrated,
                                                                             sentences, encoder):
    from sentence_transformers import SentenceTransformer

    with pytest.raises(ConfigError, match="--model"):
        export_reducer(migrated, "sentence-transformers", tmp_path / "st")
    out = export_reducer(migrated, "sentence-transformers", tmp_path / "st", model="minilm")
    model = SentenceTransformer(str(out), device="cpu")
    got = model.encode(sentences[:8], convert_to_numpy=True)
    with slimvec.open(migrated) as idx:
        np.testing.assert_allclose(got, idx.reducer.transform(encoder.encode(sentences[:8])), atol=1e-4)


def test_non_linear_reducer_and_unknown_format_are_refused(tmp_path, minilm_vectors):
    np.save(tmp_path / "v.npy", minilm_vectors[:300])
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx",
            MigrateOptions(reducer="kpca:8", store="faiss:Flat", progress=False))
    with pytest.raises(ConfigError, match="not linear"):
        export_reducer(tmp_path / "idx", "npy", tmp_path / "o")
    with pytest.raises(ConfigError, match="Known: npy"):
        export_reducer(tmp_path / "idx", "onnx", tmp_path / "o")
