#!/usr/bin/env bash
# Build (or refresh) the project's virtual environment in .venv with torch pinned to the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -c constraints.txt -e ".[test]"
