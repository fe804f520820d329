"""Issue 39 "Done when": a corrupted-store test. Random bytes at several offsets of each store's
files (FAISS, hnswlib, Qdrant Edge), every checksum recomputed (SNAPSHOT.json, the manifest's store
sums and its own), restored through a real ``slimvec serve`` and served: the server answers another
index throughout, an index that crashes the engine is refused (422) and listed as ``failed`` with
the reason, and what restores answers searches without taking the server down."""
from __future__ import annotations

import threading

import httpx
import numpy as np
import pytest

import slimvec
from slimvec.client import ServiceError
from slimvec.errors import ConfigError
from tests.indexer.forge import corrupt, forge, read_members
from tests.service.server import Server

STORES = ["faiss", "hnsw", "qdrant-edge"]
#: Qdrant Edge keeps tens of files: one of each kind that holds the graph, the vectors, the id
#: mappings, the segment's and the shard's configuration (two offsets each)
_EDGE_FILES = ("links", "graph", "matrix.dat", "chunk_0", "mappings", "segment.json",
               "edge_config.json")


def _targets(members, store: str) -> list[tuple[str, int]]:
    files = [(ti.name, len(data)) for ti, data in members
             if data is not None and ti.name.startswith("store/") and len(data) > 16]
    if store == "qdrant-edge":
        picked = {next((f for f in files if k in f[0]), None) for k in _EDGE_FILES}
        files = sorted(f for f in picked if f is not None)
        assert len(files) >= 4, [f[0] for f in files]
    out = []
    for name, size in files:
        offsets = {60, size // 2} if store == "qdrant-edge" else {60, size // 2, size - 240}
        out += [(name, off) for off in sorted(offsets) if 0 <= off < size]
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory, vectors):
    root = tmp_path_factory.mktemp("corrupt") / "root"
    root.mkdir()
    with Server(root) as srv, slimvec.Client(srv.url) as client:
        for name in ["ok"] + [s.replace("-", "") for s in STORES]:
            store = "faiss" if name == "ok" else name.replace("qdrantedge", "qdrant-edge")
            idx = client.create(name, reducer="rp:8", store=store, encoder=None,
                                sample_vectors=vectors[:64])
            idx.add_vectors(list(range(300)), vectors[:300],
                            payloads=[{"text": f"doc {i}", "n": i} for i in range(300)])
        yield srv, client, root


class _Watch(threading.Thread):
    """Searches index ``ok`` over HTTP until stopped; counts answers and failures."""

    def __init__(self, url: str, query: list[list[float]]) -> None:
        super().__init__(daemon=True)
        self.url, self.query, self.ok, self.failed = url, query, 0, []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while not self.stop.wait(0.2):
                try:
                    r = http.post("/indexes/ok/search", json={"vectors": self.query, "k": 3})
                    if r.status_code == 200:
                        self.ok += 1
                    else:
                        self.failed.append(r.status_code)
                except httpx.HTTPError as exc:
                    self.failed.append(repr(exc))


@pytest.mark.parametrize("store", STORES)
def test_corrupted_store_files_never_take_the_server_down(served, vectors, store):
    srv, client, root = served
    name = store.replace("-", "")
    good = root / ".snapshots" / client.snapshot(name)["snapshot"]
    expected = client.index("ok").search(vectors[:2], k=3).ids.tolist()
    rng = np.random.default_rng(39)
    watch = _Watch(srv.url, vectors[:2].tolist())
    watch.start()
    outcomes: dict[str, list[str]] = {"restored": [], "refused": [], "crashed": []}
    try:
        for i, (member, offset) in enumerate(_targets(read_members(good), store)):
            noise = rng.integers(0, 256, 200, dtype=np.uint8).tobytes()
            file = f"{name}-bad-{i}.tar"
            forge(good, root / ".snapshots" / file, lambda m, a=member, o=offset, z=noise: corrupt(m, a, o, z))
            target, what = f"{name}-bad-{i}", f"{member}@{offset}"
            try:
                info = client.restore(target, file, trust_unsigned=True)
            except (ConfigError, ServiceError) as exc:
                assert "Traceback" not in str(exc)
                crashed = "crashed a checked child process" in str(exc)
                outcomes["crashed" if crashed else "refused"].append(what)
                if crashed:  # listed as failed, with the reason
                    listed = {x["name"]: x for x in client.indexes()}
                    assert listed[target]["state"] == "failed", listed.get(target)
                    assert "crashed a checked child process" in listed[target]["error"]
            else:
                outcomes["restored"].append(what)
                assert info["state"] == "ready"
                client.index(target).search(vectors[5:9], k=10)  # it answers, the server lives
            assert srv.proc.poll() is None, f"the server died on {what}: {srv.output()}"
            assert client.index("ok").search(vectors[:2], k=3).ids.tolist() == expected
    finally:
        watch.stop.set()
        watch.join(60)
    assert srv.proc.poll() is None, srv.output()
    assert watch.ok > 0 and watch.failed == [], (watch.failed, outcomes)
    print(store, {k: len(v) for k, v in outcomes.items()}, outcomes["crashed"])
    assert sum(map(len, outcomes.values())) >= 6
    if store == "hnsw":  # the finding's case: a graph file that segfaults hnswlib
        assert outcomes["crashed"], outcomes
    failed = [x["name"] for x in client.indexes() if x.get("state") == "failed"]
    assert len(failed) >= len(outcomes["crashed"])
    for target in failed:  # DELETE clears a failed one from the list
        client.delete(target)
    assert not [x for x in client.indexes() if x.get("state") == "failed"]
