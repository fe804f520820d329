#!/usr/bin/env bash
# Build (or refresh) the project's virtual environment in .venv with torch pinned to the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# the browser tests (tests/benchmarks/test_report_html.py) drive Debian's chromium: browser
# downloads are not available, so Playwright is pointed at /usr/bin/chromium
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
# wordnet-base and dict-gcide (the real-text benchmark corpus, scripts/make_real_corpus.py) are
# NOT installed here: that script installs them itself, and tests/benchmarks/test_realtext.py
# skips without them
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
# -q and no version check: errors still print (pip shows a failed build's whole output)
python -m pip install -q --disable-pip-version-check --upgrade pip
python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"
