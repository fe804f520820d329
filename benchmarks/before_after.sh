#!/bin/bash
# Ingest throughput and single-query search latency of two commits, alternated in one run
# (issue 35: "unchanged within noise, same run, before and after").
#
#   bash benchmarks/before_after.sh BEFORE_REV CORPUS.jsonl [ROUNDS] [OUT]
#
# BEFORE_REV is checked out in a detached worktree beside this checkout (the "after"). Each round
# ingests CORPUS with the default recipe into a fresh index with each code (`slimvec ingest`,
# its summary's docs/s), then times 200 single queries (`slimvec bench --index`, one thread) of
# one index built once by the "after" code with each code. Prints one line per measurement and
# writes the logs under OUT (default /tmp/before-after).
set -euo pipefail
before=${1:?BEFORE_REV}; corpus=$(realpath "${2:?CORPUS.jsonl}"); rounds=${3:-3}; out=${4:-/tmp/before-after}
after=$(git rev-parse --show-toplevel); py=${PYTHON:-$after/.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
rm -rf "$out"; mkdir -p "$out"
git -C "$after" worktree add -q --detach "$out/before-tree" "$before"
trap 'git -C "$after" worktree remove --force "$out/before-tree"' EXIT
(cd "$after" && PYTHONPATH=$after "$py" -m slimvec ingest "$corpus" --index "$out/shared" > "$out/shared.log" 2>&1)
for round in $(seq "$rounds"); do
  for side in before after; do
    tree=$after; [ "$side" = before ] && tree=$out/before-tree
    cd "$tree"
    PYTHONPATH=$tree "$py" -m slimvec ingest "$corpus" --index "$out/$side-$round" > "$out/$side-$round.log" 2>&1
    rate=$(grep -o '[0-9,]* docs/s\.' "$out/$side-$round.log" | tail -1)
    OMP_NUM_THREADS=1 PYTHONPATH=$tree "$py" -m slimvec bench --index "$out/shared" > "$out/$side-search-$round.log" 2>&1
    p50=$(grep -o 're-rank): *p50 [0-9.]* ms' "$out/$side-search-$round.log" | sed 's/.*p50 //' | tr '\n' ' ')
    echo "round $round $side: ingest $rate search p50 from text, from vectors: $p50"
  done
done
