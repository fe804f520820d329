"""Document and query prefixes (E5's ``passage: `` / ``query: ``, a BGE query instruction): build
options of the spec, saved in the manifest, applied whenever documents (ingest, sync, the service's
documents) and queries (Python API, CLI, HTTP) are encoded, kept on reopen and shown by ``slimvec
info``. Real MiniLM, real hnswlib store and full-vector file; over HTTP:
``tests/service/test_text.py``."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from slimvec.cli import app
from slimvec.errors import ConfigError
from slimvec.ids import doc_ids
from slimvec.index.folder import open_index, read_manifest
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.ops.rebuild import rebuild
from slimvec.ops.sync import sync
from tests.conftest import bundled_sentences

TEXTS = bundled_sentences(80)
DOC, QUERY = "passage: ", "Represent this sentence for searching relevant passages: "
QUESTIONS = [TEXTS[3][:40], "a question about the weather"]
#: a new index that keeps its full vectors as float32: the encoder's output, as it was stored
SPEC = ["--reducer", "none", "--store", "hnsw", "--keep-full", "--full-dtype", "float32"]


def _jsonl(path, texts, start=0):
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                            for i, t in enumerate(texts, start)), encoding="utf-8")
    return path


def _stored(folder, ids):
    with open_index(folder) as idx:
        vecs, found = idx.full_vectors.get(doc_ids(ids))
    assert found.all()
    return vecs


def _prefixed(encoder, prefix, texts):
    """The encoder's vectors of prefix + text, and a check that the prefix changes them."""
    want, plain = encoder.encode([prefix + t for t in texts]), encoder.encode(texts)
    assert np.abs(want - plain).max() > 1e-2  # else these tests could not tell
    return want


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("prefixes")
    res = CliRunner().invoke(app, ["ingest", str(_jsonl(root / "docs.jsonl", TEXTS[:60])),
                                   "--index", str(root / "idx"), *SPEC, "--doc-prefix", DOC,
                                   "--query-prefix", QUERY, "--json"])
    assert res.exit_code == 0, res.output
    return root / "idx"


def test_ingest_stores_the_vectors_of_the_prefixed_documents(built, encoder):
    assert read_manifest(built).encoding == {"doc_prefix": DOC, "query_prefix": QUERY}
    np.testing.assert_allclose(_stored(built, [f"d{i}" for i in range(60)]),
                               _prefixed(encoder, DOC, TEXTS[:60]), atol=2e-5)


def test_a_reopened_index_encodes_queries_with_the_query_prefix(built, encoder):
    want = _prefixed(encoder, QUERY, QUESTIONS)
    with open_index(built) as idx:
        np.testing.assert_allclose(idx.embed(QUESTIONS), want, atol=2e-5)
        by_text, by_vector = idx.search(QUESTIONS, k=5), idx.search(want, k=5)
    np.testing.assert_array_equal(by_text.ids, by_vector.ids)
    np.testing.assert_allclose(by_text.scores, by_vector.scores, atol=1e-5)
    res = CliRunner().invoke(app, ["search", QUESTIONS[0], "--index", str(built), "-k", "5",
                                   "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.stdout)[0]["hits"]
    assert [h["store_id"] for h in hits] == by_vector.ids[0].tolist()
    np.testing.assert_allclose([h["score"] for h in hits], by_vector.scores[0], atol=1e-5)


def test_info_shows_the_prefixes(built):
    res = CliRunner().invoke(app, ["info", "--index", str(built), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert (info["doc_prefix"], info["query_prefix"]) == (DOC, QUERY)
    plain = CliRunner().invoke(app, ["info", "--index", str(built)])
    assert f"doc_prefix: {DOC}" in plain.stdout


def test_sync_and_rebuild_keep_the_index_prefixes_and_another_is_refused(built, tmp_path, encoder):
    folder = tmp_path / "idx"
    shutil.copytree(built, folder)
    # a sync without the options: the index's prefixes encode the changed documents
    changed = TEXTS[:59] + [TEXTS[70]]
    sync(_jsonl(tmp_path / "v2.jsonl", changed), folder, IngestOptions(sync=True, progress=False))
    np.testing.assert_allclose(_stored(folder, ["d59"]), _prefixed(encoder, DOC, [TEXTS[70]]),
                               atol=2e-5)
    with pytest.raises(ConfigError, match="doc_prefix 'passage: ' \\(asked 'query: '\\)"):
        ingest(_jsonl(tmp_path / "more.jsonl", TEXTS[60:62], 60), folder,
               IngestOptions(progress=False, encoding={"doc_prefix": "query: "}))
    # a rebuild into another recipe (from the kept vectors) keeps them for its queries
    rebuild(folder, "none|faiss:Flat")
    assert read_manifest(folder).encoding == {"doc_prefix": DOC, "query_prefix": QUERY}
    with open_index(folder) as idx:
        assert idx.manifest.store.startswith("faiss")
        np.testing.assert_allclose(idx.embed(QUESTIONS), _prefixed(encoder, QUERY, QUESTIONS),
                                   atol=2e-5)


def test_the_direct_text_path_gives_the_models_own_vectors_bit_for_bit(encoder):
    """Issue 36: the encoder tokenizes with the fast tokenizer's backend and runs the model's
    modules itself (no per-text Python of sentence-transformers); the vectors are exactly those of
    ``SentenceTransformer.encode`` for texts that are long (truncated), empty, accented or CJK."""
    from slimvec.encoder import Encoder

    assert encoder._direct is not None  # MiniLM's fast tokenizer passes the probe
    texts = bundled_sentences(300) + ["", "word " * 600, "naïve café " * 40, "日本語のテキスト", " x "]
    mine = Encoder.encode(encoder, texts)
    theirs = encoder.model.encode([encoder.doc_prefix + t for t in texts], batch_size=encoder.batch_size,
                                  convert_to_numpy=True, normalize_embeddings=True)
    assert mine.dtype == np.float32 and mine.shape == theirs.shape
    assert np.array_equal(mine, theirs)
