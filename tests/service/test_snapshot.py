"""Snapshot and restore over HTTP and ``slimvec.Client`` (issue 25 item 6), on every store: the
index keeps serving while it is snapshotted, a restore is by snapshot name only (a path is
refused), and the restored index answers what the original did."""
from __future__ import annotations

import numpy as np
import pytest

import slimvec
from slimvec.client import ServiceError
from slimvec.errors import ConfigError, IndexBusyError
from tests.service.server import Server

STORES = ["qdrant-edge", "qdrant", "faiss", "hnsw"]


@pytest.fixture(scope="module")
def served(tmp_path_factory, vectors):
    root = tmp_path_factory.mktemp("snap") / "root"
    root.mkdir()
    with Server(root) as srv, slimvec.Client(srv.url) as client:
        for store in STORES:
            name = store.replace("-", "")
            idx = client.create(name, reducer="rp:8", store=store, encoder=None,
                                sample_vectors=vectors[:64])
            idx.add_vectors(list(range(120)), vectors[:120],
                            payloads=[{"text": f"doc {i}", "n": i} for i in range(120)])
        yield srv, client, root


@pytest.mark.parametrize("store", STORES)
def test_snapshot_then_restore_under_another_name_answers_the_same(served, vectors, store):
    srv, client, root = served
    name = store.replace("-", "")
    before = client.index(name).search(vectors[:5], k=5)
    out = client.snapshot(name)
    assert out["count"] == 120 and out["snapshot"].startswith(f"{name}-")
    assert (root / ".snapshots" / out["snapshot"]).is_file()
    assert out["snapshot"] in [s["snapshot"] for s in client.snapshots()]
    info = client.restore(f"{name}-copy", out["snapshot"])
    assert info["count"] == 120 and info["store"].startswith(store)
    after = client.index(f"{name}-copy").search(vectors[:5], k=5)
    assert after.ids.tolist() == before.ids.tolist()
    np.testing.assert_allclose(after.scores, before.scores, rtol=1e-5)
    ids = [int(i) for i in before.ids[0]]
    assert client.index(f"{name}-copy").payloads(ids) == client.index(name).payloads(ids)
    # the original kept serving and writing meanwhile
    client.index(name).add_vectors([500], vectors[200:201], payloads=[{"text": "later"}])
    assert client.index(name).info()["count"] == 121


def test_restore_refuses_paths_unknown_names_and_an_existing_index(served, vectors):
    srv, client, root = served
    snap = client.snapshot("hnsw", file="hnsw-fixed.tar")["snapshot"]
    assert snap == "hnsw-fixed.tar"
    for bad in ("../hnsw-fixed.tar", "/etc/passwd", "sub/x.tar", "x.txt", ".snapshots"):
        with pytest.raises(ConfigError, match="plain file name"):
            client.restore("other", bad)
    with pytest.raises(ServiceError, match="No snapshot named"):
        client.restore("other", "missing.tar")
    with pytest.raises(IndexBusyError, match="exists; pass force"):
        client.restore("faiss", snap)
    with pytest.raises(ConfigError, match="plain file name"):
        client.snapshot("hnsw", file="../../escape.tar")
    assert not (root.parent / "escape.tar").exists() and not (root / "other").exists()
    # force replaces: the faiss index becomes a copy of the hnsw one
    info = client.restore("faiss", snap, force=True)
    assert info["store"].startswith("hnsw") and info["count"] >= 120
    assert client.index("faiss").search(vectors[:1], k=1).ids[0, 0] == 0
    assert srv.proc.poll() is None


@pytest.mark.parametrize("store", ["faiss", "qdrant-edge"])
def test_snapshots_taken_while_the_service_writes_are_whole_commits(served, vectors, store):
    """Each snapshot is one commit of the index's writer: a count of whole batches, with the
    manifest, the store and the payloads agreeing (FAISS pinned between commits; Qdrant Edge
    copied under the writer's lock)."""
    import json
    import threading
    import time

    srv, client, root = served
    name = f"live{store.replace('-', '')}"
    idx = client.create(name, reducer="rp:8", store=store, encoder=None,
                        sample_vectors=vectors[:64])
    idx.add_vectors(list(range(10)), vectors[:10], payloads=[{"n": i} for i in range(10)])
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        n = 10
        try:
            while not stop.is_set() and n < 390:
                with slimvec.Client(srv.url) as c:
                    c.index(name).add_vectors(list(range(n, n + 10)), vectors[n:n + 10],
                                              payloads=[{"n": i} for i in range(n, n + 10)])
                n += 10
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        for _ in range(600):  # the writer is under way (bounded wait)
            if idx.info()["count"] >= 30 or errors:
                break
            time.sleep(0.05)
        snaps = [client.snapshot(name, file=f"{name}-{i}.tar") for i in range(3)]
    finally:
        stop.set()
        thread.join(120)
    assert not errors, errors
    for i, snap in enumerate(snaps):
        copy = f"{name}-copy{i}"
        info = client.restore(copy, snap["snapshot"])
        count = info["count"]
        assert count == snap["count"] and count % 10 == 0 and count >= 10
        manifest = json.loads((root / copy / "manifest.json").read_text())
        assert manifest["count"] == count
        last, after = client.index(copy).payloads([count - 1, count])
        assert last["n"] == count - 1 and after is None


def test_a_hostile_snapshot_on_the_server_gets_422_and_restores_nothing(served):
    import io
    import tarfile

    srv, client, root = served
    bad = root / ".snapshots" / "evil.tar"
    bad.parent.mkdir(exist_ok=True)
    with tarfile.open(bad, "w") as tar:
        body = b'{"format": "slimvec-snapshot", "format_version": 1, "members": []}'
        ti = tarfile.TarInfo("SNAPSHOT.json")
        ti.size = len(body)
        tar.addfile(ti, io.BytesIO(body))
        link = tarfile.TarInfo("manifest.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(ConfigError, match="evil.tar: the archive is unsigned.*trust_unsigned"):
        client.restore("evil", "evil.tar")  # an archive the server did not sign (issue 39 F3)
    with pytest.raises(ConfigError, match="evil.tar: member 'manifest.json' is a symbolic link"):
        client.restore("evil", "evil.tar", trust_unsigned=True)
    assert not (root / "evil").exists()
    assert not [p for p in root.iterdir() if ".restore-" in p.name]
    assert "evil" not in [i["name"] for i in client.indexes()]
