#!/usr/bin/env bash
# Build the environment, then run the tests.
#   bash scripts/test.sh          the fast tier (under ten minutes on two cores)
#   bash scripts/test.sh --slow   the slow tier: end-to-end commands, servers with MiniLM, Ray,
#                                 Chromium, kill trials (tests/conftest.py SLOW_MODULES)
#   bash scripts/test.sh --all    both tiers in one run
# CI (.ci/run) runs the fast tier, then the slow one. Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-m "not slow")
case "${1:-}" in
  --slow) tier=(-m slow); shift ;;
  --all) tier=(); shift ;;
esac
[ "${SLIMVEC_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Lint and type-check first (pyproject.toml [tool.ruff] / [tool.mypy]): a finding fails the run,
# in every tier, before any test starts (about 15 s together with a warm cache)
python -m ruff check .
python -m mypy
# Two workers (one per core here): most tests wait on subprocesses, servers and disk, not the CPU.
# Each module stays on one worker (tests/conftest.py); SLIMVEC_TEST_WORKERS=0 runs in one process.
python -m pytest -q -n "${SLIMVEC_TEST_WORKERS:-2}" --dist loadgroup "${tier[@]}" "$@"
