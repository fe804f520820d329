import json

import numpy as np
import pytest

import slimvec
from slimvec.errors import ConfigError
from slimvec.filters import parse_filter
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


@pytest.mark.parametrize("store", ["qdrant-edge", "faiss"])
def test_declared_payload_indexes_are_part_of_the_spec(corpus, tmp_path, store):
    """``IngestOptions.payload_index`` (``--payload-index``) is a field of the build spec: the
    writer builds the indexes with the store, before the first document, and records them; a
    later ingest into the index adds the ones it lacks. A bad kind is refused before encoding."""
    from slimvec.index.manifest import Manifest

    index = tmp_path / "idx"
    ingest(corpus, index, IngestOptions(reducer="pca:16", store=store, fit_sample=500, progress=False,
                                        payload_index={"n": "integer"}))
    assert Manifest.read(index).extra["payload_index"] == {"n": "integer"}
    low = {"must": [{"key": "n", "range": {"lt": 10}}]}
    with slimvec.open(index) as idx:
        if store == "qdrant-edge":
            assert "n" in idx.store.payload_indexes()
        else:  # the in-memory payload index estimates a filter's share; without one, None
            assert idx.store.filter_share(parse_filter(low)) == pytest.approx(10 / 1200)
        assert idx.count(filter=low) == 10
    ingest(corpus, index, IngestOptions(progress=False, payload_index={"id": "keyword"}))
    assert Manifest.read(index).extra["payload_index"] == {"n": "integer", "id": "keyword"}
    with pytest.raises(ConfigError, match="payload_index"):
        ingest(corpus, tmp_path / "bad", IngestOptions(payload_index={"n": "text"}, progress=False))
    assert not (tmp_path / "bad" / "manifest.json").exists()
