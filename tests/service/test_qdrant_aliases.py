"""Qdrant's collection aliases and the search matrix (issue 53) through the real qdrant-client over
REST against a real ``slimvec serve``, compared with qdrant-client's local mode, on a pending
collection and a fitted one; aliases kept across a restart."""

from __future__ import annotations

import numpy as np
import pytest

from tests.service.server import Server

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client import models as m  # noqa: E402
from qdrant_client.http.exceptions import UnexpectedResponse  # noqa: E402

N = 60
#: a collection still collecting its fit sample, and one fitted (Qdrant Edge, full vectors kept)
KINDS = {"pend": None, "fit": "none|qdrant-edge|rescore=10,keep_full=float32"}


def _points(seed=5):
    rng = np.random.default_rng(seed)
    return [m.PointStruct(id=i, vector=rng.random(8).round(3).tolist(),
                          payload={"i": i, "odd": i % 2 == 1}) for i in range(N)]


def _fill(c, pts, server=False):
    for name, recipe in KINDS.items():
        meta = {"slimvec_recipe": recipe, "slimvec_fit_after": 20} if server and recipe else None
        c.create_collection(name, vectors_config=m.VectorParams(size=8, distance=m.Distance.COSINE),
                            metadata=meta)
        c.upsert(name, points=pts, wait=True)


def _aliases(c, collection=None):
    got = c.get_aliases() if collection is None else c.get_collection_aliases(collection)
    return sorted((a.alias_name, a.collection_name) for a in got.aliases)


def _create(alias, collection):
    return m.CreateAliasOperation(create_alias=m.CreateAlias(collection_name=collection, alias_name=alias))


def _same_reads(c, local, alias, q):
    got = c.query_points(alias, query=q, limit=5, with_payload=True).points
    want = local.query_points(alias, query=q, limit=5, with_payload=True).points
    assert [p.id for p in got] == [p.id for p in want]
    np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4)
    flt = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=True))])
    assert c.count(alias, count_filter=flt).count == local.count(alias, count_filter=flt).count
    assert c.retrieve(alias, [3, 4]) == local.retrieve(alias, [3, 4])
    assert c.collection_exists(alias) and local.collection_exists(alias)


def test_aliases_as_local_mode_and_after_a_restart(tmp_path):
    """Create, delete and rename aliases as local mode does; every read and write through an alias
    reaches its collection; a refused action changes nothing; the table survives a restart and a
    collection's deletion drops its aliases."""
    root, pts, rng = tmp_path / "root", _points(), np.random.default_rng(1)
    root.mkdir()
    local = QdrantClient(":memory:")
    _fill(local, pts)
    with Server(root) as srv:
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        _fill(c, pts, server=True)
        ops = [_create("a1", "pend"), _create("a2", "pend"), _create("b1", "fit")]
        for cl in (c, local):
            assert cl.update_collection_aliases(change_aliases_operations=ops)
            cl.update_collection_aliases(change_aliases_operations=[
                m.DeleteAliasOperation(delete_alias=m.DeleteAlias(alias_name="a2")),
                m.RenameAliasOperation(rename_alias=m.RenameAlias(old_alias_name="b1", new_alias_name="b2"))])
        assert _aliases(c) == _aliases(local) == [("a1", "pend"), ("b2", "fit")]
        assert _aliases(c, "fit") == _aliases(local, "fit") == [("b2", "fit")]
        for alias in ("a1", "b2"):
            _same_reads(c, local, alias, rng.random(8).tolist())
            extra = [m.PointStruct(id=500, vector=rng.random(8).tolist(), payload={"i": 500, "odd": False})]
            for cl in (c, local):  # writes through the alias
                cl.upsert(alias, points=extra, wait=True)
                cl.delete(alias, points_selector=m.PointIdsList(points=[7]), wait=True)
                cl.set_payload(alias, payload={"odd": True}, points=[500], wait=True)
            _same_reads(c, local, alias, rng.random(8).tolist())
            assert c.get_collection(alias).points_count == local.get_collection(alias).points_count == N
        # all or nothing: a good create before a refused one is not kept; as local mode refuses
        for bad in ([_create("a3", "pend"), _create("fit", "pend")],  # an alias named as a collection
                    [_create("a3", "pend"), _create("a4", "b2")],  # an alias of an alias
                    [_create("a3", "pend"), m.RenameAliasOperation(rename_alias=m.RenameAlias(
                        old_alias_name="nope", new_alias_name="a5"))]):
            with pytest.raises(UnexpectedResponse) as err:
                c.update_collection_aliases(change_aliases_operations=bad)
            assert err.value.status_code in (400, 404)
            with pytest.raises(ValueError):
                local.update_collection_aliases(change_aliases_operations=bad)
        assert _aliases(c) == _aliases(local) == [("a1", "pend"), ("b2", "fit")]
        with pytest.raises(UnexpectedResponse, match="Alias with the same name already exists"):
            c.create_collection("a1", vectors_config=m.VectorParams(size=8, distance=m.Distance.COSINE))
    with Server(root) as srv:  # restarted: the table read back from ROOT/.qdrant
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        assert _aliases(c) == [("a1", "pend"), ("b2", "fit")]
        _same_reads(c, local, "b2", rng.random(8).tolist())
        assert not c.delete_collection("a1") and c.collection_exists("pend")  # not through an alias
        for cl in (c, local):
            assert cl.delete_collection("pend")
        assert _aliases(c) == _aliases(local) == [("b2", "fit")]
        assert not c.collection_exists("a1")


def _same_matrix(c, local, name, **kw):
    got, want = c.search_matrix_pairs(name, **kw).pairs, local.search_matrix_pairs(name, **kw).pairs
    assert [(p.a, p.b) for p in got] == [(p.a, p.b) for p in want]
    np.testing.assert_allclose([p.score for p in got], [p.score for p in want], rtol=1e-4, atol=1e-6)
    got, want = c.search_matrix_offsets(name, **kw), local.search_matrix_offsets(name, **kw)
    assert got.ids == want.ids and got.offsets_row == want.offsets_row and got.offsets_col == want.offsets_col
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-4, atol=1e-6)
    return got


def test_search_matrix_as_local_mode(tmp_path):
    """Pairs and offsets of the whole sample, with a filter and through an alias, as local mode
    computes them; too large a sample is refused naming the bound."""
    root, pts = tmp_path / "root", _points()
    root.mkdir()
    local = QdrantClient(":memory:")
    _fill(local, pts)
    with Server(root) as srv:
        c = QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
        _fill(c, pts, server=True)
        odd = m.Filter(must=[m.FieldCondition(key="odd", match=m.MatchValue(value=True))])
        for name in KINDS:
            got = _same_matrix(c, local, name, sample=N, limit=3)
            assert len(got.ids) == N and len(got.scores) == 3 * N
            got = _same_matrix(c, local, name, sample=N, limit=4, query_filter=odd)
            assert got.ids == list(range(1, N, 2))
        one = m.Filter(must=[m.HasIdCondition(has_id=[5])])
        assert _same_matrix(c, local, "fit", sample=10, limit=2, query_filter=one).ids == []
        for cl in (c, local):
            cl.update_collection_aliases(change_aliases_operations=[_create("al", "fit")])
        _same_matrix(c, local, "al", sample=N, limit=2)
        with pytest.raises(UnexpectedResponse, match="at most 1000") as err:
            c.search_matrix_pairs("fit", sample=5000, limit=3)
        assert err.value.status_code == 400
