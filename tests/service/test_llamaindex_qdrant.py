"""LlamaIndex's ``QdrantVectorStore`` (``llama-index-vector-stores-qdrant``) with its default
settings against a real ``slimvec serve`` (issue 38): nodes with real MiniLM embeddings are added,
queried (top-5 as qdrant-client's local mode finds them), filtered by full text (``TEXT_MATCH``,
Qdrant's ``MatchText``, on a metadata field: LlamaIndex keeps the node's text inside a JSON
string), by a date and by a keyword, and deleted by document.

LlamaIndex sends a date filter as a numeric ``Range``: its translation builds ``Range(gt=value)``,
which refuses an ISO string in the client before any request (against any Qdrant), so dates are
stored as epoch seconds here, as a LlamaIndex app has to store them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.service.server import Server

pytest.importorskip("llama_index.vector_stores.qdrant")
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery  # noqa: E402
from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: E402
from qdrant_client import QdrantClient  # noqa: E402

N = 300


@pytest.fixture(scope="module")
def nodes():
    from slimvec.encoder import Encoder
    from tests.conftest import bundled_sentences

    texts = list(dict.fromkeys(bundled_sentences(N + 40)))[:N]
    vecs = Encoder().encode(texts)
    day = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    return [TextNode(text=t, embedding=v.tolist(), id_=f"00000000-0000-0000-0000-{i:012d}",
                     metadata={"row": i, "lang": ("en", "fr")[i % 2], "ts": day + 86_400 * (i % 60),
                               "caption": t},
                     relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc{i % 50}")})
            for i, (t, v) in enumerate(zip(texts, vecs))], vecs


def _rows(store, q, flt=None):
    res = store.query(VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=5, filters=flt))
    return [n.metadata["row"] for n in res.nodes], res.similarities


def test_llamaindex_default_store_queries_and_filters(tmp_path, nodes):
    items, vecs = nodes
    word = "dog"  # a word in several of the bundled sentences
    assert sum(word in n.text.split() for n in items) >= 3
    filters = {
        "none": None,
        "text": MetadataFilters(filters=[MetadataFilter(key="caption", value=word, operator=FilterOperator.TEXT_MATCH)]),
        "date": MetadataFilters(filters=[
            MetadataFilter(key="ts", value=items[20].metadata["ts"], operator=FilterOperator.GTE),
            MetadataFilter(key="ts", value=items[40].metadata["ts"], operator=FilterOperator.LT)]),
        "lang-or-row": MetadataFilters(filters=[MetadataFilter(key="lang", value="fr"),
                                                MetadataFilter(key="row", value=4, operator=FilterOperator.LTE)],
                                       condition=FilterCondition.OR),
    }
    local = QdrantVectorStore(collection_name="li", client=QdrantClient(location=":memory:"))
    root = tmp_path / "root"
    root.mkdir()
    with Server(root) as s:
        client = QdrantClient(url=s.url, timeout=120)
        store = QdrantVectorStore(collection_name="li", client=client)  # defaults (batch, indexes)
        for st in (store, local):
            assert len(st.add(items)) == N
        assert client.count("li").count == N
        for name, flt in filters.items():
            for q in (vecs[3], vecs[120], vecs[251]):
                got, got_s = _rows(store, q, flt)
                want, want_s = _rows(local, q, flt)
                assert got == want and got_s == pytest.approx(want_s, abs=1e-4), (name, got, want)
                assert len(got) == 5
                if name == "text":
                    assert all(word in items[r].text.lower() for r in got)
        store.delete("doc7")  # LlamaIndex deletes by the source document's id
        assert client.count("li").count == N - N // 50
