#!/usr/bin/env bash
# The cost of scalescope's NVTX instrumentation: training step time of build/scalescope
# (NVTX ranges compiled in) vs build-nvtx-off/scalescope (-DSCALESCOPE_NVTX=OFF: ranges
# compiled out to empty inline code), measured in the same invocation, the two binaries
# alternating run by run (the order flipping every round) so that drift affects both alike.
#
# What it measures and what not: without an attached tool (nsys, or an injection library in
# NVTX_INJECTION64_PATH) every NVTX call returns after one branch. The phase timer (events at
# the phase boundaries, a steady clock on CPU, and the per-bucket all-reduce clock) is not
# optional and runs in both builds, so its cost is in both numbers and not in the difference.
#
# Usage: bench/instrumentation_cost.sh [--rounds R] [--cases "MODEL:BATCH:STEPS[@DEVICES] ..."]
#            [--warmup W] [--devices cpu:2] [--threads 1] [--no-build]
#   defaults: 5 rounds; cases "cifar-cnn:64:60 dense-100:64:1000 dense-100:64:3000@cpu:1";
#   10 warm-up steps; --devices (cpu:2) where a case names none; 1 thread per replica;
#   synthetic:device data (no input cost); no evaluation.
# dense-100 does almost no work per step, so a per-step cost shows most there; on cpu:1 it has
# no all-reduce either, whose latency on a loaded machine varies far more than NVTX could cost.
# Builds (or brings up to date) build-nvtx-off first, configured like build/ except for
# SCALESCOPE_NVTX (and -Werror), target scalescope only, -j2; --no-build skips that. Never
# builds build/.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
cases="cifar-cnn:64:60 dense-100:64:1000 dense-100:64:3000@cpu:1"
warmup=10
devices=cpu:2
threads=1
build=1
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "instrumentation_cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "--rounds $rounds: needs a positive integer" >&2; exit 2; }
[[ $warmup =~ ^[1-9][0-9]*$ ]] || { echo "--warmup $warmup: needs a positive integer" >&2; exit 2; }
for c in $cases; do
  [[ $c =~ ^[a-z0-9:=.,_-]+:[1-9][0-9]*:[1-9][0-9]*(@[a-z0-9:,]+)?$ ]] ||
    { echo "--cases: '$c' is not MODEL:BATCH:STEPS[@DEVICES]" >&2; exit 2; }
done

on="build/scalescope"
off="build-nvtx-off/scalescope"
py=/usr/bin/python3

cache_value() {  # cache_value DIR VAR: a variable's value in DIR/CMakeCache.txt
  sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt" 2>/dev/null | head -n 1
}

if ((build)); then
  # The same CUDA setting as build/ (a CUDA build where nvcc is found), so that the only
  # difference in code between the two binaries is SCALESCOPE_NVTX. Warnings are not errors
  # here: they change no code, and GCC 12 has given false -Wmaybe-uninitialized errors that
  # appear only with NVTX compiled out.
  cuda=$(cache_value build SCALESCOPE_WITH_CUDA)
  cmake -S . -B build-nvtx-off -G Ninja -DCMAKE_BUILD_TYPE=Release -DSCALESCOPE_NVTX=OFF \
    -DSCALESCOPE_WERROR=OFF ${cuda:+-DSCALESCOPE_WITH_CUDA=$cuda} >/dev/null
  if ! cmake --build build-nvtx-off --target scalescope -j2 >build-nvtx-off/build.log 2>&1; then
    cat build-nvtx-off/build.log >&2
    echo "instrumentation_cost.sh: building build-nvtx-off failed" >&2
    exit 1
  fi
fi

# Wait a little for build/scalescope: others rebuild it from time to time.
for _ in $(seq 30); do [[ -x $on ]] && break; sleep 10; done
for b in "$on" "$off"; do
  [[ -x $b ]] || { echo "instrumentation_cost.sh: $b missing" >&2; exit 1; }
done
nvtx_headers=$(cache_value build SCALESCOPE_NVTX3_INCLUDE_DIR)
[[ $(cache_value build SCALESCOPE_NVTX) == ON && -n $nvtx_headers &&
  $nvtx_headers != *NOTFOUND ]] ||
  echo "warning: build/ has NVTX off or no NVTX3 headers: neither binary is instrumented" >&2
[[ $(cache_value build-nvtx-off SCALESCOPE_NVTX) == OFF ]] ||
  echo "warning: build-nvtx-off/ is not configured with SCALESCOPE_NVTX=OFF" >&2
for d in build build-nvtx-off; do
  for v in CMAKE_BUILD_TYPE SCALESCOPE_WITH_CUDA CMAKE_CXX_COMPILER CMAKE_CXX_FLAGS; do
    [[ $(cache_value build "$v") == "$(cache_value "$d" "$v")" ]] ||
      echo "warning: $v differs between build/ and $d/" >&2
  done
  # Both binaries should be built from the same sources: a dry run shows pending compiles
  # (the build facts, git commit and dirty state, are re-recorded on every build: ignored).
  pending=$(ninja -C "$d" -n scalescope 2>/dev/null | grep 'Building' | grep -cv 'build_info' ||
    true)
  if ((pending > 0)); then
    echo "warning: $d/scalescope is $pending compile(s) behind the sources" \
      "(the two binaries may differ in more than NVTX)" >&2
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "NVTX cost: $on (NVTX ranges compiled in, no tool attached) vs $off (compiled out)"
echo "$threads thread(s) per replica, synthetic:device, $rounds rounds (order alternating)," \
  "$warmup warm-up steps per run"
echo "The phase timer (step/phase events, steady clock) is always on, in both builds:" \
  "its cost is not part of this difference."
echo "Without an attached tool an NVTX call costs one branch; expect a difference within noise."
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

run() {  # run BINARY MODEL BATCH STEPS DEVICES OUT
  "$1" train --model "$2" --devices "$5" --threads "$threads" --batch "$3" \
    --steps $(($4 + warmup)) --warmup-steps "$warmup" --data synthetic:device --no-eval \
    -q -o "$6" >/dev/null
}

n=0
for c in $cases; do
  n=$((n + 1)) dev=$devices
  [[ $c == *@* ]] && dev=${c#*@} c=${c%%@*}
  steps=${c##*:} rest=${c%:*}
  batch=${rest##*:} model=${rest%:*}
  for ((r = 1; r <= rounds; ++r)); do
    if ((r % 2)); then order="on off"; else order="off on"; fi
    for which in $order; do
      if [[ $which == on ]]; then bin=$on; else bin=$off; fi
      run "$bin" "$model" "$batch" "$steps" "$dev" "$tmp/$n.$which.$r.json"
    done
  done
done

"$py" - "$tmp" "$rounds" "$devices" "$cases" <<'EOF'
import json, math, os, sys

tmp, rounds, default_devices = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cases = sys.argv[4].split()

def percentile(v, q):  # as reports/analysis/stats.cpp
    s = sorted(v)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])

def measured(path):  # the group's step times (slowest replica) after the warm-up
    with open(path) as f:
        run = json.load(f)
    return [s["step_ms"] for s in run["steps"][run["summary"]["warmup_steps"]:]]

def ms(v):
    return f"{percentile(v, .5):.4g} ({percentile(v, .1):.4g}-{percentile(v, .9):.4g})"

print()
print("| model | batch | devices | steps x rounds | NVTX on: median ms (p10-p90) |"
      " NVTX off: median ms (p10-p90) | on vs off | per round: median (range) |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for n, case in enumerate(cases, 1):
    case, _, devices = case.partition("@")
    model, batch, steps = case.rsplit(":", 2)
    pooled = {"on": [], "off": []}
    per_round = []
    for r in range(1, rounds + 1):
        t = {w: measured(os.path.join(tmp, f"{n}.{w}.{r}.json")) for w in ("on", "off")}
        for w in t:
            pooled[w] += t[w]
        per_round.append(percentile(t["on"], 0.5) / percentile(t["off"], 0.5) - 1)
    on, off = pooled["on"], pooled["off"]
    print(f"| {model} | {batch} | {devices or default_devices} | {steps} x {rounds} | {ms(on)} | "
          f"{ms(off)} | {100 * (percentile(on, .5) / percentile(off, .5) - 1):+.2f}% | "
          f"{100 * percentile(per_round, .5):+.2f}% ({100 * min(per_round):+.1f}% .. "
          f"{100 * max(per_round):+.1f}%) |")
print()
print("on vs off: median step time (all measured steps of all rounds) with NVTX compiled in,"
      " relative to compiled out; positive means NVTX costs. Per round: the same ratio of the"
      " two runs of each round. A difference inside the per-round range is noise.")
EOF
