"""Run langchain-qdrant's and qdrant-haystack's own integration tests against a real ``slimvec
serve`` and against qdrant-client's local mode (issue 53): a runner and its pytest plugin, kept
beside the tests; not a test module itself.

Each suite is the ``tests`` tree of the installed version's sdist, unedited, fetched once with
``pip download --no-deps --no-binary :all: NAME==VERSION`` into a cache folder (with
pytest-asyncio, which their async tests import, installed there with ``pip install --target``:
the project's own environment does not carry it)::

    python tests/service/framework_suites.py [--suite langchain-qdrant] [--json out.json]

Both suites build their clients with ``location=":memory:"``. Each suite runs twice with this
module loaded as a pytest plugin: once unredirected (qdrant-client's local mode) and once with
``$SLIMVEC_FRAMEWORK_URL`` set, where the plugin points every ``:memory:`` client (sync and async)
at that ``slimvec serve`` over REST and empties the server before each test (an in-memory client
starts empty; the server outlives the test). LangChain's locations are pinned to ``:memory:``
(its fixtures add ``localhost:6333`` when a Qdrant answers there, or ``$QDRANT_URL``), so one test
id names one test in both runs; its tests that need a server (``use_in_memory=False``: a
collection reopened by a second client) get ``:memory:`` too against slimvec, and no location
(skipped, as upstream without a server) in local mode. The report lists each test passing in
local mode but not against slimvec, with the first line of its failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any

log = logging.getLogger("framework_suites")
_URL_ENV = "SLIMVEC_FRAMEWORK_URL"
#: the async tests' plugin (its version on the machines' wheel store; the suites pin none)
ASYNCIO = "pytest-asyncio==1.4.0"
#: pytest-asyncio's default loop scope, named so it does not warn at each start
_LOOP = ["-o", "asyncio_default_fixture_loop_scope=function"]
#: suite -> (its tests inside the sdist, pytest arguments): LangChain's ``QdrantVectorStore``
#: integration tests, Haystack's tests marked ``integration``. ``-o addopts=`` drops their own
#: options (LangChain's need syrupy, a snapshot plugin none of these tests use).
SUITES: dict[str, tuple[list[str], list[str]]] = {
    "langchain-qdrant": (["tests/integration_tests/qdrant_vector_store"], ["-o", "addopts=", *_LOOP]),
    "qdrant-haystack": (["tests"], ["-o", "addopts=", *_LOOP, "-m", "integration"]),
}


class SuiteUnavailable(RuntimeError):
    """The sdist or the plugin could not be fetched (no package index)."""


# ---------------------------------------------------------------------- the pytest plugin
def pytest_configure(config: Any) -> None:
    """Keep LangChain's locations to ``:memory:``; redirect ``:memory:`` to the server if set."""
    url = os.environ.get(_URL_ENV)
    try:
        from tests.integration_tests import fixtures  # LangChain's, when it is the suite
    except ImportError:
        fixtures = None
    if fixtures is not None:
        def qdrant_locations(use_in_memory: bool = True) -> list[str]:
            return [":memory:"] if use_in_memory or url else []

        fixtures.qdrant_locations = qdrant_locations
    if url:
        import qdrant_client

        for cls in (qdrant_client.QdrantClient, qdrant_client.AsyncQdrantClient):
            _redirect(cls, url)


def pytest_runtest_setup(item: Any) -> None:
    """Empty the server before each test, as a fresh in-memory client is."""
    url = os.environ.get(_URL_ENV)
    if url:
        with urllib.request.urlopen(f"{url}/collections", timeout=30) as resp:
            names = [c["name"] for c in json.load(resp)["result"]["collections"]]
        for name in names:
            req = urllib.request.Request(f"{url}/collections/{name}", method="DELETE")
            urllib.request.urlopen(req, timeout=60).close()


def _redirect(cls: Any, url: str) -> None:
    init = cls.__init__

    def __init__(self: Any, location: Any = None, *args: Any, **kwargs: Any) -> None:
        if location == ":memory:":
            location = url
            kwargs.update(prefer_grpc=False, port=None, host=None, https=None, prefix=None)
            kwargs.pop("path", None)
        init(self, location, *args, **kwargs)

    cls.__init__ = __init__


# ---------------------------------------------------------------------- the runner
def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check",
                           *args], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode:
        raise SuiteUnavailable(f"pip {' '.join(args)} failed: {done.stderr.strip()[-400:]}")


def fetch(suite: str, cache: Path) -> tuple[Path, Path]:
    """The unpacked sdist of the installed ``suite`` and the plugin folder, fetched once."""
    try:
        version = metadata.version(suite)
    except metadata.PackageNotFoundError as exc:
        raise SuiteUnavailable(f"{suite} is not installed (the test extra brings it)") from exc
    root = cache / f"{suite}-{version}"
    plugins = cache / ASYNCIO.replace("==", "-")
    if not plugins.is_dir():
        _pip("install", "--no-deps", "--target", str(plugins), ASYNCIO)
    if not root.is_dir():
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            _pip("download", "--no-deps", "--no-binary", ":all:", "-d", tmp, f"{suite}=={version}")
            (tarball,) = Path(tmp).glob("*.tar.gz")
            with tarfile.open(tarball) as tar:
                tar.extractall(tmp, filter="data")
            (unpacked,) = (p for p in Path(tmp).iterdir() if p.is_dir())
            unpacked.rename(root)
    return root, plugins


def run(suite: str, cache: Path, port: int = 0) -> dict[str, Any]:
    """Run one suite in local mode and against a fresh ``slimvec serve``; both summaries and the
    tests passing in local mode that fail against slimvec (``gaps``: test -> reason)."""
    # only here: the suites' pytest loads this module as a plugin beside their own ``tests``
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.service.qdrant_congruence import run_pytest
    from tests.service.server import Server

    cache.mkdir(parents=True, exist_ok=True)
    root, plugins = fetch(suite, cache)
    paths, args = SUITES[suite]
    env = {"PYTHONPATH": str(plugins)}
    local = run_pytest(root, "framework_suites", paths, env, args, timeout=900)
    with tempfile.TemporaryDirectory(prefix="frameworks-") as tmp:
        (Path(tmp) / "root").mkdir()
        with Server(Path(tmp) / "root", port=port, ready_timeout=120) as server:
            served = run_pytest(root, "framework_suites", paths, {**env, _URL_ENV: server.url},
                                args, timeout=900)
    gaps = {name: served["reasons"].get(name, served["outcomes"].get(name, "not run"))
            for name, outcome in local["outcomes"].items()
            if outcome == "passed" and served["outcomes"].get(name) != "passed"}
    return {"suite": suite, "version": metadata.version(suite), "slimvec": served,
            "local": local, "gaps": gaps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=sorted(SUITES), action="append",
                    help="one suite (repeatable; default: both)")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "SLIMVEC_TEST_CACHE", Path.home() / ".cache" / "slimvec-tests")) / "framework-suites")
    ap.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    results = [run(name, args.cache, args.port) for name in args.suite or sorted(SUITES)]
    for res in results:
        s, loc = res["slimvec"], res["local"]
        log.info("%s %s: against slimvec %d / local mode %d / collected %d (%.0f s + %.0f s)",
                 res["suite"], res["version"], s["passed"], loc["passed"], loc["collected"],
                 s["seconds"], loc["seconds"])
        for name, reason in sorted(res["gaps"].items()):
            log.info("  passes in local mode only: %s  -- %s", name, reason)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
