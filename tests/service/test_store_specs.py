"""A store spec that cannot work is refused by ``PUT /indexes/NAME`` with 422 (issue 23, A3).

Before: ``hnsw:M=0`` answered 201 and the first document write killed the whole ``slimvec serve``
process with a segmentation fault (and again after every restart); ``hnsw:M=-5`` and
``faiss:IVF100000000,PQ64`` ended in tracebacks (the second in ``bad_alloc``). Now the spec is
range-checked when the request is read, nothing is left under the root, and the server keeps
serving its other indexes.
"""

from __future__ import annotations

import httpx

from tests.service.server import Server

#: spec -> what the 422 must name (the parameter and its allowed range)
BAD = [
    ("hnsw:M=0", ["M=0", "2 to 512"]),
    ("hnsw:M=-5", ["M=-5", "2 to 512"]),
    ("faiss:IVF100000000,PQ64", ["IVF100000000", "nlist", "1 to 1048576"]),
    ("faiss:HNSW1", ["HNSW1", "2 to 512"]),
    ("qdrant-edge:ef_construct=0", ["ef_construct=0", "4 to"]),
    # fits no 8-d reducer output: known from rp:8 before any vector comes (fit_after too)
    ("faiss:PQ3", ["PQ3", "8-d"]),
]


def test_bad_store_specs_get_422_and_the_server_keeps_serving(tmp_path, vectors):
    root = tmp_path / "root"
    root.mkdir()
    X = vectors
    with Server(root) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        for i, (spec, needles) in enumerate(BAD):
            for body in ({"reducer": "rp:8", "store": spec, "encoder": None,
                          "sample_vectors": X[:64].tolist()},
                         {"reducer": "rp:8", "store": spec, "encoder": None, "fit_after": 50}):
                r = http.put(f"/indexes/bad{i}", json=body)
                assert r.status_code == 422, (spec, r.status_code, r.text)
                for needle in needles:
                    assert needle in r.text, (spec, needle, r.text)
                assert srv.proc.poll() is None, srv.output()
            # a write to the refused name finds no index (nothing half-created to crash on)
            w = http.post(f"/indexes/bad{i}/vectors", json={"vectors": [{"id": 1, "vector": X[0].tolist()}]})
            assert w.status_code == 404, w.text
        assert http.get("/healthz").status_code == 200
        assert http.get("/indexes").json()["indexes"] == []
        assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) in ([], ["reports"])
        # a good index on the same server works: create, write, search
        good = {"reducer": "rp:8", "store": "hnsw:M=16", "encoder": None, "sample_vectors": X[:64].tolist()}
        assert http.put("/indexes/good", json=good).status_code == 201
        items = [{"id": i, "vector": X[i].tolist()} for i in range(200)]
        r = http.post("/indexes/good/vectors", json={"vectors": items})
        assert r.status_code == 200 and r.json()["committed"], r.text
        res = http.post("/indexes/good/search", json={"vectors": X[:3].tolist(), "k": 1}).json()
        assert [row[0] for row in res["ids"]] == [0, 1, 2], res
        assert srv.proc.poll() is None
    # and after a restart everything opens: no refused spec was left behind to fail on
    with Server(root) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        assert http.get("/readyz").status_code == 200
        assert [i["name"] for i in http.get("/indexes").json()["indexes"]] == ["good"]
        assert http.get("/indexes/good").json()["count"] == 200
