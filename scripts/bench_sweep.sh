#!/usr/bin/env bash
# Reducer D-sweep of BENCHMARKS.md (issues 3 and 4): every reducer at D in $DIMS (default
# 192 128 64 32 16; BENCHMARKS.md adds a second run with DIMS="96 48") on the dev data,
# (umap at D <= 96; EmbedTextNet with the paper's gamma rule at D <= 32) searched exactly (faiss:Flat) so the
# neighbour recall measures the reducer alone, no ANN loss; cluster routing with K = 128.
# Usage: [DIMS="96 48"] bash scripts/bench_sweep.sh [OUT_DIR]   (default bench-results/sweep)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results/sweep}
D=slimvec/data
REDUCERS=()
for d in ${DIMS:-192 128 64 32 16}; do
  REDUCERS+=(--reducer "pca:$d" --reducer "whiten:$d" --reducer "svd:$d" --reducer "rp:$d"
             --reducer "truncate:$d" --reducer "algo:$d" --reducer "kpca:$d" --reducer "ae:$d"
             --reducer "embedtextnet:$d,gamma=1000,width=8,epochs=10" --reducer "mcr2:$d,clusters=128"
             --reducer "lle:$d,fit_max=4000" --reducer "npe:$d")
  # UMAP's fit grows with D (minutes at 192 here): low D only; the paper's gamma rule at low D only
  if [ "$d" -le 96 ]; then REDUCERS+=(--reducer "umap:$d"); fi
  if [ "$d" -le 32 ]; then REDUCERS+=(--reducer "embedtextnet:$d,width=8,epochs=10"); fi
done
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
exec python -m slimvec bench \
  --pairs $D/stsb-dev.tsv --pairs $D/stsb-test.tsv --pairs $D/msrp-train.tsv \
  --train-pairs $D/stsb-train.tsv --train-pairs $D/sick-train.tsv \
  "${REDUCERS[@]}" --store faiss:Flat --no-baselines --kmeans 128 \
  --latency-queries 50 --threads 1 --out "$OUT"
