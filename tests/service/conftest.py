"""Fixtures of the service tests: real servers on loopback ports, real HTTP clients."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.service.server import Server  # noqa: E402


@pytest.fixture(scope="session")
def vectors() -> np.ndarray:
    """Unit vectors of dimension 32 (a vector-only index needs no encoder: fast)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 32)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


#: small limits, so that the 413 checks need small requests
LIMITS = ("--max-batch", "500", "--max-body-bytes", "2000000")


@pytest.fixture()
def server(tmp_path):
    """A fresh server over an empty root (for tests that stop or restart it)."""
    root = tmp_path / "root"
    root.mkdir()
    with Server(root, *LIMITS) as srv:
        yield srv


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server for the contract checks that neither stop it nor need other settings (each
    test uses its own index names); a bench report under ``ROOT/.reports``."""
    root = tmp_path_factory.mktemp("shared") / "root"
    (root / ".reports" / "run1").mkdir(parents=True)
    (root / ".reports" / "run1" / "report.html").write_text("<html>bench run1</html>")
    with Server(root, *LIMITS) as srv:
        yield srv


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """One server for a module's tests over an empty root, with the default recipe
    (faiss:HNSW16,SQ4, re-ranked)."""
    root = tmp_path_factory.mktemp("qmodule") / "root"
    root.mkdir()
    with Server(root) as s:
        yield s


@pytest.fixture(scope="module")
def client(srv):
    """The real qdrant-client over REST against :func:`srv`."""
    qdrant_client = pytest.importorskip("qdrant_client")
    c = qdrant_client.QdrantClient(url=srv.url, timeout=60, prefer_grpc=False)
    yield c
    c.close()
