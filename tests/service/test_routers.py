"""The service in routers (issue 24 item 4): every native JSON operation answers with a typed
response model (a named schema in the OpenAPI document, not an anonymous ``object``), the index
state is one enum whose JSON keeps the strings clients know, and the routes live in APIRouter
modules with ``create_app`` only assembling them. In process, no server."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("fastapi")

from slimvec.service.config import ServiceConfig  # noqa: E402

#: the operations whose 2xx answer is not a JSON object (Prometheus text)
_NOT_JSON = {("GET", "/metrics")}


def _schema(tmp_path) -> dict:
    from slimvec.service.app import create_app

    return create_app(ServiceConfig(root=tmp_path)).openapi()


def _native(schema: dict):
    for path, item in schema["paths"].items():
        if path in ("/", "/aliases") or path.startswith("/collections"):
            continue  # the Qdrant-compatible API answers in Qdrant's own envelope
        for method, op in item.items():
            yield method.upper(), path, op


def test_every_native_json_operation_has_a_typed_response_model(tmp_path):
    """An anonymous ``{"type": "object", "additionalProperties": true}`` (a handler annotated
    ``dict[str, Any]``) or an empty schema (a bare ``JSONResponse``) tells a client nothing."""
    schema = _schema(tmp_path)
    untyped = []
    for method, path, op in _native(schema):
        if (method, path) in _NOT_JSON:
            continue
        ok = [code for code in op["responses"] if code.startswith("2")]
        assert ok, (method, path)
        body = op["responses"][ok[0]].get("content", {}).get("application/json", {})
        ref = body.get("schema", {}).get("$ref", "")
        if not ref.startswith("#/components/schemas/"):
            untyped.append(f"{method} {path}")
    assert not untyped, f"operations without a response model: {untyped}"


def test_operation_ids_are_unique_and_kept(tmp_path):
    """Moving a route into a router keeps its operationId (generated from the handler's name,
    path and method), so generated clients keep their method names."""
    schema = _schema(tmp_path)
    ids = {(m, p): op["operationId"] for m, p, op in _native(schema)}
    assert len(set(ids.values())) == len(ids)
    assert ids[("PUT", "/indexes/{name}")] == "create_index_indexes__name__put"
    assert ids[("POST", "/indexes/{name}/search")] == "search_indexes__name__search_post"
    assert ids[("GET", "/jobs/{job_id}")] == "job_jobs__job_id__get"
    assert ids[("GET", "/healthz")] == "healthz_healthz_get"


def test_index_state_is_a_str_enum_with_the_known_strings():
    from slimvec.service.indexes.registry import IndexState

    assert [s.value for s in IndexState] == ["ready", "pending", "busy", "closed", "degraded",
                                             "failed"]
    assert IndexState("pending") is IndexState.PENDING
    assert IndexState.READY == "ready" and f"{IndexState.BUSY}" == "busy"
    assert json.dumps({"state": IndexState.DEGRADED}) == '{"state": "degraded"}'


def test_served_index_states_are_enum_members_and_json_keeps_the_strings(tmp_path):
    """A pending index and a ready one, through the registry (a real FAISS-free store, vectors
    only): ``state`` and ``health()`` are members, ``info()`` serialises as before."""
    from slimvec.service.indexes.registry import Encoders, IndexState, Registry, ServiceSpec

    X = np.random.default_rng(1).standard_normal((40, 8)).astype(np.float32)
    reg = Registry(tmp_path, Encoders(1.0, 8))
    try:
        spec = ServiceSpec.from_request(recipe=None, reducer="rp:4", store=None, keep_full=None,
                                        encoder=None, fit_after=100, default_recipe=None)
        pending, new = reg.create("p", spec)
        assert new and pending.state is IndexState.PENDING
        assert json.loads(json.dumps(pending.info()))["state"] == "pending"
        ready, _ = reg.create("r", spec, sample=X)
        assert ready.state is IndexState.READY and ready.health() is IndexState.READY
        assert json.loads(json.dumps(ready.info()))["state"] == "ready"
    finally:
        reg.close_all()
    assert pending.state is IndexState.CLOSED


def test_create_app_is_assembly_only():
    """The routes are APIRouter modules: create_app holds no route of its own."""
    import ast
    import inspect

    from slimvec.service import app

    tree = ast.parse(inspect.getsource(app.create_app))
    decorated = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                   ast.AsyncFunctionDef))
                 and any("app." in ast.unparse(d) and ast.unparse(d).split("(")[0].split(".")[-1]
                         in {"get", "put", "post", "delete"} for d in n.decorator_list)]
    assert decorated == [], f"routes still defined inside create_app: {decorated}"


def test_documents_are_checked_by_the_ingest_readers_text_check(tmp_path):
    """The registry's own text check ("missing or empty text", NUL bytes let through) is gone:
    a request's documents get the reasons ``slimvec ingest`` gives the same rows."""
    from slimvec.service.indexes.registry import Encoders, Registry, ServiceSpec
    from slimvec.sources.readers import text_problem

    texts = ["a good sentence", "nul\x00byte", "   ", 5, None]
    reg = Registry(tmp_path, Encoders(1.0, 8))
    try:
        spec = ServiceSpec.from_request(recipe=None, reducer="rp:4", store="faiss:Flat",
                                        keep_full=None, encoder="minilm", fit_after=100,
                                        default_recipe=None)
        served, _ = reg.create("t", spec)
        result, _ = served.add_documents([{"id": i, "text": t} for i, t in enumerate(texts)], "r")
    finally:
        reg.close_all()
    assert result.accepted == 1
    assert [(r["row"], r["field"], r["reason"]) for r in result.rejected] == [
        (i, "text", text_problem(t)) for i, t in enumerate(texts) if i]
