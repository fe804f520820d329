"""ingest --keep-full: the same two-stage search as migrate, for an index built from texts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import slimvec
from slimvec.cli import app
from slimvec.connectors import store_class
from slimvec.indexer.pipeline import IngestOptions, ingest
from tests.connectors.stores import full_vector_placements


@pytest.mark.parametrize("store,in_store", [(s, store_class(s).keeps_full_vectors)
                                            for s in full_vector_placements()])
def test_ingest_keep_full_rescores_with_encoder_vectors(tmp_path, sentences, encoder, store, in_store):
    docs = tmp_path / "docs.jsonl"
    texts = sentences[:300]
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    summary = ingest(docs, tmp_path / "idx", IngestOptions(
        reducer="pca:24", store=store, keep_full="float32", progress=False, batch_size=64))
    assert summary.count == 300
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.manifest["full"]["in_store"] is in_store
        res = idx.search(texts[:20], 1, rescore=4)  # texts work: the index has an encoder
        assert (res.ids[:, 0] == np.arange(20)).all()
        np.testing.assert_allclose(res.scores[:, 0], 1.0, atol=1e-4)  # full-space cosine of itself


def test_cli_search_rescore(tmp_path, sentences):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(sentences[:200])))
    runner = CliRunner()
    built = runner.invoke(app, ["ingest", str(docs), "--index", str(tmp_path / "idx"), "--reducer",
                                "pca:16", "--store", "hnsw", "--keep-full", "--json"])
    assert built.exit_code == 0, built.output
    found = runner.invoke(app, ["search", sentences[3], "--index", str(tmp_path / "idx"), "-k", "3",
                                "--rescore", "4", "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout[found.stdout.index("["):])[0]["hits"]
    assert hits[0]["id"] == 3 and abs(hits[0]["score"] - 1.0) < 1e-4
