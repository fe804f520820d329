"""A real local Ray runtime (2 CPUs, advertised as 127.0.0.1, no dashboard) shared by the engine tests.

One runtime per session: every ``ray_ingest`` call (and the driver-kill test's subprocess, via
``--ray-address``) joins it instead of starting its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import bundled_sentences


@pytest.fixture(scope="session")
def ray_runtime():
    """Start Ray once for the session; skipped when the ``ray`` extra is not installed."""
    pytest.importorskip("ray.data")
    import ray

    from slimvec.engines.runtime import start_ray

    started = start_ray(None, 2)
    yield ray
    if started:
        ray.shutdown()


def write_jsonl(path: Path, rows: list[object]) -> Path:
    """Rows as JSONL lines; a str row is written verbatim (to make malformed lines)."""
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


@pytest.fixture(scope="session")
def docs_200() -> list[dict[str, object]]:
    """A small corpus: the engine tests check correctness, not throughput."""
    return [{"id": f"d{i}", "text": s} for i, s in enumerate(bundled_sentences(200))]
