"""Haystack's ``QdrantDocumentStore`` (``qdrant-haystack``) with its default settings against a
real ``slimvec serve`` (issue 38): its first write sends ``VectorParams(on_disk=False)`` and the
other collection options; documents with real MiniLM embeddings are written, counted, retrieved
by embedding (top-5 as qdrant-client's local mode finds them, also under an ISO-date filter) and
deleted."""

from __future__ import annotations

from importlib.resources import files

import pytest

from tests.service.server import Server

pytest.importorskip("haystack_integrations.document_stores.qdrant")
from haystack import Document  # noqa: E402
from haystack_integrations.components.retrievers.qdrant import QdrantEmbeddingRetriever  # noqa: E402
from haystack_integrations.document_stores.qdrant import QdrantDocumentStore  # noqa: E402


@pytest.fixture(scope="module")
def docs():
    from slimvec.encoder import Encoder

    rows = (files("slimvec") / "data" / "stsb-dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    texts = sorted({row.split("\t")[0] for row in rows})[:300]
    vecs = Encoder().encode(texts + ["Someone plays an instrument.", "A dog runs in a field."])
    return [Document(content=t, embedding=v.tolist(), meta={"n": i, "date": f"2024-01-{1 + i % 28:02d}"})
            for i, (t, v) in enumerate(zip(texts, vecs))], vecs[-2:]


def test_haystack_default_store_writes_and_retrieves(tmp_path, docs):
    documents, queries = docs
    root = tmp_path / "root"
    root.mkdir()
    local = QdrantDocumentStore(location=":memory:", index="hay", embedding_dim=384)
    with Server(root) as s:
        # defaults but the timeout: a loaded test machine can take over 5 s to create an index
        store = QdrantDocumentStore(url=s.url, index="hay", embedding_dim=384, timeout=120)
        for st in (store, local):
            assert st.write_documents(documents) == len(documents)
        assert store.count_documents() == len(documents)
        for q in queries:
            got = QdrantEmbeddingRetriever(store, top_k=5).run(query_embedding=q.tolist())["documents"]
            want = QdrantEmbeddingRetriever(local, top_k=5).run(query_embedding=q.tolist())["documents"]
            assert [d.id for d in got] == [d.id for d in want]
            assert abs(got[0].score - want[0].score) < 1e-3 and got[0].content == want[0].content
        # Haystack's ISO dates become Qdrant datetime ranges (evaluated point by point here)
        late = {"field": "meta.date", "operator": ">=", "value": "2024-01-20"}
        got = QdrantEmbeddingRetriever(store, top_k=5, filters=late).run(query_embedding=q.tolist())
        want = QdrantEmbeddingRetriever(local, top_k=5, filters=late).run(query_embedding=q.tolist())
        assert [d.id for d in got["documents"]] == [d.id for d in want["documents"]]
        assert len(store.filter_documents(late)) == len(local.filter_documents(late)) > 0
        store.delete_documents([documents[0].id])
        assert store.count_documents() == len(documents) - 1
