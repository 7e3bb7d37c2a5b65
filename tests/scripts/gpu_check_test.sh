#!/usr/bin/env bash
# scripts/gpu-check.sh on a machine without a GPU: its plan (--dry-run) puts what matters first
# (configure, build, the GPU tests, the sweeps, the PyTorch comparison, ctest) and the
# NCCL_HOSTID probe last as informational; and a probe that fails cannot fail the script, while
# a required step that fails does. Usage: gpu_check_test.sh REPO
set -uo pipefail
repo=$1
script="$repo/scripts/gpu-check.sh"
fail() { echo "FAIL: $*"; exit 1; }

plan=$("$script" --dry-run) || fail "--dry-run exited $?"
echo "$plan"
order=$(awk 'NR > 1 {print $1}' <<<"$plan" | paste -sd' ')
expected="env nvidia-smi configure build devices test_models_cuda test_core_cuda test_harness_gpu sweep-gpu sweep-cpu compare-pytorch ctest nccl_hostid nccl_hostid_control"
[[ "$order" == "$expected" ]] || fail "steps in the order '$order', expected '$expected'"
grep -qE '^nccl_hostid +[0-9]+ s +informational$' <<<"$plan" || fail "the probe is not informational"
grep -qE '^build +[0-9]+ s +required$' <<<"$plan" || fail "build is not required"

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
echo "ok"
