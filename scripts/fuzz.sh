#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (docs/fuzzing.md), built with clang-16 in build-fuzz (or
# $BUILD_DIR) with ASan and UBSan.
#   scripts/fuzz.sh NAME [SECONDS]   build and run fuzz_NAME (default 60 s)
#   scripts/fuzz.sh --all SECONDS    build and run every fuzzer SECONDS each; a summary line per
#                                    fuzzer (executions, seconds); exit 1 when any crashed
#   scripts/fuzz.sh --list           the fuzzers' names
# Each fuzzer runs on build-fuzz/fuzz/corpus/NAME (new inputs go there), the checked-in
# tests/fuzz/corpus/NAME (seeds and every crash found so far) and the seeds fuzz_make_corpus
# writes; crash artifacts go to build-fuzz/fuzz/artifacts/NAME/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-fuzz}
fuzzers=(safetensors optimizer_state idx cifar10 run_results sweep_report sweep_config compare
         model_spec device_spec trace_escape)
# Inputs longer than this are not generated (CIFAR-10 needs records of 3073 bytes, and a
# sweep report with a few points is about 10 KB).
declare -A max_len=([cifar10]=8192 [sweep_report]=16384 [compare]=32768 [run_results]=8192)

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
case "$1" in
  --list) printf '%s\n' "${fuzzers[@]}"; exit 0 ;;
  --all) [[ $# -eq 2 ]] || usage; names=("${fuzzers[@]}"); seconds=$2 ;;
  -*) usage ;;
  *) names=("$1"); seconds=${2:-60}
     [[ " ${fuzzers[*]} " == *" $1 "* ]] || { echo "unknown fuzzer '$1'; known: ${fuzzers[*]}" >&2; exit 2; } ;;
esac

if [[ ! -f "$build/build.ninja" ]]; then
  CXX=${CXX:-clang++-16} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DSCALESCOPE_FUZZ=ON \
    -DSCALESCOPE_WITH_CUDA=OFF -DSCALESCOPE_BUILD_BENCH=OFF -DSCALESCOPE_BUILD_TESTS=OFF \
    -DSCALESCOPE_WITH_MPI=OFF >/dev/null
fi
targets=(fuzz_make_corpus)
for n in "${names[@]}"; do targets+=("fuzz_$n"); done
ninja -C "$build" -j "${JOBS:-2}" "${targets[@]}"

work="$build/fuzz"
rm -rf "$work/seeds"
# No leak checks while writing seeds (a leak there is no finding of a reader).
ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz/fuzz_make_corpus" "$work/seeds" >/dev/null

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
summary=()
for n in "${names[@]}"; do
  mkdir -p "$work/corpus/$n" "$work/artifacts/$n"
  # libFuzzer adds new inputs to the first directory only.
  dirs=("$work/corpus/$n" "$work/seeds/$n")
  [[ -d "tests/fuzz/corpus/$n" ]] && dirs+=("tests/fuzz/corpus/$n")
  log="$work/$n.log"
  args=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 "-max_total_time=$seconds"
        -print_final_stats=1 "-artifact_prefix=$work/artifacts/$n/")
  [[ -n "${max_len[$n]:-}" ]] && args+=("-max_len=${max_len[$n]}")
  [[ -f "$work/seeds/$n.dict" ]] && args+=("-dict=$work/seeds/$n.dict")
  echo "== fuzz_$n for ${seconds}s (log: $log)"
  set +e
  "$build/tests/fuzz/fuzz_$n" "${args[@]}" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [[ $rc -ne 0 ]]; then
    status=1
    summary+=("$(printf '%-16s CRASH (exit %d) after %s execs; artifacts in %s' "$n" "$rc" \
      "${execs:-?}" "$work/artifacts/$n/")")
    grep -m1 -E 'ERROR: |runtime error|deadly signal|uncaught exception|out-of-memory|timeout' \
      "$log" || true
  else
    summary+=("$(printf '%-16s ok  %10s execs in %4s s  %s' "$n" "${execs:-?}" "${took:-?}" "$cov")")
  fi
done
echo "== summary (${seconds}s per fuzzer)"
printf '%s\n' "${summary[@]}"
exit $status
