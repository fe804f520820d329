"""Ingest with mcr2: training pairs from a TSV (``--train-pairs``) and cluster ids in payloads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import slimvec
from slimvec.cli import app
from slimvec.errors import ConfigError
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.reducers import load_reducer

DATA = Path(slimvec.__file__).parent / "data"
MCR2 = "mcr2:16,clusters=4,hidden=64,epochs=3,warmup_epochs=1,batch_size=64"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, sentences):
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, s in enumerate(sentences[:300]):
            fh.write(json.dumps({"id": f"d{i}", "text": s}) + "\n")
    return path


@pytest.fixture(scope="module")
def pairs_tsv(tmp_path_factory):
    lines = (DATA / "stsb-train.tsv").read_text(encoding="utf-8").splitlines()[:400]
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cli_ingest_with_train_pairs_stores_cluster_ids(corpus, pairs_tsv, tmp_path, sentences, encoder):
    index = tmp_path / "idx"
    result = CliRunner().invoke(app, [
        "ingest", str(corpus), "--index", str(index), "--reducer", MCR2, "--store", "hnsw",
        "--train-pairs", str(pairs_tsv), "--fit-sample", "300", "--json",
    ])
    assert result.exit_code == 0, result.output
    reducer = load_reducer(index / "reducer")
    history = reducer.loss_history_
    assert history and reducer.n_features_in_ == 384
    with slimvec.open(index) as idx:
        res = idx.search([sentences[3]], k=3)
        payloads = idx.payloads(res.ids[0])
    assert all(isinstance(p["cluster"], int) and 0 <= p["cluster"] < 4 for p in payloads)
    # the stored id is the reducer's own assignment of the document's vector
    vec = encoder.encode([payloads[0]["text"]])
    assert int(reducer.predict_cluster(vec)[0]) == payloads[0]["cluster"]


def test_train_pairs_refused_for_a_reducer_without_pairs(corpus, pairs_tsv, tmp_path):
    opts = IngestOptions(reducer="pca:8", store="hnsw", fit_sample=100, progress=False,
                         train_pairs=str(pairs_tsv))
    with pytest.raises(ConfigError, match="does not learn from pairs"):
        ingest(corpus, tmp_path / "idx", opts)


def test_pca_payloads_have_no_cluster(corpus, tmp_path, sentences):
    ingest(corpus, tmp_path / "idx", IngestOptions(reducer="pca:8", store="hnsw", fit_sample=200,
                                                   progress=False))
    with slimvec.open(tmp_path / "idx") as idx:
        ids = idx.search([sentences[0]], k=2).ids[0]
        assert all("cluster" not in p for p in idx.payloads(ids))
    assert np.all(ids >= 0)
