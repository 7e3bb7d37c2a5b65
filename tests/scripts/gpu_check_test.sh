#!/usr/bin/env bash
# scripts/gpu-check.sh on a machine without a GPU. Its plans (--dry-run, with and without
# --bundle) put what matters first and the NCCL_HOSTID probes as informational; a probe that
# fails cannot fail the script, while a required step that fails does; a second call
# continues. From a stand-in bundle (a shell script as scalescope): the README's main command
# is run as README writes it and passes only when it chose GPUs, and the two-process steps are
# skipped, saying why, when the probe does not find two ranks on one GPU working. The
# compute-sanitizer summary counts NCCL's own API errors apart. Usage: gpu_check_test.sh REPO
set -uo pipefail
repo=$1
script="$repo/scripts/gpu-check.sh"
fail() { echo "FAIL: $*"; exit 1; }

order_of() { awk 'NR > 1 {print $1}' <<<"$1" | paste -sd' '; }
plan=$("$script" --dry-run) || fail "--dry-run exited $?"
echo "$plan"
expected="env nvidia-smi configure build main-command resnet50-b128 h2d-overlap devices side-by-side profile-layers conv-search memory-plan gpt-profile kernels head-copies compare-16bit sanitizer-memcheck sanitizer-racecheck nccl_hostid nccl-2proc-train nccl-2proc-collectives nccl-2proc-abort test_models_cuda test_core_cuda test_harness_gpu sweep-gpu sweep-cpu compare-pytorch ctest nccl_hostid_control"
[[ "$(order_of "$plan")" == "$expected" ]] || fail "steps in the order '$(order_of "$plan")', expected '$expected'"
grep -qE '^nccl_hostid +[0-9]+ s +informational$' <<<"$plan" || fail "the probe is not informational"
grep -qE '^build +[0-9]+ s +required$' <<<"$plan" || fail "build is not required"
plan=$("$script" --dry-run --bundle /nonexistent.tar.gz) || fail "--dry-run --bundle exited $?"
expected="env nvidia-smi bundle main-command resnet50-b128 h2d-overlap devices side-by-side profile-layers conv-search memory-plan gpt-profile kernels head-copies compare-16bit sanitizer-memcheck sanitizer-racecheck nccl_hostid nccl-2proc-train nccl-2proc-collectives nccl-2proc-abort test_models_cuda test_core_cuda test_harness_gpu sweep-gpu sweep-cpu compare-pytorch nccl_hostid_control"
[[ "$(order_of "$plan")" == "$expected" ]] || fail "bundle steps in the order '$(order_of "$plan")', expected '$expected'"
"$script" --dry-run --bundle x.tar.gz --steps build >/dev/null 2>&1 && fail "--bundle accepted the build step"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export BUILD_DIR="$out/build"  # nothing written into the source tree
# The probe cannot build here (no NCCL wheel): it fails, and the script still exits 0.
GPU_CHECK_BUDGET_S=120 "$script" "$out/probe" --steps nccl_hostid >"$out/probe.log" 2>&1
status=$?
grep -E '^nccl_hostid ' "$out/probe/summary.txt" || fail "no summary line for the probe"
grep -qE '^nccl_hostid +[1-9][0-9]* .*informational' "$out/probe/summary.txt" ||
  fail "the probe did not fail here, or is not marked informational"
((status == 0)) || fail "a failed informational probe made the script exit $status"
# A required step that fails does fail the script (nvidia-smi: no GPU here).
GPU_CHECK_BUDGET_S=60 "$script" "$out/smi" --steps nvidia-smi >"$out/smi.log" 2>&1
status=$?
((status != 0)) || fail "a failed required step left the exit status 0"
# A second call continues: a step that passed is not run again.
mkdir -p "$out/resume" && echo env >"$out/resume/done.txt"
GPU_CHECK_BUDGET_S=60 "$script" "$out/resume" --steps env >"$out/resume.log" 2>&1
grep -q "env: passed in an earlier call" "$out/resume.log" || fail "a passed step ran again"

# A stand-in bundle: scalescope writes its arguments and prints what CHOICE says; the probe
# finds two ranks on one GPU failing.
make_bundle() {  # FILE CHOICE-LINE [GLIBC-NEEDED]
  local root="$out/mk/scalescope-bundle"
  rm -rf "$out/mk" && mkdir -p "$root/bin" "$root/tests"
  printf 'scalescope bundle\ncommit: 0123456789abcdef (test)\ndirty: no\nglibc needed: %s\nnvidia libraries (from the GPU machine): \n' "${3:-2.17}" >"$root/manifest.txt"
  cat >"$root/bin/scalescope" <<EOF
#!/bin/sh
echo "\$*" >>"$out/args.txt"
echo "$2"
echo "a table"
EOF
  printf '#!/bin/sh\necho "NCCL_HOSTID two-rank on one GPU: FAILS: no GPU here"\nexit 1\n' >"$root/bin/nccl_hostid_probe"
  printf '#!/bin/sh\nexit 1\n' >"$root/bin/mpirun"
  chmod +x "$root/bin/"*
  tar -C "$out/mk" -czf "$1" scalescope-bundle
}
make_bundle "$out/gpu.tar.gz" "sweep on cuda:1 (no --devices given: the 1 visible GPU); models: the GPU defaults"
rm -f "$out/args.txt"
GPU_CHECK_BUDGET_S=200 "$script" --bundle "$out/gpu.tar.gz" "$out/b" \
  --steps env,bundle,main-command,nccl_hostid,nccl-2proc-train --tar "$out/b.tar.gz" >"$out/b.log" 2>&1
cat "$out/b/summary.txt"
for s in env bundle main-command; do
  grep -qE "^$s +0 " "$out/b/summary.txt" || { cat "$out/b.log"; fail "bundle mode: $s did not pass"; }
done
main=$(grep -m1 -oE 'build/scalescope sweep[^#`]*' "$repo/README.md" | sed 's/[[:space:]]*$//')
grep -qxF -- "${main#build/scalescope }" "$out/args.txt" ||
  fail "main-command ran scalescope with '$(paste -sd'|' "$out/args.txt")', README says '$main'"
grep -qE "^main-command .*sweep on cuda:1 " "$out/b/summary.txt" || fail "main-command's note is not the sweep's first line"
grep -qE '^nccl-2proc-train +skip .*probe' "$out/b/summary.txt" ||
  fail "the two-process step was not skipped for the probe's verdict"
grep -qx "b/summary.txt" <<<"$(tar -tzf "$out/b.tar.gz")" || fail "--tar did not pack OUTDIR"
[[ ! -e "$out/b/scalescope-bundle" ]] || fail "the bundle was unpacked into OUTDIR"
# A main command that stays on CPU devices fails its step.
make_bundle "$out/cpu.tar.gz" "sweep on cpu:1,2 (no --devices given, and no GPU is visible (cudaGetDeviceCount: no cuda:0))"
GPU_CHECK_BUDGET_S=60 "$script" --bundle "$out/cpu.tar.gz" "$out/c" --steps main-command >"$out/c.log" 2>&1 &&
  fail "a main command on CPU devices passed"
grep -qE '^main-command +1 .*NO GPU CHOSEN' "$out/c/summary.txt" || fail "no NO GPU CHOSEN note"
# So does one that chose the GPUs but whose points fail.
make_bundle "$out/fail.tar.gz" "sweep on cuda:1 (no --devices given, and 1 GPU is visible)
FAILED: resnet:depth=50 cuda:1 batch 64: devices cuda:0: no GPU"
GPU_CHECK_BUDGET_S=60 "$script" --bundle "$out/fail.tar.gz" "$out/f" --steps main-command >"$out/f.log" 2>&1 &&
  fail "a main command whose points failed passed"
grep -qE '^main-command +1 .*POINT FAILED: resnet' "$out/f/summary.txt" || fail "no POINT FAILED note"
# A bundle built against a newer glibc than this machine's fails its first step, saying so.
make_bundle "$out/new-glibc.tar.gz" "sweep on cuda:1" 99.0
GPU_CHECK_BUDGET_S=60 "$script" --bundle "$out/new-glibc.tar.gz" "$out/g" --steps bundle >"$out/g.log" 2>&1 &&
  fail "a bundle needing glibc 99.0 passed"
grep -qE '^bundle +1 .*MISSING: glibc 99.0' "$out/g/summary.txt" || fail "the bundle step does not name the glibc it needs"

# side-by-side: the same runs by the binary GPU_CHECK_BEFORE names, copied beside the bundle's,
# and the bundle's, alternating; skipped, saying why, without it.
make_bundle "$out/sbs.tar.gz" "run: median step 10.00 ms (p10 9.9)"
printf '#!/bin/sh\necho "$0 $*" >>"%s"\necho "run: median step 11.50 ms (p10 11.4)"\n' "$out/before-args.txt" >"$out/before"
chmod +x "$out/before"
rm -f "$out/args.txt" "$out/before-args.txt"
GPU_CHECK_BEFORE="$out/before" GPU_CHECK_CASES="gpt:preset=small:8:bf16" GPU_CHECK_BUDGET_S=60 \
  "$script" --bundle "$out/sbs.tar.gz" "$out/s" --steps side-by-side >"$out/s.log" 2>&1 ||
  { cat "$out/s.log"; fail "side-by-side with two stand-ins failed"; }
grep -qE '^side-by-side +0 .*gpt:preset=small:8:bf16 ms before/after: 11.50,11.50/10.00,10.00' \
  "$out/s/summary.txt" || { cat "$out/s/summary.txt"; fail "side-by-side's note"; }
[[ "$(wc -l <"$out/args.txt")" == 2 && "$(wc -l <"$out/before-args.txt")" == 2 ]] ||
  fail "not two runs of each binary"
grep -q 'scalescope-bundle/bin/scalescope-before train ' "$out/before-args.txt" ||
  fail "the binary before did not run from the bundle's bin/: $(head -1 "$out/before-args.txt")"
[[ "$(sed 's/^[^ ]* //; s/-before\.json/.json/' "$out/before-args.txt")" == "$(sed 's/-after\.json/.json/' "$out/args.txt")" ]] ||
  fail "the two binaries ran different commands"
grep -q -- '--model gpt:preset=small --batch 8 --precision bf16' "$out/args.txt" || fail "the case was not split: $(head -1 "$out/args.txt")"
GPU_CHECK_BUDGET_S=60 "$script" --bundle "$out/sbs.tar.gz" "$out/s2" --steps side-by-side >"$out/s2.log" 2>&1
grep -qE '^side-by-side +skip .*GPU_CHECK_BEFORE unset' "$out/s2/summary.txt" || fail "side-by-side not skipped without GPU_CHECK_BEFORE"

# Nsight Compute's raw page summed by kernel name; a page without launches fails.
summary="$repo/scripts/gpu-check/kernel_summary.py"
printf '%s\n' '==PROF== Connected to process 1' \
  '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"' \
  '"","","byte","byte","ns"' '"0","sums(...)","1,000,000","0","2,000"' \
  '"1","data(...)","3000000","1000000","5000"' '"2","sums(...)","1000000","0","2000"' >"$out/ncu.csv"
table=$(python3 "$summary" "$out/ncu.csv") || fail "kernel_summary.py failed: $table"
grep -qE '^ +1 +0\.005 +5\.00 +0\.004 +800\.0  data' <<<"$table" || fail "data's row: $table"
grep -qE '^ +2 +0\.004 +2\.00 +0\.002 +500\.0  sums' <<<"$table" || fail "sums' row: $table"
grep -qx 'top: data(...) 0.01 ms (55.6%)' <<<"$table" || fail "top line: $table"
echo '==PROF== nothing' >"$out/none.csv"
python3 "$summary" "$out/none.csv" >/dev/null && fail "a page without launches passed"

# compute-sanitizer: API errors raised inside NCCL are not ours; anything else is.
sanitized() {  # extra record lines...
  printf '%s\n' "========= COMPUTE-SANITIZER" \
    "========= Program hit cudaErrorInvalidValue (error 1) due to \"invalid argument\" on CUDA API call to cudaFuncGetAttributes." \
    "=========     Saved host backtrace up to driver entry point at error" \
    "=========         Host Frame: [0x3b2c1] in libcuda.so.1" \
    "=========         Host Frame: ncclInit [0x5f2d0] in libnccl.so.2" \
    "=========" "$@" "========= ERROR SUMMARY: $((1 + $# / 4)) errors"
}
sanitized >"$out/nccl-only.txt"
note=$("$script" --summarize-sanitizer "$out/nccl-only.txt") || fail "NCCL's own API error counted as ours: $note"
[[ "$note" == "memcheck: 0 errors of ours, 1 API errors inside NCCL not counted"* ]] || fail "note: $note"
sanitized "========= Invalid __global__ write of size 4 bytes" "=========     at relu_kernel+0x90" \
  "=========         Host Frame: launch [0x1234] in scalescope" "=========" >"$out/ours.txt"
note=$("$script" --summarize-sanitizer "$out/ours.txt") && fail "a memory error of ours passed: $note"
[[ "$note" == "memcheck: 1 errors of ours, 1 API errors inside NCCL"*"Invalid __global__ write"* ]] || fail "note: $note"
printf '%s\n' "========= COMPUTE-SANITIZER" "=========" >"$out/cut.txt"
"$script" --summarize-sanitizer "$out/cut.txt" >/dev/null && fail "a log without a summary passed"
echo "ok"
