"""Native point operations of ``slimvec serve`` through ``slimvec.Client`` (issue 25 item 7):
delete by ids / filter, filtered search, payload set / overwrite / key removal, get by the user's
ids, scroll page by page, count; before the reducer is fitted (pending rows) and after, on a
vector-only index (fast)."""

from __future__ import annotations

import json

import httpx
import pytest

import slimvec
import slimvec.ids
from slimvec.errors import ConfigError
from tests.service.server import Server

N = 90


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("points") / "root"
    root.mkdir()
    with Server(root) as s:
        yield s


def _uid(i: int) -> int | str:
    return i if i % 2 else f"doc-{i}"


@pytest.mark.parametrize("fit_after", [1000, 40], ids=["pending", "fitted"])
def test_point_operations(srv, vectors, fit_after):
    c = slimvec.Client(srv.url)
    name = f"pts{fit_after}"
    idx = c.create(name, reducer="pca:8", store="qdrant-edge", keep_full="float32", encoder=None,
                   fit_after=fit_after, payload_index=["lang:keyword"])
    X = vectors[:N]
    idx.add_vectors([_uid(i) for i in range(N)], X,
                    payloads=[{"lang": ("en", "fr", "de")[i % 3], "n": i} for i in range(N)])
    assert idx.info()["state"] == ("pending" if fit_after > N else "ready")
    if fit_after < N:  # declared at creation, built and recorded once the reducer was fitted
        manifest = json.loads((srv.root / name / "manifest.json").read_text())
        assert manifest["payload_index"] == {"lang": "keyword"}
    en = {"must": [{"key": "lang", "match": {"value": "en"}}]}
    assert idx.count() == N and idx.count(en) == N // 3
    for hits in idx.hits(X[:5], k=10, filter=en):
        assert len(hits) == 10 and all(h["payload"]["lang"] == "en" for h in hits)
        # a hit names both ids as `slimvec search --json` does: id the user's, store_id the store's
        assert [h["id"] for h in hits] == [h["source_id"] for h in hits] == [_uid(h["payload"]["n"]) for h in hits]
        assert [h["store_id"] for h in hits] == slimvec.ids.doc_ids([h["id"] for h in hits]).tolist()
    bare = httpx.post(f"{srv.url}/indexes/{name}/search", json={"vectors": X[:1].tolist(), "k": 3,
                                                                "payloads": False}).json()
    top = bare["hits"][0][0]  # without payloads too: the vector's own row, by the user's id
    assert (top["id"], top["store_id"], top["payload"]) == ("doc-0", bare["ids"][0][0], None)
    assert top["store_id"] == int(slimvec.ids.doc_id("doc-0"))
    docs = idx.get(["doc-0", 1, "nope"])
    assert [d and d["id"] for d in docs] == ["doc-0", 1, None]
    assert docs[0]["payload"] == {"lang": "en", "n": 0}
    seen, offset = [], None
    for _ in range(50):
        page, offset = idx.scroll(limit=13, offset=offset)
        seen.extend(d["id"] for d in page)
        if offset is None:
            break
    assert sorted(map(str, seen)) == sorted(str(_uid(i)) for i in range(N))
    assert idx.delete(ids=["doc-0", 1, "never-there"]) == 2
    assert idx.delete(filter={"must": [{"key": "lang", "match": {"value": "de"}}]}) == N // 3
    assert idx.count() == N - 2 - N // 3
    assert idx.set_payload({"flag": True}, filter=en) == N // 3 - 1  # doc-0 was deleted
    assert idx.set_payload({"only": 1}, ids=[3], overwrite=True) == 1
    assert idx.delete_payload_keys(["n"], ids=["doc-4"]) == 1
    got = [d and (d["id"], d["payload"]) for d in idx.get([3, "doc-4", 7, "doc-0", 1])]
    assert got == [(3, {"only": 1}), ("doc-4", {"lang": "fr"}), (7, {"lang": "fr", "n": 7}),
                   None, None]
    assert idx.get(["doc-6"]) == [{"id": "doc-6", "store_id": int(slimvec.ids.doc_id("doc-6")), "payload": {"lang": "en", "n": 6, "flag": True}}]
    res = idx.search(X[:10], k=20)
    deleted = {int(s) for s in slimvec.ids.doc_ids(["doc-0", 1]).tolist()}
    assert not deleted & set(res.ids.ravel().tolist())
    for hits in idx.hits(X[:10], k=20):
        assert all(h["payload"].get("lang") != "de" for h in hits)
    with pytest.raises(ConfigError):
        idx.delete()
    c.delete(name)
