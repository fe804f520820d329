"""Issue 53: a fuller Qdrant drop-in against a real ``slimvec serve`` through qdrant-client over
REST, each result compared with qdrant-client's local mode (``QdrantClient(":memory:")``): counts
after every kind of write (deleting every point included), the query kinds refused by name, the
collection config echoed back, query / search groups and dense MMR."""

from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

DIM = 8


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(53).standard_normal((400, DIM)).astype(np.float32)


def _points(X, ids, **extra):
    return [m.PointStruct(id=int(i), vector=X[i].tolist(), payload={"i": int(i), "odd": int(i) % 2, **extra})
            for i in ids]


def _counts(c, name):
    odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=1))])
    ids = sorted(p.id for p in c.scroll(name, limit=1000)[0])
    return (c.count(name, exact=True).count, c.count(name, count_filter=odd, exact=True).count,
            c.get_collection(name).points_count, ids)


def _everything(X, n):
    every, odd = m.FilterSelector(filter=m.Filter()), m.Filter(must=[m.FieldCondition(
        key="odd", match=m.MatchValue(value=1))])
    return [
        ("upsert", lambda c, name: c.upsert(name, _points(X, range(n)), wait=True)),
        ("delete ids", lambda c, name: c.delete(name, m.PointIdsList(points=[0, 1, 2]), wait=True)),
        ("delete filter", lambda c, name: c.delete(name, m.FilterSelector(filter=m.Filter(must=[
            m.FieldCondition(key="i", range=m.Range(lt=10))])), wait=True)),
        ("set payload", lambda c, name: c.set_payload(name, {"odd": 1}, points=[10, 12], wait=True)),
        ("overwrite payload", lambda c, name: c.overwrite_payload(name, {"x": 1}, points=[11], wait=True)),
        ("clear payload", lambda c, name: c.clear_payload(name, m.FilterSelector(filter=odd), wait=True)),
        ("delete all ids", lambda c, name: c.delete(name, m.PointIdsList(points=list(range(n))), wait=True)),
        ("upsert after delete-all", lambda c, name: c.upsert(name, _points(X, range(5)), wait=True)),
        ("delete all, empty filter", lambda c, name: c.delete(name, every, wait=True)),
        ("upsert again", lambda c, name: c.upsert(name, _points(X, range(3, 9)), wait=True)),
    ]


@pytest.mark.parametrize(("fit_after", "n"), [(1000, 30), (50, 120)], ids=["pending", "fitted"])
def test_counts_after_every_write_as_local_mode(client, X, fit_after, n):
    """Issue 53 item 1: deleting every point (by ids, or by the empty filter haystack sends) left
    a collection still collecting its fit sample counting the points from before (a stale cache
    of the pending rows), and the empty filter was refused; counts, filtered counts,
    ``points_count`` and the scrolled ids match local mode's after every operation."""
    name, local = f"counts-{fit_after}", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, {"slimvec_fit_after": fit_after})):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE),
                            metadata=meta)
    for what, op in _everything(X, n):
        op(local, name)
        op(client, name)
        assert _counts(client, name) == _counts(local, name), what


RECIPES = {"pending": {"slimvec_fit_after": 1000}, "faiss": {"slimvec_fit_after": 20},
           "edge": {"slimvec_fit_after": 20, "slimvec_recipe": "none|qdrant-edge|keep_full=float32"}}


@pytest.mark.parametrize("kind", list(RECIPES))
def test_blank_payload_key_as_local_mode(client, X, kind):
    """Issue 53 item 2 (qdrant-client's ``test_set_payload_with_key``): the blank key is spelled
    ``'""'`` in a filter and selects the points whose payload has key ``""``; a bare ``""`` (as a
    filter key or ``set_payload(key=)``) is refused, as by Qdrant."""
    name, local = f"blank-{kind}", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, RECIPES[kind])):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE),
                            metadata=meta)
        c.upsert(name, [m.PointStruct(id=i, vector=X[i].tolist(), payload={"": "xc" if i % 3 else "y"})
                        for i in range(30)], wait=True)
        blank = m.Filter(must=[m.FieldCondition(key='""', match=m.MatchValue(value="xc"))])
        c.set_payload(name, {"": "bbb"}, points=blank, wait=True)
    for c in (local, client):
        with pytest.raises((UnexpectedResponse, ValueError)):
            c.set_payload(name, {"": "bbb"}, points=[1], key="", wait=True)
        with pytest.raises((UnexpectedResponse, ValueError)):
            c.count(name, count_filter=m.Filter(must=[m.FieldCondition(key="", match=m.MatchValue(value="y"))]))
    assert ({p.id: p.payload for p in client.scroll(name, limit=100)[0]}
            == {p.id: p.payload for p in local.scroll(name, limit=100)[0]})
    assert client.count(name, count_filter=blank).count == 0


@pytest.mark.parametrize("kind", ["pending", "faiss"])
def test_order_by_and_sample_served(client, srv, X, kind):
    """Issue 53 item 2: ``OrderByQuery`` (ascending, descending, ``start_from``, a list value
    once per value) and ``SampleQuery`` were refused as "Not existing vector name ''"; now served
    as local mode does, on an unnamed and a named collection."""
    local = QdrantClient(":memory:")
    for vectors, suffix in ((m.VectorParams(size=DIM, distance=m.Distance.DOT), "u"),
                            ({"text": m.VectorParams(size=DIM, distance=m.Distance.DOT)}, "n")):
        name = f"order-{kind}-{suffix}"
        for c, meta in ((local, None), (client, RECIPES[kind])):
            c.create_collection(name, vectors_config=vectors, metadata=meta)
            c.upsert(name, [m.PointStruct(id=i, vector=X[i].tolist() if suffix == "u" else {"text": X[i].tolist()},
                                          payload={"v": (i * 7) % 11, "l": [i, 100 - i], "odd": i % 2})
                            for i in range(40)], wait=True)
        odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=1))])
        for order_by, flt in (("v", None), (m.OrderBy(key="v", direction=m.Direction.DESC), odd),
                              (m.OrderBy(key="l", start_from=50), None),
                              (m.OrderBy(key="v", direction=m.Direction.DESC, start_from=4), odd)):
            want, got = (c.query_points(name, query=m.OrderByQuery(order_by=order_by), query_filter=flt,
                                        limit=15, with_payload=True).points for c in (local, client))
            # equal values: local mode keeps insertion order, slimvec store-id order; both are ties
            assert [(p.order_value, p.payload) for p in got] == [(p.order_value, p.payload) for p in want]
        got = client.query_points(name, query=m.SampleQuery(sample=m.Sample.RANDOM), query_filter=odd,
                                  limit=8, with_payload=True).points
        assert len({p.id for p in got}) == 8 and all(p.payload["odd"] == 1 and p.score == 1.0 for p in got)
    r = httpx.post(f"{srv.url}/collections/{name}/points/query",
                   json={"query": {"order_by": {"key": 5}}})
    assert r.status_code == 400 and "order_by" in r.json()["status"]["error"]


def test_collection_config_echoed_back(client):
    """Issue 53 item 3 (langchain-qdrant's own tests): a collection created with
    ``{"": VectorParams}`` comes back in that named form (as local mode's and a Qdrant server's),
    one created with a bare ``VectorParams`` unnamed; ``optimizers_config`` comes back as sent (a
    Qdrant server merges it over its defaults; local mode drops it) and is patched like Qdrant's."""
    local = QdrantClient(":memory:")
    named = {"": m.VectorParams(size=DIM, distance=m.Distance.COSINE)}
    for c in (local, client):
        c.create_collection("echo", vectors_config=named,
                            optimizers_config=m.OptimizersConfigDiff(memmap_threshold=1000, indexing_threshold=0))
        c.create_collection("bare", vectors_config=named[""])
    got, want = client.get_collection("echo").config, local.get_collection("echo").config
    assert got.params.vectors == want.params.vectors == named
    assert client.get_collection("bare").config.params.vectors == local.get_collection("bare").config.params.vectors
    assert (got.optimizer_config.memmap_threshold, got.optimizer_config.indexing_threshold) == (1000, 0)
    client.update_collection("echo", optimizers_config=m.OptimizersConfigDiff(memmap_threshold=2000))
    assert client.get_collection("echo").config.optimizer_config.memmap_threshold == 2000
    assert "optimizers_config" in " ".join(w.message for w in client.get_collection("echo").warnings)


def _group_view(res):
    return [(g.id, [(h.id, h.payload) for h in g.hits], g.lookup and (g.lookup.id, g.lookup.payload))
            for g in res.groups]


@pytest.mark.parametrize("kind", ["pending", "faiss"])
def test_query_groups_as_local_mode(client, srv, X, kind):
    """Issue 53 item 4 (Haystack's ``group_by`` retrievers): ``query_points_groups`` and
    ``points/search/groups`` group the query's points by a payload value (a list value in each
    of its groups, a float one in none), ``group_size`` hits each, ``with_lookup`` from another
    collection, as local mode; exact search (``exact=True``) so the order is local mode's. A
    group key on 6 of 120 points makes the request's ``k`` grow past its first 64."""
    name, local = f"groups-{kind}", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, RECIPES[kind])):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE), metadata=meta)
        c.upsert(name, [m.PointStruct(id=i, vector=X[i].tolist(), payload={
            "g": i % 7, "tags": ["a", "b"] if i % 5 == 0 else f"t{i % 4}", "f": 0.5, "k": str(i % 3),
            **({"rare": i // 40} if i % 20 == 0 else {})})
            for i in range(120)], wait=True)
        c.create_collection(f"{name}-look", vectors_config=m.VectorParams(size=DIM, distance=m.Distance.DOT))
        c.upsert(f"{name}-look", [m.PointStruct(id=i, vector=X[i].tolist(), payload={"about": i}) for i in range(4)],
                 wait=True)
    exact = m.SearchParams(exact=True)
    for q in X[200:203]:
        for args in ({"group_by": "g", "limit": 3, "group_size": 2},
                     {"group_by": "tags", "limit": 10, "group_size": 5, "with_payload": ["g"]},
                     {"group_by": "f", "limit": 4},
                     {"group_by": "rare", "limit": 3, "group_size": 2},  # 6 points: k grows to all
                     {"group_by": "g", "limit": 7, "group_size": 20, "query_filter": m.Filter(must=[
                         m.FieldCondition(key="k", match=m.MatchValue(value="1"))])},
                     {"group_by": "g", "limit": 5, "group_size": 1, "with_lookup": f"{name}-look"}):
            want, got = (c.query_points_groups(name, query=q.tolist(), **args,
                                               search_params=exact if c is client else None)
                         for c in (local, client))
            assert _group_view(got) == _group_view(want), args
            assert [h.score for g in got.groups for h in g.hits] == pytest.approx(
                [h.score for g in want.groups for h in g.hits], abs=1e-5)
        want = local._client.collections[name].search_groups(q.tolist(), group_by="k", limit=2, group_size=4)
        r = httpx.post(f"{srv.url}/collections/{name}/points/search/groups",
                       json={"vector": q.tolist(), "group_by": "k", "limit": 2, "group_size": 4,
                             "params": {"exact": True}, "with_payload": True})
        got = m.GroupsResult.model_validate(r.json()["result"])
        assert _group_view(got) == _group_view(want)
    r = httpx.post(f"{srv.url}/collections/{name}/points/query/groups", json={"query": X[0].tolist()})
    assert r.status_code == 400 and "group_by" in r.json()["status"]["error"]


def test_query_groups_widen_prefetches_as_local_mode(client, X):
    """Haystack's hybrid ``group_by`` (its suite's ``test_query_hybrid_with_group_by_async``):
    prefetches without a limit fused by RRF, then grouped. Local mode gives each prefetch of a
    group query the whole collection; with Qdrant's default prefetch limit of 10, 20 groups of 2
    left the first groups short (4 hits of the 6 asked)."""
    name, local = "groups-prefetch", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, RECIPES["pending"])):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE), metadata=meta)
        c.upsert(name, [m.PointStruct(id=i, vector=X[i].tolist(), payload={"g": i % 20})
                        for i in range(40)], wait=True)
    exact = m.SearchParams(exact=True)
    for q in X[300:303]:
        pre = [m.Prefetch(query=q.tolist(), params=exact), m.Prefetch(query=(-q).tolist(), params=exact)]
        want, got = (c.query_points_groups(name, prefetch=pre, query=m.FusionQuery(fusion=m.Fusion.RRF),
                                           group_by="g", limit=3, group_size=2) for c in (local, client))
        assert [len(g.hits) for g in got.groups] == [2, 2, 2]
        assert _group_view(got) == _group_view(want)


@pytest.mark.parametrize("kind", ["pending", "faiss", "edge"])
def test_dense_mmr_as_local_mode(client, X, kind):
    """Issue 53 item 5: ``{"nearest": vec, "mmr": {...}}`` re-ranks the ``candidates_limit``
    nearest points by local mode's rule over the kept full vectors: the same ids in the same
    order, the same scores (the query's), with a filter, an offset and every distance."""
    local = QdrantClient(":memory:")
    for distance in (m.Distance.COSINE, m.Distance.DOT, m.Distance.EUCLID):
        name = f"mmr-{kind}-{distance.value.lower()}"
        for c, meta in ((local, None), (client, RECIPES[kind])):
            c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=distance), metadata=meta)
            c.upsert(name, _points(X, range(150)), wait=True)
        for q in X[300:303]:
            for mmr, extra in ((m.Mmr(), {}), (m.Mmr(diversity=0.9, candidates_limit=40), {"offset": 2}),
                               (m.Mmr(diversity=0.0, candidates_limit=30), {}),
                               (m.Mmr(diversity=0.3, candidates_limit=50), {"query_filter": m.Filter(must=[
                                   m.FieldCondition(key="odd", match=m.MatchValue(value=1))])})):
                want, got = (c.query_points(name, query=m.NearestQuery(nearest=q.tolist(), mmr=mmr), limit=6,
                                            with_payload=True, **extra).points for c in (local, client))
                assert [p.id for p in got] == [p.id for p in want], (distance, mmr, extra)
                assert [p.score for p in got] == pytest.approx([p.score for p in want], abs=1e-4)
    with pytest.raises(UnexpectedResponse) as exc:
        client.query_points(name, query=m.NearestQuery(nearest=X[0].tolist(), mmr=m.Mmr(diversity=2)))
    assert exc.value.status_code == 400 and "diversity" in exc.value.content.decode()


def test_langchain_max_marginal_relevance_search(srv, encoder):
    """LangChain's ``QdrantVectorStore.max_marginal_relevance_search`` (it sends a NearestQuery
    with ``mmr``) against ``slimvec serve`` returns local mode's documents, in its order."""
    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore

    from tests.conftest import bundled_sentences
    from tests.service.test_langchain_qdrant import SlimvecEmbeddings

    texts = bundled_sentences(80)
    emb = SlimvecEmbeddings(encoder)
    stores = [QdrantVectorStore.from_texts(texts, emb, metadatas=[{"row": i} for i in range(80)],
                                           collection_name="lc-mmr", **where)
              for where in ({"location": ":memory:"}, {"url": srv.url, "timeout": 120})]
    for i in (0, 11, 42):
        want, got = (s.max_marginal_relevance_search(texts[i], k=5, fetch_k=20, lambda_mult=0.4) for s in stores)
        assert [d.metadata["row"] for d in got] == [d.metadata["row"] for d in want]
        assert len({d.page_content for d in got}) == 5


@pytest.mark.parametrize("kind", ["pending", "faiss"])
def test_facets_as_local_mode(client, X, kind):
    """Facets (left for later by issue 53, small enough): counts per value at a key (a list
    counted once per distinct value, True apart from 1, floats left out), filtered, limited, by
    count then value, as local mode's."""
    name, local = f"facet-{kind}", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, RECIPES[kind])):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE), metadata=meta)
        c.upsert(name, [m.PointStruct(id=i, vector=X[i].tolist(), payload={
            "v": [i % 3, i % 3, "x" if i % 4 else True][: 1 + i % 3], "odd": i % 2, "f": 0.5,
            "n": {"w": f"w{i % 5}"}}) for i in range(60)], wait=True)
    odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=1))])
    for key, flt, limit in (("v", None, 10), ("v", odd, 2), ("n.w", None, 3), ("f", None, 10), ("none", odd, 5)):
        want, got = (c.facet(name, key, facet_filter=flt, limit=limit, exact=True).hits for c in (local, client))
        assert [(h.value, type(h.value), h.count) for h in got] == [(h.value, type(h.value), h.count) for h in want]


@pytest.mark.parametrize("kind", ["pending", "faiss"])
def test_scroll_uuid_order_and_order_by_as_local_mode(client, X, kind):
    """Scroll pages come in Qdrant's id order, as local mode's: integers by value, then UUIDs
    by value (slimvec hashes UUIDs, whose store order is another), with a filter and pages that
    cross from the integers to the UUIDs; ``order_by`` (no next page) as local mode's."""
    import uuid

    name, local = f"scroll-{kind}", QdrantClient(":memory:")
    ids = [*range(0, 50, 2), *(str(uuid.UUID(int=int(x))) for x in np.random.default_rng(7).integers(1, 2**62, 35))]
    for c, meta in ((local, None), (client, RECIPES[kind])):
        c.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE), metadata=meta)
        c.upsert(name, [m.PointStruct(id=pid, vector=X[i].tolist(), payload={"v": (i * 7) % 11, "odd": i % 2})
                        for i, pid in enumerate(ids)], wait=True)
    odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=1))])
    for flt, limit in ((None, 7), (odd, 4), (None, 100)):
        pages = []
        for c in (local, client):
            seen, offset = [], None
            while True:
                recs, offset = c.scroll(name, scroll_filter=flt, limit=limit, offset=offset)
                seen.append([r.id for r in recs])
                if offset is None:
                    break
            pages.append(seen)
        assert pages[1] == pages[0], (flt, limit)
    for ob in ("v", m.OrderBy(key="v", direction=m.Direction.DESC, start_from=6)):
        want, got = (c.scroll(name, order_by=ob, scroll_filter=odd, limit=9)[0] for c in (local, client))
        assert [(r.order_value, r.payload) for r in got] == [(r.order_value, r.payload) for r in want]
    if kind == "pending":  # beyond MAX_SORTED UUIDs: integers first, then every UUID once
        many = [*range(5), *(str(uuid.uuid4()) for _ in range(10_050))]
        client.create_collection("scroll-many", vectors_config=m.VectorParams(size=2, distance=m.Distance.DOT))
        for at in range(0, len(many), 4000):
            client.upsert("scroll-many", m.Batch(ids=many[at:at + 4000], vectors=[[1.0, 0.5]] * len(many[at:at + 4000])),
                          wait=True)
        seen, offset = [], None
        while offset is not None or not seen:
            recs, offset = client.scroll("scroll-many", limit=999, offset=offset, with_payload=False)
            seen += [r.id for r in recs]
        assert seen[:5] == list(range(5)) and sorted(map(str, seen)) == sorted(map(str, many))


@pytest.mark.parametrize("kind", ["pending", "faiss"])
def test_formula_and_relevance_feedback_as_local_mode(client, X, kind):
    """A formula query re-scores the prefetched points with qdrant-client's own evaluator (the
    prefetch scores, payload values, conditions, defaults), and its errors are local mode's
    words; a naive relevance-feedback query scores as local mode's."""
    name, local = f"formula-{kind}", QdrantClient(":memory:")
    for c, meta in ((local, None), (client, RECIPES[kind])):
        c.create_collection(name, vectors_config={"t": m.VectorParams(size=DIM, distance=m.Distance.COSINE)},
                            metadata=meta)
        c.upsert(name, [m.PointStruct(id=i, vector={"t": X[i].tolist()}, payload={"v": i % 5, "odd": i % 2})
                        for i in range(120)], wait=True)
    odd = m.FieldCondition(key="odd", match=m.MatchValue(value=1))
    pf = m.Prefetch(query=X[200].tolist(), using="t", limit=30)
    for f, th in ((m.SumExpression(sum=["$score", m.MultExpression(mult=[0.1, "v"]), odd]), None),
                  (m.MultExpression(mult=["$score", m.LnExpression(ln=m.SumExpression(sum=["w", 2.0]))]), 0.1)):
        want, got = (c.query_points(name, prefetch=pf, query=m.FormulaQuery(formula=f, defaults={"w": 3}),
                                    limit=8, score_threshold=th).points for c in (local, client))
        assert [p.id for p in got] == [p.id for p in want]
        assert [p.score for p in got] == pytest.approx([p.score for p in want], abs=1e-4)
    for f in (m.LnExpression(ln=-1.0), m.LnExpression(ln=m.SumExpression(sum=["$score", -5.0])),
              m.GeoDistance(geo_distance=m.GeoDistanceParams(origin=m.GeoPoint(lon=0, lat=0), to="v"))):
        with pytest.raises(ValueError) as want:
            local.query_points(name, prefetch=pf, query=m.FormulaQuery(formula=f))
        with pytest.raises(UnexpectedResponse) as exc:
            client.query_points(name, prefetch=pf, query=m.FormulaQuery(formula=f))
        words = [re.sub(r"-?[\d.]+", "N", x) for x in (str(want.value), exc.value.content.decode())]
        assert exc.value.status_code == 400 and words[0] in words[1]  # the scores: float32 apart
    rf = m.RelevanceFeedbackQuery(relevance_feedback=m.RelevanceFeedbackInput(
        target=X[201].tolist(), feedback=[m.FeedbackItem(example=i, score=s) for i, s in ((1, 0.9), (2, 0.5), (3, 0.1))],
        strategy=m.NaiveFeedbackStrategy(naive=m.NaiveFeedbackStrategyParams(a=0.5, b=1.0, c=0.7))))
    want, got = (c.query_points(name, query=rf, using="t", limit=10).points for c in (local, client))
    assert [p.id for p in got] == [p.id for p in want]
    assert [p.score for p in got] == pytest.approx([p.score for p in want], abs=1e-4)


def test_sparse_mmr_vector_names_and_word_group_lookups_as_local_mode(client, X):
    """MMR on a sparse vector (local mode's dot-product rule); a sparse vector and a multivector
    added to an existing collection and removed again (``create_vector_name``); a group whose
    value is a word looks up no point, as in local mode (it was refused as "not a UUID")."""
    name, local = "side-added", QdrantClient(":memory:")
    rng = np.random.default_rng(3)
    for c in (local, client):
        c.create_collection(name, vectors_config={"t": m.VectorParams(size=DIM, distance=m.Distance.COSINE)})
        c.create_vector_name(name, "sp", m.SparseVectorNameConfig(sparse=m.SparseVectorConfig()))
        c.create_vector_name(name, "mv", m.DenseVectorNameConfig(dense=m.DenseVectorConfig(
            size=4, distance=m.Distance.DOT, multivector_config=m.MultiVectorConfig(
                comparator=m.MultiVectorComparator.MAX_SIM))))
    pts = [m.PointStruct(id=i, payload={"w": ["cat", "dog", 3][i % 3]}, vector={
        "t": X[i].tolist(), "mv": rng.random((2, 4)).tolist(),
        "sp": m.SparseVector(indices=sorted(rng.choice(30, 6, replace=False).tolist()), values=rng.random(6).tolist())})
        for i in range(60)]
    for c in (local, client):
        c.upsert(name, pts, wait=True)
    (keys, got), (want_keys, want) = (_vectors(c, name, range(5)) for c in (client, local))
    assert keys == want_keys and got == pytest.approx(want, rel=1e-5)
    q = m.SparseVector(indices=list(range(0, 30, 3)), values=[1.0] * 10)
    for mmr in (m.Mmr(), m.Mmr(diversity=0.7, candidates_limit=25)):
        want, got = (c.query_points(name, query=m.NearestQuery(nearest=q, mmr=mmr), using="sp", limit=6).points
                     for c in (local, client))
        assert [(p.id, round(p.score, 4)) for p in got] == [(p.id, round(p.score, 4)) for p in want]
    want, got = (c.query_points_groups(name, "w", query=X[100].tolist(), using="t", limit=3, group_size=2,
                                       with_lookup=name).groups for c in (local, client))
    assert [(g.id, [h.id for h in g.hits], g.lookup and g.lookup.id) for g in got] == \
        [(g.id, [h.id for h in g.hits], g.lookup and g.lookup.id) for g in want]
    for c in (local, client):
        c.delete_vector_name(name, "sp")
    assert "sp" not in (client.get_collection(name).config.params.sparse_vectors or {})
    (keys, got), (want_keys, want) = (_vectors(c, name, [0, 1]) for c in (client, local))
    assert keys == want_keys and got == pytest.approx(want, rel=1e-5)
    with pytest.raises(UnexpectedResponse) as exc:
        client.create_vector_name(name, "d2", m.DenseVectorNameConfig(dense=m.DenseVectorConfig(
            size=4, distance=m.Distance.DOT)))
    assert exc.value.status_code == 400 and "d2" in exc.value.content.decode()


def _vectors(c, name, ids):
    """``[(id, vector name)], numbers`` of the points ``ids`` (a sparse vector's indices, then
    its values), in one list to compare approximately."""
    got = sorted(((r.id, k), list(v.indices) + list(v.values) if isinstance(v, m.SparseVector)
                  else np.ravel(v).tolist()) for r in c.retrieve(name, list(ids), with_vectors=True)
                 for k, v in r.vector.items())
    return [k for k, _ in got], [x for _, v in got for x in v]
