#!/usr/bin/env bash
# Proves that the tests of the accelerator path can fail: removes one event wait (or host
# wait) at a time from the reducer, the stager, the trainer's step and the caching allocator,
# rebuilds, runs the tests that exercise that path on simulated devices (some under chaos
# jitter), and reports which tests caught the mutation. Restores every file afterwards.
# Usage: scripts/mutation-check.sh [BUILD_DIR]   (default build; takes a few minutes a mutation)
#   JITTER=N   SCALESCOPE_SIM_JITTER_US for the tests (docs/gpu-path.md's table: 200)
# It edits the sources of its own checkout while it runs: run it where nobody else is editing
# or building (a copy, a `git worktree`). Exit status 1 when a wait is missing or found more
# than once, a mutant does not build, or no test catches one; every mutation runs regardless.
# First the tests run without any mutation: a failure there stops it (exit 1).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
filter='SimDevice.*:Stager.*:Reducer.*:Devices/GpuTrainer.*/sim:Cases/SimEquivalence.*:SimTrainer.*'
filter+=':Devices/SyncBatchNorm.*/sim2'

# file | the statement to remove: a whole line of the file, as it stands there, once | what it orders
mutations=(
  "harness/trainer/stream_reducer.cpp|ready_[index]->wait_on(comm_stream_);|a bucket's reduction after backward wrote it"
  "harness/trainer/stream_reducer.cpp|done_->wait_on(compute());|the optimizer after every reduction"
  "harness/trainer/stream_reducer.cpp|sync_ready_->wait_on(comm_stream_);|the batch-norm sums' all-reduce after the compute that wrote them"
  "harness/trainer/stream_reducer.cpp|sync_done_->wait_on(compute());|the compute that reads the batch-norm sums after their all-reduce"
  "pipelines/stager.cpp|slot.copy_end->synchronize();|the host's refill of a pinned slot after the copy that read it"
  "pipelines/stager.cpp|slot.consumed->wait_on(*copy_stream_);|a slot's next copy after the compute that read it"
  "pipelines/stager.cpp|slot.copy_end->wait_on(compute);|compute after the copy of its batch"
  "harness/trainer/replica.cpp|comm_->synchronize(compute_, fmt::format(\"step {}\", n));|the host after the step (its one wait)"
  "core/caching_allocator.cpp|block.fences.back()->record(*stream);|reuse of a freed block after the work that used it"
)

backup=$(mktemp)
current=""
restore() { if [ -n "$current" ]; then cp "$backup" "$current"; current=""; fi; }
trap 'restore; rm -f "$backup"' EXIT

# run_tests: runs the filtered tests of every test binary; their failures go to `failed`.
run_tests() {
  failed=()
  local bin out code
  for bin in test_core test_pipelines test_harness; do
    out=$(SCALESCOPE_SIM_JITTER_US=${JITTER:-0} timeout 600 "$build/tests/$bin" --gtest_filter="$filter" 2>&1)
    code=$?
    # "[  FAILED  ] Suite.Name (12 ms)" or "[  FAILED  ] Cases/Suite.Name/case, where ..."
    while read -r t; do [ -n "$t" ] && failed+=("$t"); done < <(grep -oP '^\[  FAILED  \] \K[^ ,]+(?=(, where| \())' <<<"$out" | sort -u)
    # A crash or a hang ends the binary before gtest lists its failures.
    if [ "$code" -gt 1 ]; then failed+=("$bin: crashed or hung (exit $code)"); fi
  done
}

# Without a mutation every test must pass, or a failure would prove nothing.
if ! cmake --build "$build" --target test_core test_pipelines test_harness >/tmp/mutation-build.log 2>&1; then
  echo "BUILD FAILED without any mutation"; tail -5 /tmp/mutation-build.log; exit 1
fi
run_tests
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED without any mutation: %s\n' "${failed[@]}"; exit 1
fi

failures=()
for m in "${mutations[@]}"; do
  IFS='|' read -r file line what <<<"$m"
  cp "$file" "$backup"
  current=$file
  # The line whose text is the statement alone becomes `if (false) { statement }`: it still
  # compiles, and it no longer runs. A statement that is part of a longer one does not match.
  if ! python3 - "$file" "$line" <<'PY'; then
import sys
path, statement = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
found = [i for i, text in enumerate(lines) if text.strip() == statement]
if len(found) != 1:
    print(f"{'MISSING' if not found else 'AMBIGUOUS'}: {path} has {len(found)} lines that are "
          f"exactly: {statement}")
    sys.exit(1)
i = found[0]
indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
lines[i] = f"{indent}if (false) {{ {statement} }}"
open(path, "w").write("\n".join(lines))
PY
    failures+=("not found once in $file: $line"); restore; continue
  fi
  if ! cmake --build "$build" --target test_core test_pipelines test_harness >/tmp/mutation-build.log 2>&1; then
    echo "BUILD FAILED for $file: $line"; tail -5 /tmp/mutation-build.log
    failures+=("does not build without: $line"); restore; continue
  fi
  run_tests
  echo "== removed from $file: $line"
  echo "   (orders $what)"
  if [ ${#failed[@]} -eq 0 ]; then
    echo "   NOT CAUGHT"; failures+=("not caught: $line")
  else
    printf '   caught by %s\n' "${failed[@]}"
  fi
  restore
done
cmake --build "$build" --target test_core test_pipelines test_harness >/dev/null 2>&1
echo "== ${#mutations[@]} mutations, $((${#mutations[@]} - ${#failures[@]})) caught"
if [ ${#failures[@]} -gt 0 ]; then
  printf '   FAILED: %s\n' "${failures[@]}"
  exit 1
fi
