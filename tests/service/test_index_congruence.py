"""Issue 35 item 1: a local index (``slimvec.open``) and a served one (``slimvec.Client``) are one
:class:`~slimvec.index.base.IndexBase`. The same index folder, copied, is opened in this process
and served by a real ``slimvec serve``; every operation runs against both and the answers are
compared, as qdrant-client's congruence tests compare its local and remote clients. Real FAISS /
hnswlib / Qdrant Edge stores, MiniLM vectors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import slimvec
from slimvec.index.base import IndexBase
from slimvec.migrate import MigrateOptions, migrate
from tests.service.server import Server

N = 300


def _user(records):
    """Records as a user compares them: the id and the payload's own fields. The one difference
    left: the service keeps its bookkeeping key ``source_id`` out of the payloads it answers, the
    local index shows the payload as stored (local readers such as export and rebuild use it)."""
    return [None if r is None else (r["id"], r["store_id"],
                                    {k: v for k, v in r["payload"].items() if k != "source_id"})
            for r in records]


@pytest.fixture(scope="module", params=["none|faiss:HNSW16,SQ4|rescore=4,keep_full=float16",
                                        "pca:32|hnsw|rescore=4,keep_full=float32",
                                        "none|qdrant-edge|keep_full=float16"])
def pair(request, tmp_path_factory, minilm_vectors):
    """(local, remote) over two copies of one index built from the same vectors (``slimvec.open``
    gives the local one: :class:`slimvec.ops.local.LocalIndex`, which also writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = tmp_path_factory.mktemp("congruence")
    src = tmp / "v.parquet"
    pq.write_table(pa.table({
        "id": [f"d{i}" for i in range(N)],
        "vector": [v.tolist() for v in minilm_vectors[:N]],
        "lang": [("en", "fr", "de")[i % 3] for i in range(N)],
        "n": list(range(N))}), src)
    migrate(f"parquet:{src},id=id,vector=vector", tmp / "remote" / "docs",
            MigrateOptions(recipe=request.param, progress=False, batch_size=128, fit_sample=200))
    shutil.copytree(tmp / "remote" / "docs", tmp / "local" / "docs")
    with slimvec.open(tmp / "local" / "docs") as local, Server(tmp / "remote") as srv, \
            slimvec.Client(srv.url) as client:
        yield local, client.index("docs")


def test_both_faces_are_one_protocol(pair):
    local, remote = pair
    assert isinstance(local, IndexBase) and isinstance(remote, IndexBase)


def test_the_same_operations_give_the_same_answers(pair, minilm_vectors):
    local, remote = pair
    q = minilm_vectors[N:N + 8]
    flt = {"must": [{"key": "lang", "match": {"value": "fr"}}]}

    def both(op, *args, **kw):
        a, b = getattr(local, op)(*args, **kw), getattr(remote, op)(*args, **kw)
        return a, b

    for kw in ({}, {"filter": flt}, {"rescore": 0}):
        a, b = both("search", q, 5, **kw)
        assert np.array_equal(a.ids, b.ids), (kw, a.ids, b.ids)
        assert np.allclose(a.scores, b.scores, atol=1e-5), kw
    a, b = both("count")
    assert a == b == N
    a, b = both("count", filter=flt)
    assert a == b == N // 3
    ids = ["d3", "d4", "nope", "d299"]
    assert _user(local.get(ids)) == _user(remote.get(ids))
    sids = [r["store_id"] for r in local.get(ids) if r is not None]
    assert [{k: v for k, v in p.items() if k != "source_id"} for p in local.payloads(sids)] == \
        [{k: v for k, v in p.items() if k != "source_id"} for p in remote.payloads(sids)]
    pages = []
    for face in (local, remote):
        recs, offset, seen = [], None, 0
        while seen < 10:
            page, offset = face.scroll(limit=37, offset=offset, filter=flt)
            recs += _user(page)
            seen += 1
            if offset is None:
                break
        pages.append(recs)
    assert pages[0] == pages[1] and len(pages[0]) == N // 3

    a, b = both("set_payload", {"tag": "x", "n": -1}, ids=["d5", "d6", "d7"])
    assert a == b == 3
    a, b = both("set_payload", {"only": 1}, filter={"must": [{"key": "n", "match": {"value": 9}}]},
                overwrite=True)
    assert a == b == 1
    assert _user(local.get(["d5", "d9"])) == _user(remote.get(["d5", "d9"]))
    a, b = both("delete_payload_keys", ["tag", "lang"], filter={"must": [{"key": "n", "match": {"value": -1}}]})
    assert a == b == 3
    assert _user(local.get(["d5", "d6"])) == _user(remote.get(["d5", "d6"]))
    a, b = both("delete", ids=["d10", "d11", "unknown"])
    assert a == b == 2
    a, b = both("delete", filter={"must": [{"key": "lang", "match": {"value": "de"}}]})
    assert a == b
    a, b = both("count")
    assert a == b == N - 2 - a_de(N)
    for kw in ({}, {"filter": {"must_not": [{"key": "lang", "match": {"value": "fr"}}]}}):
        a, b = both("search", q, 5, **kw)
        assert np.array_equal(a.ids, b.ids), kw
    new = minilm_vectors[N + 10:N + 30]
    ids_new = [f"n{i}" for i in range(20)] + ["d20"]  # d20 ("de") was deleted: added again
    vecs_new = np.vstack([new, minilm_vectors[N + 40:N + 41]])
    pls = [{"lang": "new", "n": 1000 + i} for i in range(21)]
    a, b = both("add_vectors", ids_new, vecs_new, pls)
    assert a["accepted"] == b["accepted"] == 21 and a["rejected"] == b["rejected"] == [], (a, b)
    a, b = both("count")
    assert a == b == N - 2 - a_de(N) + 21
    assert _user(local.get(["n0", "n3", "d20"])) == _user(remote.get(["n0", "n3", "d20"]))
    a, b = both("search", vecs_new[:4], 3)
    assert np.array_equal(a.ids, b.ids)
    la, ra = local.info(), remote.info()
    for key in ("count", "dim_in", "dim_out", "recipe", "rescore"):
        assert la.get(key) == ra.get(key), (key, la.get(key), ra.get(key))


def a_de(n: int) -> int:
    """Documents the "de" filter deletes: lang "de" (i % 3 == 2) but d11 (deleted by id before)
    and d5 (its lang removed)."""
    return sum(1 for i in range(n) if i % 3 == 2 and i not in (5, 11))
