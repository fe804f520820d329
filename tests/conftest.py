"""Shared fixtures: real MiniLM vectors of real sentences from the bundled pair data."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"


README = Path(__file__).resolve().parents[1] / "README.md"


def readme_section(heading: str) -> str:
    """The README's ``## heading`` section, up to the next ``## `` heading."""
    text = README.read_text("utf-8")
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def readme_commands(heading: str) -> list[str]:
    """The commands of the first bash block of a README section, in order: comment lines skipped,
    continuation lines joined (a comment after a command is left to bash). The quick-start tests
    run them as written."""
    block = re.search(r"```bash\n(.*?)```", readme_section(heading), re.S).group(1)
    commands, cur = [], ""
    for line in block.splitlines():
        if not cur and line.lstrip().startswith("#"):
            continue
        cur += line.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        if cur.strip():
            commands.append(cur.strip())
        cur = ""
    return commands


def bundled_sentences(n: int = 3000) -> list[str]:
    """Unique sentences from the bundled STS-B train pairs, in file order."""
    seen: dict[str, None] = {}
    with open(DATA / "stsb-train.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            s1, s2, _ = line.rstrip("\n").split("\t")
            seen.setdefault(s1)
            seen.setdefault(s2)
            if len(seen) >= n:
                break
    return list(seen)[:n]


@pytest.fixture(scope="session")
def encoder():
    """The packaged all-MiniLM-L6-v2 encoder, loaded once."""
    from slimvec.encoder import Encoder

    return Encoder()


@pytest.fixture(scope="session")
def sentences() -> list[str]:
    return bundled_sentences(3000)


@pytest.fixture(scope="session")
def minilm_vectors(encoder, sentences, tmp_path_factory) -> np.ndarray:
    """(3000, 384) float32 MiniLM vectors; cached on disk between runs of the suite (the bench
    harness's encoding cache, keyed by the encoder's fingerprint and each text)."""
    from slimvec.benchmarks.encoding_cache import EncodingCache

    cache = Path(os.environ.get("SLIMVEC_TEST_CACHE", Path.home() / ".cache" / "slimvec-tests"))
    return EncodingCache(cache / "encodings", encoder.fingerprint).encode(encoder, sentences)


#: the slow tier (``bash scripts/test.sh --slow``; CI runs both tiers): end-to-end runs of whole
#: commands, servers loading MiniLM, Ray, Chromium and the kill trials, each several seconds to
#: minutes. The fast tier (``bash scripts/test.sh``) stays under ten minutes on two cores.
SLOW_MODULES = (
    "tests/engines/",
    "tests/benchmarks/test_bench.py", "tests/benchmarks/test_plan_cli.py",
    "tests/benchmarks/test_ranking.py", "tests/benchmarks/test_suite.py",
    "tests/benchmarks/test_tune.py", "tests/benchmarks/test_report_html.py",
    "tests/benchmarks/test_latency.py", "tests/benchmarks/test_capacity_cli.py",
    "tests/reliability/test_kill_resume.py", "tests/reliability/test_kill_migrate.py",
    "tests/reliability/test_kill_delete.py", "tests/reliability/test_kill_compact.py",
    "tests/reliability/test_sigint.py", "tests/reliability/test_full_disk.py",
    "tests/reliability/test_concurrency.py", "tests/reliability/test_unstorable_rows.py",
    "tests/service/test_quickstart.py", "tests/service/test_text.py",
    "tests/service/test_crash.py", "tests/service/test_http_surface.py",
    "tests/ux/test_readme_usage.py", "tests/ux/test_noise.py",
    "tests/cli/test_cli.py", "tests/reducers/test_learned.py",
    "tests/migrate/test_drop_in.py", "tests/migrate/test_qdrant_server_guide.py",
    "tests/reliability/test_snapshot_kill.py", "tests/service/test_snapshot.py",
    "tests/indexer/test_sync.py", "tests/reliability/test_kill_sync.py",
    "tests/service/test_qdrant_api.py", "tests/service/test_qdrant_compat.py",
    "tests/service/test_langchain_qdrant.py", "tests/service/test_points.py",
    "tests/indexer/test_rebuild.py", "tests/reliability/test_kill_rebuild.py",  # issue 25 item 5
    "tests/service/test_rebuild.py",
    "tests/service/test_degraded.py",  # issue 25 item 7: two servers, a backoff wait
    "tests/benchmarks/test_filtered_bench.py",  # a whole run_bench: 2 recipes built by migrate
    "tests/benchmarks/test_bench_kinds_slow.py",  # issue 24 item 3: MiniLM, whole commands, servers
    "tests/service/test_job_reads.py",  # issue 25 item 7: MiniLM servers, a kill -9 restart
    "tests/service/test_filter_fuzz.py",  # issue 39: ~180 generated filters through a server, ~40 s
    "tests/indexer/test_default_lifecycle.py",  # issue 40 items 1/4/7: MiniLM, CLI, a server
    "tests/service/test_small_collections.py",  # issue 40 item 3 / 39 F4: servers, kill -9 restarts
    "tests/service/test_corrupt_restore.py",  # issue 39 F3: ~40 corrupted restores, a child each
    "tests/reliability/test_kill_payload_index.py",  # issue 37: writer processes killed, 3 stores
    "tests/reliability/test_kill_graph_round.py",  # writers killed mid-round and mid-chunk write
    "tests/service/test_qdrant_dropin.py",  # issue 38: a server, fitted Dot/Euclid collections
    "tests/service/test_qdrant_haystack.py",  # issue 38: Haystack's store, MiniLM, a server
    "tests/service/test_llamaindex_qdrant.py",  # issue 38: LlamaIndex's store, MiniLM, a server
    "tests/service/test_framework_suites.py",  # issue 53: 2 suites x 2 modes, 3 min 43 s loaded
    "tests/service/test_qdrant_congruence_suite.py",  # issue 38: qdrant-client's suite, ~10 min
    "tests/service/test_index_congruence.py",  # issue 35 item 1: 3 servers, local vs remote, ~30 s
    "tests/service/test_qdrant_sparse.py",  # issue 38: sparse vectors, servers restarted, ~100 s
    "tests/reliability/test_kill_qdrant_points.py",  # issue 48 F3: 40 kill -9 trials of a server
    "tests/service/test_qdrant_whole.py",  # issue 48 F1/F2/F4: a server, snapshots, restores
    "tests/service/test_qdrant_dropin_full.py",  # issue 53: a server, fitted collections, LangChain
    "tests/service/test_qdrant_budget.py",  # issue 48 F5: 20,000 points, a fuzz, a restart, ~110 s
    "tests/service/test_qdrant_aliases.py",  # issue 53: aliases, search matrix; 3 servers, ~20 s
)


def pytest_collection_modifyitems(config, items) -> None:
    """Mark the slow tier (:data:`SLOW_MODULES`). Under pytest-xdist (``scripts/test.sh`` runs
    ``-n 2 --dist loadgroup``), keep each module on one worker so its module-scoped fixtures (a
    built index, a started server) are made once, and every engine test on the same worker so the
    session's one Ray runtime is started once."""
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)
        if xdist:
            group = "engines" if module.startswith("tests/engines/") else module
            item.add_marker(pytest.mark.xdist_group(group))
