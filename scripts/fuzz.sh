#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (docs/fuzzing.md), with ASan and UBSan, in the clang-16
# build of scripts/asan.sh: build-asan (or $BUILD_DIR), configured by asan.sh when missing.
#   scripts/fuzz.sh NAME [SECONDS]   build and run fuzz_NAME (default 60 s)
#   scripts/fuzz.sh --all SECONDS    build and run every fuzzer SECONDS each; a summary line per
#                                    fuzzer (executions, seconds); exit 1 when any crashed
#   scripts/fuzz.sh --list           the fuzzers' names
# Each fuzzer runs on BUILD/fuzz/corpus/NAME (new inputs go there), the checked-in
# tests/fuzz/corpus/NAME (seeds and every crash found so far) and the seeds fuzz_make_corpus
# writes; crash artifacts go to BUILD/fuzz/artifacts/NAME/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
fuzzers=(safetensors optimizer_state idx cifar10 run_results sweep_report sweep_config
         command_line compare model_spec device_spec trace_escape trace_analysis)
# Inputs longer than this are not generated (CIFAR-10 needs records of 3073 bytes, and a
# sweep report with a few points is about 10 KB).
declare -A max_len=([cifar10]=8192 [sweep_report]=16384 [compare]=32768 [run_results]=8192
                   [trace_analysis]=16384)

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
case "$1" in
  --list) printf '%s\n' "${fuzzers[@]}"; exit 0 ;;
  --all) [[ $# -eq 2 ]] || usage; names=("${fuzzers[@]}"); seconds=$2 ;;
  -*) usage ;;
  *) names=("$1"); seconds=${2:-60}
     [[ " ${fuzzers[*]} " == *" $1 "* ]] || { echo "unknown fuzzer '$1'; known: ${fuzzers[*]}" >&2; exit 2; } ;;
esac

[[ -f "$build/build.ninja" ]] || BUILD_DIR=$build scripts/asan.sh --configure-only
targets=(fuzz_make_corpus)
for n in "${names[@]}"; do targets+=("fuzz_$n"); done
ninja -C "$build" -j "${JOBS:-2}" "${targets[@]}"

work="$build/fuzz"
rm -rf "$work/seeds"
# No leak checks while writing seeds (a leak there is no finding of a reader).
ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz/fuzz_make_corpus" "$work/seeds" >/dev/null

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# fuzz_one NAME: one fuzzer for $seconds; its exit status goes to $work/NAME.rc.
fuzz_one() {
  local n=$1
  mkdir -p "$work/corpus/$n" "$work/artifacts/$n"
  # libFuzzer adds new inputs to the first directory only.
  local dirs=("$work/corpus/$n" "$work/seeds/$n")
  [[ -d "tests/fuzz/corpus/$n" ]] && dirs+=("tests/fuzz/corpus/$n")
  local args=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 "-max_total_time=$seconds"
              -print_final_stats=1 "-artifact_prefix=$work/artifacts/$n/")
  [[ -n "${max_len[$n]:-}" ]] && args+=("-max_len=${max_len[$n]}")
  [[ -f "$work/seeds/$n.dict" ]] && args+=("-dict=$work/seeds/$n.dict")
  local rc=0
  "$build/tests/fuzz/fuzz_$n" "${args[@]}" "${dirs[@]}" >"$work/$n.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$n.rc"
}

# summarize NAME: one line from the fuzzer's log; returns 1 when it crashed.
summarize() {
  local n=$1 log="$work/$1.log" rc
  rc=$(cat "$work/$n.rc")
  local execs took cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [[ $rc -ne 0 ]]; then
    printf '%-16s CRASH (exit %d) after %s execs; artifacts in %s; log %s\n' "$n" "$rc" \
      "${execs:-?}" "$work/artifacts/$n/" "$log"
    grep -m1 -E 'ERROR: |runtime error|deadly signal|uncaught exception|out-of-memory|timeout' \
      "$log" | sed 's/^/                 /' || true
    return 1
  fi
  printf '%-16s ok  %10s execs in %4s s  %s\n' "$n" "${execs:-?}" "${took:-?}" "$cov"
}

# FUZZ_JOBS fuzzers at a time (default 2, one per core of the build machine): a fuzzer is one
# process on one core, so --all takes seconds x ceil(13 / FUZZ_JOBS).
jobs=${FUZZ_JOBS:-2}
echo "== ${#names[@]} fuzzer(s), ${seconds}s each, $jobs at a time (logs: $work/NAME.log)"
for n in "${names[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n || true; done
  rm -f "$work/$n.rc"
  fuzz_one "$n" &
done
wait
status=0
echo "== summary (${seconds}s per fuzzer)"
for n in "${names[@]}"; do summarize "$n" || status=1; done
exit $status
