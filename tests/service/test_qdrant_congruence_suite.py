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
    # 211 of 254 pass with float32 kept vectors as Qdrant keeps them (186 with float16, 52 with
    # named vectors only, 3 before issue 38); random filters move a run by a few tests, hence the
    # margin
    assert res["passed"] >= 205, res["top_reasons"][:5]
