#!/usr/bin/env bash
# The main job: build the environment, ingest the bundled real corpus (5,000 STS-B sentences) with
# the default recipe (no reducer: the 384-d vectors as 4-bit scalar codes in a FAISS HNSW16
# graph, float16 full vectors on disk to re-rank from, rescoring depth calibrated at build time;
# `slimvec info` prints it), run a few searches, and print what was saved and the end-to-end
# search latency.
set -euo pipefail
cd "$(dirname "$0")/.."
# setup's pip / setuptools chatter goes to a log; it is shown only when setup fails
SETUP_LOG=${SETUP_LOG:-.demo-setup.log}
if ! bash scripts/setup.sh >"$SETUP_LOG" 2>&1; then
  cat "$SETUP_LOG" >&2
  echo "setup failed (log above, also in $SETUP_LOG)" >&2
  exit 1
fi
echo "environment ready (setup log: $SETUP_LOG)"
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
INDEX=${INDEX:-demo-index}
rm -rf "$INDEX"
slimvec ingest slimvec/data/sentences.jsonl --index "$INDEX"     # the default recipe
slimvec search --index "$INDEX" -k 5 "A man is playing a guitar." "A plane is taking off."
slimvec info --index "$INDEX"
slimvec bench --index "$INDEX"           # Index.search latency, from text and from vectors
