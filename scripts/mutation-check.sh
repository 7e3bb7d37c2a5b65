#!/usr/bin/env bash
# Proves that the tests of the accelerator path can fail: removes one event wait (or host
# wait) at a time from the reducer, the stager, the trainer's step and the caching allocator,
# rebuilds, runs the tests that exercise that path on simulated devices (some under chaos
# jitter), and reports which tests caught the mutation. Restores every file afterwards.
# Usage: scripts/mutation-check.sh [BUILD_DIR]   (default build; takes a few minutes a mutation)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
filter='SimDevice.*:Stager.*:Reducer.*:Devices/GpuTrainer.*/sim:Cases/SimEquivalence.*:SimTrainer.*'

# file | the line to remove (a fixed string, as it stands in the file) | what it orders
mutations=(
  "harness/trainer/stream_reducer.cpp|ready_[index]->wait_on(comm_stream_);|a bucket's reduction after backward wrote it"
  "harness/trainer/stream_reducer.cpp|done_->wait_on(compute());|the optimizer after every reduction"
  "pipelines/stager.cpp|slot.consumed->wait_on(*copy_stream_);|a slot's next copy after the compute that read it"
  "pipelines/stager.cpp|slot.copy_end->wait_on(compute);|compute after the copy of its batch"
  "harness/trainer/replica.cpp|comm_->synchronize(compute_, fmt::format(\"step {}\", n));|the host after the step (its one wait)"
  "core/caching_allocator.cpp|block.fences.back()->record(*stream);|reuse of a freed block after the work that used it"
)

backup=$(mktemp)
current=""
restore() { if [ -n "$current" ]; then cp "$backup" "$current"; current=""; fi; }
trap 'restore; rm -f "$backup"' EXIT

for m in "${mutations[@]}"; do
  IFS='|' read -r file line what <<<"$m"
  if ! grep -qF -- "$line" "$file"; then
    echo "MISSING: $file no longer holds: $line"
    continue
  fi
  cp "$file" "$backup"
  current=$file
  python3 - "$file" "$line" <<'PY'
import sys
path, line = sys.argv[1], sys.argv[2]
text = open(path).read()
open(path, "w").write(text.replace(line, "if (false) { " + line + " }", 1))
PY
  if ! cmake --build "$build" --target test_core test_pipelines test_harness >/tmp/mutation-build.log 2>&1; then
    echo "BUILD FAILED for $file: $line"; tail -5 /tmp/mutation-build.log; restore; continue
  fi
  failed=()
  for bin in test_core test_pipelines test_harness; do
    out=$(SCALESCOPE_SIM_JITTER_US=${JITTER:-0} timeout 600 "$build/tests/$bin" --gtest_filter="$filter" 2>&1)
    code=$?
    # "[  FAILED  ] Suite.Name (12 ms)" or "[  FAILED  ] Cases/Suite.Name/case, where ..."
    while read -r t; do [ -n "$t" ] && failed+=("$t"); done < <(grep -oP '^\[  FAILED  \] \K[^ ,]+(?=(, where| \())' <<<"$out" | sort -u)
    # A crash or a hang ends the binary before gtest lists its failures.
    if [ "$code" -gt 1 ]; then failed+=("$bin: crashed or hung (exit $code)"); fi
  done
  echo "== removed from $file: $line"
  echo "   (orders $what)"
  if [ ${#failed[@]} -eq 0 ]; then echo "   NOT CAUGHT"; else printf '   caught by %s\n' "${failed[@]}"; fi
  restore
done
cmake --build "$build" --target test_core test_pipelines test_harness >/dev/null 2>&1
