#!/usr/bin/env bash
# The main job: build the environment, ingest the bundled real corpus (5,000 STS-B sentences) into
# Qdrant Edge with PCA-96, run a few searches, and print sizes and latency.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
INDEX=${INDEX:-demo-index}
rm -rf "$INDEX"
slimvec ingest slimvec/data/sentences.jsonl --index "$INDEX" --reducer pca:96 --store qdrant-edge
slimvec search --index "$INDEX" -k 5 "A man is playing a guitar." "A plane is taking off."
slimvec info --index "$INDEX"
python scripts/latency.py "$INDEX"
