#!/usr/bin/env bash
# Issue 8 through the harness: MiniLM against its SparseCSE-pruned copy (30 % of heads and FFN
# neurons, no rewinding: the setting that met the goal in docs/benchmarks/pruning.md), both as
# `slimvec bench --encoder`, full dimension and PCA-96, on STS-B dev + test.
# Usage: bash scripts/bench_pruned_encoders.sh [OUT_DIR]   (default bench-results/pruned-encoders)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results/pruned-encoders}
PRUNED=${PRUNED:-/tmp/minilm-p30}
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
[ -f "$PRUNED/slimvec_pruned.json" ] || slimvec prune --encoder minilm --corpus slimvec/data/stsb-train.tsv \
  --sparsity 0.3 --rewind-steps 0 --score-sentences 512 --threads 1 --out "$PRUNED"
exec python -m slimvec bench --pairs slimvec/data/stsb-dev.tsv --pairs slimvec/data/stsb-test.tsv \
  --encoder minilm --encoder "$PRUNED" --reducer pca:96 --store hnsw --no-baselines \
  --threads 1 --out "$OUT"
