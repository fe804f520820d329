"""A framework integration unchanged against ``slimvec serve`` (issue 26): langchain-qdrant's
QdrantVectorStore with its own add / search / delete calls, embeddings from slimvec's real MiniLM
encoder wrapped as a LangChain ``Embeddings`` (no fake embeddings). Slow tier (MiniLM)."""

from __future__ import annotations

import math
import re
import uuid
import zlib
from collections import Counter

import pytest

from tests.conftest import bundled_sentences
from tests.service.server import Server

pytest.importorskip("langchain_qdrant")
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_qdrant import QdrantVectorStore, RetrievalMode, SparseEmbeddings  # noqa: E402
from langchain_qdrant.sparse_embeddings import SparseVector  # noqa: E402
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


class WordCounts(SparseEmbeddings):
    """A real sparse embedding (no model to download: fastembed's BM25 needs the network): each
    lower-cased word is one dimension (its CRC-32). A document's value is the word's count times
    ``1 + log(len(word))`` over the square root of the document's word count, times a factor
    within 1 +- 5 % drawn from the text's CRC-32 (so that scores of distinct texts do not tie:
    ties may be ordered either way); a query's value is the word's count."""

    def _one(self, text: str, document: bool) -> SparseVector:
        words = re.findall(r"\w+", text.lower())
        counts = Counter(words)
        own = 0.95 + (zlib.crc32(text.encode()) % 1000) / 10_000
        values = [c * (1 + math.log(len(w))) * own / math.sqrt(len(words)) if document else float(c)
                  for w, c in counts.items()]
        return SparseVector(indices=[zlib.crc32(w.encode()) for w in counts], values=values)

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        return [self._one(t, True) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        return self._one(text, False)


@pytest.mark.parametrize("mode", [RetrievalMode.HYBRID, RetrievalMode.SPARSE], ids=["hybrid", "sparse"])
def test_hybrid_and_sparse_modes_as_local_mode(tmp_path, encoder, mode):
    """LangChain's hybrid mode (dense + sparse, fused by RRF on the server) and its sparse mode,
    unchanged against ``slimvec serve``: the same documents as qdrant-client's local mode."""
    texts = list(dict.fromkeys(bundled_sentences(320)))[:300]  # distinct texts
    metadatas = [{"row": i, "even": i % 2 == 0} for i in range(300)]
    ids = [str(uuid.UUID(int=i + 1)) for i in range(300)]
    kw = dict(embedding=SlimvecEmbeddings(encoder), sparse_embedding=WordCounts(), retrieval_mode=mode,
              collection_name="hy", metadatas=metadatas, ids=ids)
    local = QdrantVectorStore.from_texts(texts, location=":memory:", **kw)
    root = tmp_path / "root"
    root.mkdir()
    with Server(root) as srv:
        served = QdrantVectorStore.from_texts(texts, url=srv.url, timeout=120, **kw)
        assert QdrantClient(url=srv.url, timeout=120).count("hy").count == 300
        even = m.Filter(must=[m.FieldCondition(key="metadata.even", match=m.MatchValue(value=True))])
        for i in (0, 7, 13, 120, 299):
            for flt in (None, even):
                want, got = ({d.metadata["row"]: s for d, s in store.similarity_search_with_score(
                    texts[i], k=5, filter=flt)} for store in (local, served))
                assert list(got.values()) == pytest.approx(list(want.values()), rel=1e-3), (i, got, want)
                # RRF ties (rank r in one list only) may break either way: the rows above them agree
                cut = min(want.values())
                assert {r for r, s in got.items() if s > cut + 1e-6} == {r for r, s in want.items() if s > cut + 1e-6}
                assert flt is None or all(r % 2 == 0 for r in got)
