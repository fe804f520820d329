#!/usr/bin/env bash
# Build the environment, then run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Two workers (one per core here): most tests wait on subprocesses, servers and disk, not the CPU.
# Each module stays on one worker (tests/conftest.py); SLIMVEC_TEST_WORKERS=0 runs in one process.
python -m pytest -q -n "${SLIMVEC_TEST_WORKERS:-2}" --dist loadgroup "$@"
