"""qdrant-client's own congruence suite against a real ``slimvec serve`` (issue 38), when a copy
of it is given: ``QDRANT_CLIENT_TESTS=/tmp/qcc`` (the qdrant-client checkout root holding
``tests/congruence_tests``; docs/benchmarks/qdrant-congruence.md says how to get it). Nothing of
the suite is kept in this repository, so without it the test is skipped."""

from __future__ import annotations

import json
import os

import pytest

SUITE = os.environ.get("QDRANT_CLIENT_TESTS")


@pytest.mark.skipif(not SUITE, reason="set QDRANT_CLIENT_TESTS to a qdrant-client checkout root")
def test_congruence_suite_does_not_regress(tmp_path):
    from tests.service.qdrant_congruence import main
    from tests.service.server import free_port

    out = tmp_path / "congruence.json"
    assert main([str(SUITE), "--port", str(free_port()), "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["collected"] >= 250, res["collected"]
    # 243 of 254 pass (the 11 others fail in local mode's client version or need gRPC; 228 before
    # issue 53's scroll order, formula, feedback, sparse MMR and vector names, 211 after issue 38,
    # 3 before it); random filters move a run by a few tests, hence the margin
    assert res["passed"] >= 238, res["top_reasons"][:5]
