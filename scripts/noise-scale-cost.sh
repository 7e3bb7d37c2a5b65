#!/usr/bin/env bash
# What --noise-scale costs, side by side: `train` on cpu:2 with and without it, alternating in
# one invocation (the order flips every round). Prints per run: the model, off/on, the median
# step, all-reduce and exposed all-reduce times (ms) of replica 0 over the measured steps.
# Usage: scripts/noise-scale-cost.sh MODEL BATCH STEPS ROUNDS   (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/scalescope
model=$1; batch=$2; steps=$3; rounds=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
  for f in $order; do
    flag=""; [ $f = on ] && flag="--noise-scale"
    $B train --model $model --devices cpu:2 --batch $batch --steps $steps --no-eval -q $flag -o $out/$f.json >/dev/null
    python3 -c "
import json,statistics as st
r=json.load(open('$out/$f.json'));s=r['steps'][r['summary']['warmup_steps']:]
print('$model', '$f', r['summary']['step_ms_median'], st.median([x['replicas'][0]['allreduce_ms'] for x in s]), st.median([x['replicas'][0]['allreduce_exposed_ms'] for x in s]))"
  done
done
