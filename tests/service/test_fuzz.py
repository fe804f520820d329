"""Property-based fuzzing of the OpenAPI schema (schemathesis, bounded): never a 5xx."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

from tests.service.server import Server  # noqa: E402


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz") / "root"
    root.mkdir()
    with Server(root, "--max-batch", "64") as srv:
        X = np.random.default_rng(0).standard_normal((40, 8)).astype(np.float32)
        body = {"reducer": "rp:4", "encoder": None, "sample_vectors": X.tolist()}
        assert httpx.put(f"{srv.url}/indexes/fz", json=body, timeout=60).status_code == 201
        yield srv


@pytest.fixture(scope="module")
def api_schema(fuzz_server):
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")


def test_no_server_error(api_schema, fuzz_server):
    """Every operation, a bounded number of generated cases each (the pytest plugin of
    schemathesis 4 does not run under this pytest, so the strategies are driven directly)."""
    from hypothesis import given

    checked = []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=True, database=None)
        def run(case):
            response = case.call(base_url=fuzz_server.url, timeout=30)
            assert response.status_code < 500, (case.method, case.formatted_path,
                                                response.text[:500])
            assert "Traceback" not in response.text

        run()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert len(checked) >= 12, checked
