"""Every operation of ``slimvec serve``'s OpenAPI schema has a ``slimvec.Client`` method (issue 24
item 4): the schema is built in-process from ``create_app`` (no server), and compared with the
table below in both directions, so a new endpoint cannot be left out of the client.

ADDING AN ENDPOINT: add its client method (on :class:`slimvec.client.Client`, or on
:class:`slimvec.client.RemoteIndex` for a ``/indexes/{name}/...`` route) and one row to
:data:`CLIENT_METHODS`: ``("METHOD", "/path/{param}"): "Class.method"``. The method's source must
spell the path (``f"/indexes/{self.name}/..."``), which the test checks. An endpoint served for
another client (the Qdrant-compatible API) goes into :data:`OTHER_CLIENTS` with the reason.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from slimvec.client import Client, RemoteIndex  # noqa: E402

#: (HTTP method, OpenAPI path) -> the client method that calls it
CLIENT_METHODS: dict[tuple[str, str], str] = {
    ("GET", "/healthz"): "Client.health",
    ("GET", "/readyz"): "Client.ready",
    ("GET", "/metrics"): "Client.metrics",
    ("GET", "/indexes"): "Client.indexes",
    ("PUT", "/indexes/{name}"): "Client.create",
    ("GET", "/indexes/{name}"): "RemoteIndex.info",
    ("DELETE", "/indexes/{name}"): "Client.delete",
    ("POST", "/indexes/{name}/documents"): "RemoteIndex.add",
    ("POST", "/indexes/{name}/vectors"): "RemoteIndex.add_vectors",
    ("POST", "/indexes/{name}/search"): "RemoteIndex.search",
    ("POST", "/indexes/{name}/payloads"): "RemoteIndex.payloads",
    ("POST", "/indexes/{name}/reduce"): "RemoteIndex.reduce",
    ("POST", "/indexes/{name}/fit"): "RemoteIndex.fit",
    ("POST", "/indexes/{name}/calibrate"): "RemoteIndex.calibrate",
    ("POST", "/indexes/{name}/jobs"): "RemoteIndex.ingest",
    ("POST", "/indexes/{name}/sync"): "RemoteIndex.sync",
    ("GET", "/jobs/{job_id}"): "Client.job",
    ("POST", "/indexes/{name}/snapshot"): "Client.snapshot",
    ("GET", "/snapshots"): "Client.snapshots",
    ("POST", "/indexes/{name}/restore"): "Client.restore",
    ("POST", "/indexes/{name}/delete"): "RemoteIndex.delete",
    ("POST", "/indexes/{name}/payload"): "RemoteIndex.set_payload",
    ("POST", "/indexes/{name}/payload/delete"): "RemoteIndex.delete_payload_keys",
    ("POST", "/indexes/{name}/get"): "RemoteIndex.get",
    ("POST", "/indexes/{name}/scroll"): "RemoteIndex.scroll",
    ("POST", "/indexes/{name}/count"): "RemoteIndex.count",
    ("POST", "/indexes/{name}/rebuild"): "Client.rebuild",
}

#: path (and everything under it) -> why its operations are served for another client, not
#: slimvec.Client (an operation is covered by CLIENT_METHODS or here, never by neither)
OTHER_CLIENTS: dict[str, str] = {
    "/": "the Qdrant-compatible API's root: its clients are qdrant-client and langchain-qdrant",
    "/collections": "the Qdrant-compatible API: its clients are qdrant-client and langchain-qdrant",
    "/aliases": "the Qdrant-compatible API's alias listing: its client is qdrant-client",
}

_CLASSES = {"Client": Client, "RemoteIndex": RemoteIndex}


def _for_other_clients(path: str) -> bool:
    """``path`` is an :data:`OTHER_CLIENTS` path or under one ("/" itself only exactly)."""
    return any(path == p or (p != "/" and path.startswith(p + "/")) for p in OTHER_CLIENTS)


_HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def _operations(root: Path) -> set[tuple[str, str]]:
    from slimvec.service.app import create_app
    from slimvec.service.config import ServiceConfig

    schema = create_app(ServiceConfig(root=root)).openapi()
    return {(method.upper(), path) for path, item in schema["paths"].items()
            for method in item if method in _HTTP_METHODS}


def _path_pattern(path: str) -> re.Pattern[str]:
    """``/indexes/{name}/fit`` -> a regex matching ``/indexes/{self.name}/fit`` in source."""
    parts = re.split(r"\{[^}]+\}", path)
    return re.compile(r"\{[^}]+\}".join(re.escape(p) for p in parts) + r"['\"]")


def test_every_openapi_operation_has_a_client_method(tmp_path: Path) -> None:
    assert _for_other_clients("/collections/{name}/points") and _for_other_clients("/")
    assert not _for_other_clients("/indexes/{name}/search") and not _for_other_clients("/c")
    ops = {op for op in _operations(tmp_path) if not _for_other_clients(op[1])}
    missing = sorted(ops - set(CLIENT_METHODS))
    assert not missing, (f"endpoints without a slimvec.Client method: {missing}. Add the method to "
                         "slimvec/client.py and a row to CLIENT_METHODS in this test.")
    stale = sorted(set(CLIENT_METHODS) - ops)
    assert not stale, f"CLIENT_METHODS rows for endpoints the service no longer has: {stale}"


@pytest.mark.parametrize(("op", "target"), sorted(CLIENT_METHODS.items()),
                         ids=[f"{m} {p}" for m, p in sorted(CLIENT_METHODS)])
def test_the_client_method_calls_its_endpoint(op: tuple[str, str], target: str) -> None:
    cls_name, name = target.split(".")
    method = getattr(_CLASSES[cls_name], name, None)
    assert callable(method), f"{target} (for {op[0]} {op[1]}) does not exist"
    assert not name.startswith("_") and inspect.getdoc(method), f"{target}: public, with a docstring"
    source = inspect.getsource(method)
    assert f'"{op[0]}"' in source or f".{op[0].lower()}(" in source, \
        f"{target} does not send {op[0]}"
    assert _path_pattern(op[1]).search(source), f"{target} does not call {op[1]}"


def test_health_ready_and_metrics_through_the_client(server) -> None:
    """The three client methods added for the health routes, against a real server."""
    with Client(server.url) as c:
        assert c.health() == {"status": "ok"}
        ready = c.ready()
        assert ready["status"] == "ready" and ready["counts"]["ready"] == 0
        text = c.metrics()
        assert isinstance(text, str) and "# TYPE" in text
