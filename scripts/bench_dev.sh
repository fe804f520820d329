#!/usr/bin/env bash
# The full development-data benchmark of BENCHMARKS.md: every reducer at dims/4 (96) and dims/8 (48)
# on MiniLM, three stores plus FAISS HNSW+SQ8 (reduce -> quantize), rescoring x4/x8, peer
# quantization baselines, cluster routing with K = 128. Evaluation corpus: STS-B dev + test and
# MSRP train; pair-learning reducers (mcr2) train on STS-B train + SICK train pairs only.
# Usage: bash scripts/bench_dev.sh [OUT_DIR]   (default bench-results/dev)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results/dev}
D=slimvec/data
REDUCERS=()
for d in 96 48; do
  REDUCERS+=(--reducer "pca:$d" --reducer "whiten:$d" --reducer "svd:$d" --reducer "rp:$d"
             --reducer "truncate:$d" --reducer "algo:$d" --reducer "kpca:$d" --reducer "ae:$d"
             --reducer "umap:$d" --reducer "embedtextnet:$d,gamma=1000,width=8,epochs=10"
             --reducer "mcr2:$d,clusters=128" --reducer "lle:$d,fit_max=4000" --reducer "npe:$d")
done
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
exec python -m slimvec bench \
  --pairs $D/stsb-dev.tsv --pairs $D/stsb-test.tsv --pairs $D/msrp-train.tsv \
  --train-pairs $D/stsb-train.tsv --train-pairs $D/sick-train.tsv \
  "${REDUCERS[@]}" \
  --store hnsw --store faiss --store qdrant-edge --store "faiss:HNSW32,SQ8" \
  --rescore 4 --rescore 8 --kmeans 128 --threads 1 --out "$OUT"
