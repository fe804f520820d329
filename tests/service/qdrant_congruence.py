"""Run qdrant-client's own congruence suite against a real ``slimvec serve`` (issue 38): a runner
and its pytest plugin, kept beside the tests (scripts/ holds no measuring scripts); not a test
module itself.

The suite (``tests/congruence_tests`` of the qdrant-client repository, at the tag of the installed
client) compares a Qdrant server on ``localhost:6333`` with qdrant-client's local mode. It is taken
unedited from a folder given on the command line (the checkout root, the folder holding
``tests/``); nothing of it is copied into this repository::

    git -C qdrant-client archive v1.18.0 tests | tar -x -C /tmp/qcc
    python tests/service/qdrant_congruence.py /tmp/qcc [--port 6333] [-k EXPR] [--json out.json]

The script starts ``slimvec serve`` on a fresh root at ``--port`` and runs pytest on the suite with
this module loaded as a plugin, which only (1) forces REST (``prefer_grpc=False``: slimvec serves
no gRPC) and (2) points the suite's ``localhost:6333`` at ``--port`` when another port is chosen.
It prints passed / failed / collected and the commonest first failure lines.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("qdrant_congruence")
_PORT_ENV = "SLIMVEC_CONGRUENCE_PORT"


# ---------------------------------------------------------------------- the pytest plugin
def pytest_configure(config: Any) -> None:
    """Force REST and redirect the suite's port 6333 (the only changes made to the suite)."""
    import qdrant_client

    port = int(os.environ.get(_PORT_ENV, "6333"))
    for cls in (qdrant_client.QdrantClient, qdrant_client.AsyncQdrantClient):
        _patch(cls, port)


def _patch(cls: Any, port: int) -> None:
    init = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("location") != ":memory:" and kwargs.get("path") is None:
            kwargs["prefer_grpc"] = False
            if kwargs.get("port", 6333) == 6333:
                kwargs["port"] = port
        init(self, *args, **kwargs)

    cls.__init__ = __init__


# ---------------------------------------------------------------------- the runner
def _summary(junit: Path) -> dict[str, Any]:
    """Counts and the commonest first failure lines from pytest's JUnit XML."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    reasons: collections.Counter[str] = collections.Counter()
    failed: list[str] = []
    outcomes: dict[str, str] = {}
    why: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if case.find("skipped") is not None:
            outcomes[name] = "skipped"
        elif bad is not None:
            outcomes[name] = "failed" if bad.tag == "failure" else "error"
            failed.append(name)
            why[name] = _reason(bad.get("message") or "", bad.text or "")
            reasons[why[name]] += 1
        else:
            outcomes[name] = "passed"
        counts[outcomes[name]] += 1
    counts["collected"] = sum(counts.values())
    return {**counts, "top_reasons": reasons.most_common(25), "failed_tests": failed,
            "outcomes": outcomes, "reasons": why}


def run_pytest(suite: Path, plugin: str, paths: list[str], env: dict[str, str],
               args: Sequence[str] = (), timeout: float | None = None) -> dict[str, Any]:
    """Run pytest on ``paths`` of an unedited suite (``suite`` its root and working folder) in a
    subprocess, this folder's module ``plugin`` loaded beside it; the JUnit summary."""
    with tempfile.TemporaryDirectory(prefix="suite-run-") as tmp:
        junit = Path(tmp) / "junit.xml"
        path = os.pathsep.join([str(suite), str(Path(__file__).parent), env.get("PYTHONPATH", "")])
        cmd = [sys.executable, "-m", "pytest", "-p", plugin, "-p", "no:cacheprovider",
               "--continue-on-collection-errors", "-q", "--tb=line", "-rN",
               f"--junitxml={junit}", *args, *paths]
        t0 = time.monotonic()
        subprocess.run(cmd, cwd=suite, env={**os.environ, **env, "PYTHONPATH": path},
                       stdout=subprocess.DEVNULL, check=False, timeout=timeout)
        elapsed = time.monotonic() - t0
        if not junit.exists():
            raise RuntimeError(f"pytest wrote no report for {suite}: {' '.join(cmd)}")
        return {**_summary(junit), "seconds": round(elapsed, 1)}


def _reason(message: str, text: str) -> str:
    """The server's error message when the failure carries one, else the first line."""
    found = re.search(r'"error":"([^"]{0,150})', message + text)
    return found.group(1) if found else (message.splitlines() or ["?"])[0][:150]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", nargs="?", default=os.environ.get("QDRANT_CLIENT_TESTS"),
                    help="qdrant-client checkout root holding tests/congruence_tests "
                         "(or $QDRANT_CLIENT_TESTS)")
    ap.add_argument("--port", type=int, default=6333)
    ap.add_argument("--recipe", default=None, help="slimvec serve --recipe (default: the default)")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("--tests", default="tests/congruence_tests", help="path inside the suite root")
    ap.add_argument("--json", type=Path, default=None, help="write the summary here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.suite or not (Path(args.suite) / args.tests).is_dir():
        ap.error(f"no {args.tests} under {args.suite!r}; give the qdrant-client checkout root")
    suite = Path(args.suite).resolve()
    # only here, not at import: the suite's pytest loads this module as a plugin beside its own
    # ``tests`` package, where this repository's is not importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.service.server import Server
    with tempfile.TemporaryDirectory(prefix="congruence-") as tmp:
        (Path(tmp) / "root").mkdir()
        recipe = ["--recipe", args.recipe] if args.recipe else []
        with Server(Path(tmp) / "root", *recipe, port=args.port, ready_timeout=120):
            result = run_pytest(suite, "qdrant_congruence", [args.tests],
                                {_PORT_ENV: str(args.port)}, ["-k", args.k] if args.k else [])
    result.update(suite=str(suite))
    elapsed = result["seconds"]
    for reason, n in result["top_reasons"]:
        log.info("%4d  %s", n, reason)
    log.info("passed %d / collected %d (failed %d, errors %d, skipped %d) in %.0f s",
             result["passed"], result["collected"], result["failed"], result["error"],
             result["skipped"], elapsed)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
