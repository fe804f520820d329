#!/bin/bash
# Per-query Python around FAISS's native calls (search-profile --python) of two commits, alternated
# run by run on one index, so a loaded machine slows both alike (issue 51).
#
#   bash benchmarks/search_python_ab.sh BEFORE_REV [ROUNDS] [N] [WORK]
#
# BEFORE_REV's package is exported beside this checkout and measured with this checkout's
# benchmarks/kinds/search_profile.py (the same measurement on both sides); the index is built once
# in WORK from the first N rows of bench-data/realtext-minilm-100k.npy (or $DATA).
set -euo pipefail
before=${1:?BEFORE_REV}; rounds=${2:-3}; n=${3:-20000}; work=${4:-/tmp/search-python-ab}
after=$(git rev-parse --show-toplevel); py=${PYTHON:-$after/.venv/bin/python}
data=$(realpath "${DATA:-$after/bench-data/realtext-minilm-100k.npy}"); queries=$(realpath "${QUERIES:-$after/bench-data/realtext-minilm-queries.npy}")
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1
mkdir -p "$work/before-tree" && git -C "$after" archive "$before" | tar -x -C "$work/before-tree"
cp "$after/benchmarks/kinds/search_profile.py" "$work/before-tree/benchmarks/kinds/"
for round in $(seq "$rounds"); do
  for side in before after; do
    tree=$after; [ "$side" = before ] && tree=$work/before-tree
    log=$work/$side-$round.log
    (cd "$tree" && PYTHONPATH=$tree "$py" -m benchmarks search-profile --python --data "$data" --queries "$queries" \
      --n "$n" --work "$work" > "$log" 2>&1) || { tail -5 "$log"; exit 1; }
    grep "Python around" "$log" | sed "s/^/round $round $side: /"
    echo "  load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
