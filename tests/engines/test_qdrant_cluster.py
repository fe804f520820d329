"""Qdrant cluster settings at the HTTP boundary.

No Qdrant server can run here and qdrant-client's local mode ignores cluster settings, so these
tests point the real qdrant-client at a *recording loopback endpoint*: a tiny HTTP server on
127.0.0.1 that records every request and answers like Qdrant's REST API just enough for the client
(it stores nothing and searches nothing).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from slimvec.connectors import canonical_store_spec, make_store


class RecordingQdrantEndpoint:
    """Loopback HTTP endpoint recording (method, path, json body); ``fail_upserts`` 503s first."""

    def __init__(self, fail_upserts: int = 0) -> None:
        self.requests: list[tuple[str, str, object]] = []
        self.fail_upserts = fail_upserts
        self.points = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, code: int, result: object) -> None:
                body = json.dumps({"result": result, "status": "ok", "time": 0.0}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                path = self.path
                outer.requests.append((self.command, path, body))
                if path == "/" or path.startswith("/telemetry"):
                    return self._answer(200, None) if path != "/" else self._send_root()
                if path.endswith("/exists"):
                    return self._answer(200, {"exists": False})
                if "/points?" in path or path.endswith("/points"):
                    if outer.fail_upserts > 0:
                        outer.fail_upserts -= 1
                        return self._answer(503, None)
                    outer.points += len(body.get("points", []))
                    return self._answer(200, {"operation_id": 1, "status": "completed"})
                if path.endswith("/points/count"):
                    return self._answer(200, {"count": outer.points})
                return self._answer(200, True)

            def _send_root(self) -> None:
                body = json.dumps({"title": "qdrant - vector search engine", "version": "1.20.0"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingQdrantEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, method: str, contains: str) -> list[object]:
        return [b for m, p, b in self.requests if m == method and contains in p]


def test_cluster_settings_reach_the_wire_and_the_manifest_spec(tmp_path):
    with RecordingQdrantEndpoint() as ep:
        spec = (f"qdrant:{ep.url},collection=docs,shard_number=6,replication_factor=2,"
                "write_consistency_factor=2,shard_key=tenant-a,batch=10,parallel=3")
        store = make_store(spec, tmp_path).create(8, "cosine")
        ids = np.arange(1, 36)
        store.upsert(ids, np.random.default_rng(0).normal(size=(35, 8)).astype(np.float32),
                     [{"i": int(i)} for i in ids])
        assert store.count() == 35
        store.close()
    create = ep.bodies("PUT", "/collections/docs")[0]
    assert create["shard_number"] == 6
    assert create["replication_factor"] == 2
    assert create["write_consistency_factor"] == 2
    assert create["sharding_method"] == "custom"
    assert create["vectors"] == {"size": 8, "distance": "Cosine"}
    assert ep.bodies("PUT", "/collections/docs/shards") == [{"shard_key": "tenant-a"}]
    upserts = [(p, b) for m, p, b in ep.requests if m == "PUT" and "/points" in p and "shards" not in p]
    assert len(upserts) == 4  # 35 points in batches of 10
    assert all("wait=true" in p for p, _ in upserts)
    assert all(b["shard_key"] == "tenant-a" for _, b in upserts)
    assert sorted(pt["id"] for _, b in upserts for pt in b["points"]) == list(range(1, 36))
    recorded = canonical_store_spec(spec)  # what the manifest records as "store"
    for opt in ("shard_number=6", "replication_factor=2", "write_consistency_factor=2",
                "shard_key=tenant-a"):
        assert opt in recorded


def test_upsert_retries_with_backoff_after_a_server_error(tmp_path):
    with RecordingQdrantEndpoint(fail_upserts=1) as ep:
        store = make_store(f"qdrant:{ep.url},retries=3", tmp_path).create(4, "cosine")
        store.upsert([1, 2], np.eye(2, 4, dtype=np.float32))
        store.close()
    upserts = [p for m, p, _ in ep.requests if m == "PUT" and "/points" in p]
    assert len(upserts) == 2 and ep.points == 2  # one 503, one retry
    no_cluster = ep.bodies("PUT", "/collections/slimvec")[0]
    assert "shard_number" not in no_cluster or no_cluster["shard_number"] is None
