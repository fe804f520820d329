"""What a client may make the server do: stores it names, folders it may reach, what answers
without a key (issue 23 B4, B5, B7). Real ``slimvec serve`` processes, real stores; the external
Qdrant is a recording loopback listener (it only has to prove that nothing connected)."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import numpy as np
import pytest

from tests.service.server import Server

RW_KEY, RO_KEY, QDRANT_KEY = "rw-secret-b4", "ro-secret-b4", "qdrant-secret-b4"
RW = {"Authorization": f"Bearer {RW_KEY}"}
RO = {"api-key": RO_KEY}
KEYS = {"SLIMVEC_API_KEY": RW_KEY, "SLIMVEC_READ_ONLY_KEY": RO_KEY, "QDRANT_API_KEY": QDRANT_KEY}


class Listener:
    """A loopback TCP listener recording every connection and what it sent (bounded loop)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2.0)
                data = b""
                try:
                    while b"\r\n\r\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                except OSError:
                    pass
                self.received.append(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture()
def listener():
    lst = Listener()
    yield lst
    lst.close()


def _body(X: np.ndarray, **extra) -> dict:
    return {"reducer": "rp:8", "encoder": None, "sample_vectors": X[:64].tolist(), **extra}


def test_client_named_stores_are_refused_before_any_connection(tmp_path, vectors, listener):
    """B4: holding the write key, a client names an external Qdrant (or a path outside the root):
    refused (403, naming --allow-store) before any connection; the operator's --allow-store lets
    exactly that location through."""
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    remote = f"qdrant:{listener.url},retries=1,timeout=5"
    with Server(root, env=KEYS) as srv:
        for name, extra in [("ext", {"store": remote}),
                            ("ext-recipe", {"reducer": None,
                                            "recipe": f"rp:8|{remote}"}),
                            ("edge-out", {"store": f"qdrant-edge:{outside}"}),
                            ("local-out", {"store": f"qdrant:{outside}"})]:
            body = {k: v for k, v in _body(vectors, **extra).items() if v is not None}
            r = httpx.put(f"{srv.url}/indexes/{name}", json=body, headers=RW, timeout=60)
            assert r.status_code == 403, (name, r.text)
            detail = r.json()["detail"]
            assert "--allow-store" in detail and "outside the index folder" in detail, detail
            assert httpx.get(f"{srv.url}/indexes/{name}", headers=RW).status_code == 404
        allow = tmp_path / "allowed"
        allow.mkdir()
        (allow / "data.jsonl").write_text('{"id": 1, "text": "a"}\n')
        r = httpx.post(f"{srv.url}/indexes/job-ext/jobs", headers=RW, timeout=60,
                       json={"path": str(allow / "data.jsonl"), "store": remote})
        assert r.status_code == 403, r.text
        time.sleep(0.5)
        assert listener.received == [], "the server connected to a location a request named"
        assert not outside.exists(), "a request made the server write outside --root"
        # a store inside the index folder is still fine
        r = httpx.put(f"{srv.url}/indexes/inside", json=_body(vectors, store="qdrant"),
                      headers=RW, timeout=60)
        assert r.status_code == 201, r.text
    with Server(root, "--allow-store", f"qdrant:{listener.url}", env=KEYS) as srv:
        r = httpx.put(f"{srv.url}/indexes/ext", json=_body(vectors, store=remote), headers=RW,
                      timeout=60)
        assert r.status_code != 403, r.text  # the listener is no Qdrant: creation fails after
        deadline = time.monotonic() + 10
        while not listener.received and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listener.received, "--allow-store did not let the allowed location through"
        assert f"api-key: {QDRANT_KEY}".encode() in listener.received[0].lower()
        # another port on the same host is not the allowed location
        r = httpx.put(f"{srv.url}/indexes/ext2", headers=RW, timeout=60, json=_body(
            vectors, store=f"qdrant:http://127.0.0.1:{listener.port + 1}"))
        assert r.status_code == 403, r.text


@pytest.fixture(scope="module")
def restarted(tmp_path_factory, vectors):
    """A keyed server restarted over a root holding an index named ``reports``, a good one, a
    broken one (its manifest overwritten while stopped) and a bench report in ``ROOT/.reports``."""
    root = tmp_path_factory.mktemp("restarted") / "root"
    root.mkdir()
    with Server(root, env=KEYS) as srv:
        for name, store in (("reports", "faiss:Flat"), ("good", "qdrant-edge"),
                            ("broken", "qdrant-edge")):
            r = httpx.put(f"{srv.url}/indexes/{name}", json=_body(vectors, store=store),
                          headers=RW, timeout=60)
            assert r.status_code == 201, r.text
    (root / "broken" / "manifest.json").write_text("{not json")
    (root / ".reports" / "run1").mkdir(parents=True)
    (root / ".reports" / "run1" / "report.html").write_text("<html>bench run1</html>")
    with Server(root, env=KEYS) as srv:
        yield srv


def test_index_name_with_trailing_newline_is_refused(restarted, vectors):
    """B7: ``$`` matched before a trailing newline, so ``docs\\n`` was a valid name."""
    from slimvec.errors import ConfigError
    from slimvec.service.indexes.names import check_name

    with pytest.raises(ConfigError, match="Invalid index name"):
        check_name("docs\n")
    r = httpx.put(f"{restarted.url}/indexes/docs%0A", json=_body(vectors), headers=RW,
                  timeout=60)
    assert r.status_code == 422, r.text
    assert "Invalid index name" in r.json()["detail"]
    assert not any(p.name.startswith("docs") for p in restarted.root.iterdir())


def test_reports_are_not_an_index_and_need_the_read_key(restarted):
    """B5: an index named ``reports`` became the unauthenticated ``/reports/`` mount after a
    restart (its manifest and payloads downloadable without a key). Reports now live in
    ``ROOT/.reports`` (no index can be named so) and need the read key when keys are set."""
    url, root = restarted.url, restarted.root
    for path in ("/reports/manifest.json", "/reports/payloads.sqlite"):
        assert httpx.get(url + path).status_code == 401, path
        assert httpx.get(url + path, headers=RO).status_code == 404, path
    assert httpx.get(url + "/reports/run1/report.html").status_code == 401
    r = httpx.get(url + "/reports/run1/report.html", headers=RO)
    assert r.status_code == 200 and "bench run1" in r.text
    assert httpx.get(f"{url}/indexes/reports", headers=RO).status_code == 200
    # an operator's --reports may not point into the index namespace either (refused at start)
    with pytest.raises(RuntimeError, match="--reports"):
        Server(root, "--reports", str(root / "reports"), env=KEYS, ready_timeout=30).start()


def test_unauthenticated_callers_see_no_detail(restarted):
    """B7: /readyz gave every failed index's error text (absolute server paths) to anyone, and
    /openapi.json, /docs, /redoc answered without a key."""
    url, root = restarted.url, restarted.root
    r = httpx.get(url + "/readyz")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ready"
    # degraded indexes (issue 25 item 7) are counted too: still serving reads, so still "ready"
    assert body["counts"] == {"ready": 2, "pending": 0, "busy": 0, "degraded": 0, "failed": 1}, body
    assert str(root) not in r.text and "broken" not in r.text and "good" not in r.text
    full = httpx.get(url + "/readyz", headers=RO).json()
    assert full["indexes"] == ["good", "reports"] and set(full["errors"]) == {"broken"}
    assert str(root) not in str(full["errors"])  # paths relative to the root
    assert "ROOT/broken/manifest.json" in full["errors"]["broken"], full["errors"]
    assert RW_KEY not in str(full) and QDRANT_KEY not in str(full)
    for path in ("/openapi.json", "/docs", "/redoc", "/metrics"):
        assert httpx.get(url + path).status_code == 401, path
        assert httpx.get(url + path, headers=RO).status_code == 200, path
    assert httpx.get(url + "/healthz").status_code == 200
    assert httpx.get(url + "/nowhere").status_code == 401


@pytest.mark.parametrize("spec, allowed", [
    ("qdrant", True), ("qdrant-edge", True), ("faiss:Flat", True), ("hnsw", True),
    ("qdrant:http://127.0.0.1:6333", True), ("qdrant:http://127.0.0.1:6333/x,retries=1", True),
    ("qdrant:http://127.0.0.1:6334", False), ("qdrant:https://127.0.0.1:6333", False),
    ("qdrant:http://evil.example:6333", False), ("qdrant:HTTP://127.0.0.1:6333", False),
    ("qdrant:http://[::1", False), ("qdrant::memory:", False),
    ("qdrant-edge:/srv/st/a", True), ("qdrant-edge:/srv/st/../x", False),
    ("qdrant-edge:/srv/stx", False), ("qdrant:/srv/st", False), ("qdrant-edge:/a\x00b", False),
])
def test_allow_store_matching(spec, allowed):
    """B4: what an --allow-store entry covers (same store, scheme, host and port, path under the
    allowed one; a folder under the allowed folder after resolving '..'); no server needed."""
    from slimvec.service.indexes.stores import store_allowed

    assert store_allowed(spec, ["qdrant:http://127.0.0.1:6333", "qdrant-edge:/srv/st"]) is allowed


def test_a_recipe_over_http_is_never_read_from_the_servers_disk(restarted, vectors, tmp_path):
    """A recipe ending in .json used to be read as a file on the server, so a client could probe
    for files anywhere; over HTTP a recipe is a string."""
    tuned = tmp_path / "tuned.json"
    tuned.write_text('{"recipe": "rp:8|hnsw"}')
    for recipe in (str(tuned), "/etc/hostname"):
        r = httpx.put(f"{restarted.url}/indexes/probe", headers=RW, timeout=60,
                      json=_body(vectors, recipe=recipe) | {"reducer": None})
        assert r.status_code == 422, r.text
        assert "expected at least a reducer and a store" in r.json()["detail"]  # parsed, not read
        r = httpx.post(f"{restarted.url}/indexes/probe/jobs", headers=RW, timeout=60,
                       json={"path": str(tuned), "recipe": recipe})
        assert r.status_code in (403, 422), r.text  # jobs off (403) or the recipe refused
    assert not (restarted.root / "probe").exists()
