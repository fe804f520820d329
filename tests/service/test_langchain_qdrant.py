"""A framework integration unchanged against ``slimvec serve`` (issue 26): langchain-qdrant's
QdrantVectorStore with its own add / search / delete calls, embeddings from slimvec's real MiniLM
encoder wrapped as a LangChain ``Embeddings`` (no fake embeddings). Slow tier (MiniLM)."""

from __future__ import annotations

import pytest

from tests.conftest import bundled_sentences
from tests.service.server import Server

pytest.importorskip("langchain_qdrant")
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_qdrant import QdrantVectorStore  # noqa: E402
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m


class SlimvecEmbeddings(Embeddings):
    """slimvec's MiniLM encoder as a LangChain Embeddings."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encoder.encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encoder.encode([text])[0].tolist()


@pytest.mark.parametrize("n", [40, 1200], ids=["collecting-fit-sample", "fitted"])
def test_qdrant_vector_store_unchanged(tmp_path, encoder, n):
    texts = bundled_sentences(n)
    metadatas = [{"lang": ("en", "fr")[i % 2], "row": i} for i in range(n)]
    root = tmp_path / "root"
    root.mkdir()
    with Server(root) as srv:
        store = QdrantVectorStore.from_texts(texts, SlimvecEmbeddings(encoder), metadatas=metadatas,
                                             url=srv.url, collection_name="lc", batch_size=256,
                                             timeout=120)  # the machine is shared: no 5 s default
        client = QdrantClient(url=srv.url, timeout=120)
        assert client.count("lc").count == n
        state = client._client.http.client._client.get(f"{srv.url}/indexes/lc").json()["state"]
        assert state == ("pending" if n < 1000 else "ready")
        for i in (0, 7, 13):
            top = store.similarity_search(texts[i], k=3)
            assert top[0].page_content == texts[i] and top[0].metadata["row"] == i
        fr = m.Filter(must=[m.FieldCondition(key="metadata.lang", match=m.MatchValue(value="fr"))])
        hits = store.similarity_search_with_score(texts[0], k=5, filter=fr)
        assert len(hits) == 5 and all(d.metadata["lang"] == "fr" for d, _ in hits)
        ids = [d.metadata["_id"] for d in store.similarity_search(texts[7], k=2)]
        assert store.delete(ids=ids)
        assert client.count("lc").count == n - 2
        assert all(d.metadata["_id"] not in ids for d in store.similarity_search(texts[7], k=5))
        again = QdrantVectorStore.from_existing_collection(
            embedding=SlimvecEmbeddings(encoder), collection_name="lc", url=srv.url, timeout=120)
        assert again.similarity_search(texts[13], k=1)[0].page_content == texts[13]
