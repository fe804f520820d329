import json

import numpy as np
import pytest

import slimvec
from slimvec.errors import ConfigError
from slimvec.indexer.pipeline import IngestOptions, ingest

STORES = ["qdrant-edge", "qdrant", "faiss", "hnsw"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, sentences):
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, s in enumerate(sentences[:1200]):
            fh.write(json.dumps({"id": f"d{i}", "text": s, "n": i}) + "\n")
    return path


@pytest.mark.parametrize("store", STORES)
def test_ingest_search_and_reingest(corpus, sentences, tmp_path, store):
    index = tmp_path / "idx"
    opts = IngestOptions(reducer="pca:48", store=store, fit_sample=800, batch_size=200, progress=False)
    first = ingest(corpus, index, opts)
    assert first.created and first.ingested == 1200 and first.count == 1200 and first.rejected == 0
    with slimvec.open(index) as idx:
        res = idx.search([sentences[5], sentences[700]], k=5)
        assert res.ids.dtype == np.int64 and res.ids.shape == (2, 5)
        top = idx.payloads(res.ids[:, 0])
        assert [p["text"] for p in top] == [sentences[5], sentences[700]]
        assert top[0]["source_id"] == "d5" and top[0]["n"] == 5
        info = idx.info()
        assert (info["count"], info["dim_in"], info["dim_out"]) == (1200, 384, 48)
        assert info["bytes"] > 0
    again = ingest(corpus, index, IngestOptions(progress=False))
    assert not again.created and again.count == 1200


def test_changing_specs_under_an_index_is_refused(corpus, tmp_path):
    index = tmp_path / "idx"
    ingest(corpus, index, IngestOptions(reducer="pca:16", store="hnsw", fit_sample=500, progress=False))
    with pytest.raises(ConfigError, match="already holds an index built with reducer 'pca:16'"):
        ingest(corpus, index, IngestOptions(reducer="pca:32", progress=False))
