#!/usr/bin/env bash
# Usage: scripts/gpu-check.sh [--bundle FILE] OUTDIR [--steps LIST] [--tar FILE] [--dry-run]
#        scripts/gpu-check.sh --summarize-sanitizer LOG
#
# Runs ON A GPU MACHINE, from the repository root, and writes every log to OUTDIR.
# With --bundle FILE (made by scripts/bundle.sh on a build host) it runs the bundle's binaries:
# no configure and no build, so the whole check fits one device call. The machine needs the
# NVIDIA driver and the NVIDIA libraries the bundle names in its manifest.txt (CUDA runtime,
# cuBLAS, cuDNN, NCCL), found in python3's nvidia-* wheels (nvidia-cudnn-cu13,
# nvidia-nccl-cu13, nvidia-cublas, ...), the CUDA toolkit or LD_LIBRARY_PATH.
# Without --bundle it builds scalescope with CUDA into build-gpu first, on an image with nvcc,
# CMake, ninja and python3 with the nvidia-cudnn and nvidia-nccl wheels but no Debian -dev
# packages: those come unpacked from scripts/gpu-deps.sh (carry third_party/gpu-debs).
#
#   --bundle FILE  run from this bundle (.tar.gz), unpacked into a temporary folder
#   --steps LIST   run only these steps (comma-separated names from --dry-run's list)
#   --tar FILE     also pack OUTDIR into FILE (.tar.gz): one file to fetch instead of many
#   --dry-run      print the steps in order with their time limits, and exit
#   --summarize-sanitizer LOG  print the summary line the sanitizer steps write for a
#                  compute-sanitizer log, and exit 0 when it holds no error of ours
#
# Steps, most valuable first, so that a call cut short has answered the main questions:
# does the README's main command pick the GPU; does ResNet-50 run at 128 per GPU; is the
# host-to-device copy hidden; pinned vs pageable bandwidth; compute-sanitizer; two NCCL ranks on
# one GPU (a probe, then two-process train, collectives and a killed rank); the GPU unit tests;
# short sweeps; the PyTorch comparison. The NCCL_HOSTID probe and its control are
# informational: their result is recorded, but it cannot make the script fail.
# Resumable: a step that passed in OUTDIR (OUTDIR/done.txt) is not run again, so a second call
# with the same OUTDIR continues where the first stopped, with a budget of its own.
#
# Environment (all optional):
#   GPU_CHECK_BUDGET_S seconds for the whole call (default 480 with --bundle, 570 without); a
#                      step never runs past it, and steps that find no time are recorded so
#   GPU_CHECK_BEFORE   a scalescope binary of the commit to compare with (e.g. the previous
#                      bundle's bin/scalescope, carried beside this one): the side-by-side step
#                      runs it and this check's binary alternately; unset, that step is skipped
#   GPU_CHECK_CASES    side-by-side's cases, MODEL:BATCH:PRECISION separated by spaces (default
#                      GPT-2 small at 8 and ResNet-50 at 64, each in tf32 and bf16)
#   NCU                the Nsight Compute the kernels step runs (default: on PATH or in the
#                      CUDA toolkit; none: the step is skipped)
#   COMPUTE_SANITIZER  the compute-sanitizer to use (default: on PATH, in the CUDA toolkit or
#                      in python3's nvidia wheels)
#   Without --bundle: GPU_DEPS_ROOT (the unpacked debs, default third_party/gpu-debs/root),
#   CUDNN_ROOT and NCCL_ROOT (folders with include/ and lib/; default: python3's wheels),
#   BUILD_DIR (default build-gpu), CUDACXX (nvcc), GPU_CHECK_WERROR (ON keeps -Werror).
#
# Never stops at a failed step. OUTDIR/summary.txt has one line per step: name, exit status
# ("skip" when deliberately not run, "notime" when the budget ran out), seconds, a note.
# Exit status: 0 when every step that ran passed, 1 otherwise, 2 on a usage error.

set -uo pipefail

usage() {  # [exit status, default 2]
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
  exit "${1:-2}"
}

script_dir=$(cd "$(dirname "$0")" && pwd)
export script_dir
# The summary line of a compute-sanitizer log (scripts/gpu-check/sanitizer_summary.py).
summarize_sanitizer() { python3 "$script_dir/gpu-check/sanitizer_summary.py" "$1"; }

# name|seconds at most|required or informational|build, bundle or both (the modes it runs in)
step_table=(
  "env|60|required|both"
  "nvidia-smi|30|required|both"
  "configure|180|required|build"
  "build|480|required|build"
  "bundle|60|required|bundle"
  "main-command|240|required|both"
  "resnet50-b128|120|required|both"
  "h2d-overlap|90|required|both"
  "devices|60|required|both"
  "side-by-side|240|required|both"
  "profile-layers|120|required|both"
  "conv-search|180|required|both"
  "memory-plan|240|informational|both"
  "gpt-profile|200|required|both"
  "kernels|180|informational|both"
  "head-copies|60|informational|both"
  "compare-16bit|360|required|both"
  "sanitizer-memcheck|150|required|both"
  "sanitizer-racecheck|120|required|both"
  "nccl_hostid|90|informational|both"
  "nccl-2proc-train|120|required|both"
  "nccl-2proc-collectives|90|required|both"
  "nccl-2proc-abort|90|required|both"
  "test_models_cuda|300|required|both"
  "test_core_cuda|180|required|both"
  "test_harness_gpu|300|required|both"
  "sweep-gpu|180|required|both"
  "sweep-cpu|120|required|both"
  "compare-pytorch|300|required|both"
  "ctest|300|required|build"
  "nccl_hostid_control|90|informational|both"
)

out=""
only_steps=""
tarball=""
bundle_file=""
dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) [[ $# -ge 2 ]] || usage; only_steps=",$2,"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --tar) [[ $# -ge 2 ]] || usage; tarball=$(realpath -m "$2"); shift 2 ;;
    --bundle) [[ $# -ge 2 ]] || usage; bundle_file=$(realpath -m "$2"); shift 2 ;;
    --summarize-sanitizer) [[ $# -eq 2 ]] || usage; summarize_sanitizer "$2"; exit ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu-check: unknown option $1" >&2; usage ;;
    *) [[ -z "$out" ]] || usage; out=$(realpath -m "$1"); shift ;;
  esac
done
[[ -n "$out" || $dry_run == 1 ]] || usage
before_file=""
[[ -n "${GPU_CHECK_BEFORE:-}" ]] && before_file=$(realpath -m "$GPU_CHECK_BEFORE")
mode=build
[[ -n "$bundle_file" ]] && mode=bundle

# The steps of this mode, in order.
steps=()
for row in "${step_table[@]}"; do
  [[ "${row##*|}" == both || "${row##*|}" == "$mode" ]] && steps+=("$row")
done
all_steps=","
for row in "${steps[@]}"; do all_steps+="${row%%|*},"; done
if [[ -n "$only_steps" ]]; then
  IFS=, read -ra chosen <<<"$only_steps"
  for s in "${chosen[@]}"; do
    [[ -z "$s" || "$all_steps" == *",$s,"* ]] || { echo "gpu-check: no step '$s' in the $mode mode" >&2; usage; }
  done
fi

wanted() { [[ -z "$only_steps" || "$only_steps" == *",$1,"* ]]; }
if ((dry_run)); then
  printf '%-24s %9s  %s\n' step "at most" kind
  for row in "${steps[@]}"; do
    IFS='|' read -r name limit kind _ <<<"$row"
    wanted "$name" || continue
    printf '%-24s %7s s  %s\n' "$name" "$limit" "$kind"
  done
  exit 0
fi
[[ "$mode" == build || -f "$bundle_file" ]] || { echo "gpu-check: no bundle $bundle_file" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
mkdir -p "$out" || exit 2
summary="$out/summary.txt"
done_file="$out/done.txt"
touch "$done_file"
[[ -s "$summary" ]] || printf '# %-26s %-6s %8s  %s\n' step status seconds note >"$summary"

t_start=$(date +%s)
budget=${GPU_CHECK_BUDGET_S:-$([[ "$mode" == bundle ]] && echo 480 || echo 570)}
t_end=$((t_start + budget))
failures=0
failed_logs=()

log() { echo "[gpu-check $(date +%H:%M:%S)] $*"; }

record() {  # name status seconds note: one short line per step keeps summary.txt readable
  printf '%-28s %-6s %8s  %s\n' "$1" "$2" "$3" "${4:0:220}" >>"$summary"
}

step_field() {  # name field-number -> that column of the step's row
  local row
  for row in "${step_table[@]}"; do
    [[ "${row%%|*}" == "$1" ]] && { cut -d'|' -f"$2" <<<"$row"; return; }
  done
}

# run_step NAME LOG NOTE_FUNCTION COMMAND...: runs COMMAND (a program or an exported function)
# under timeout(1) with the step's limit (or what is left of the budget), output to LOG, and
# records the result. NOTE_FUNCTION (or "-") is called with LOG to make the note. COMMAND sees
# STEP_LIMIT (its seconds) and STEP_LOG (LOG).
run_step() {
  local name=$1 logfile=$2 note_fn=$3
  shift 3
  wanted "$name" || return 0
  if grep -qx "$name" "$done_file"; then
    log "$name: passed in an earlier call (OUTDIR/done.txt)"
    return 0
  fi
  local informational=0 limit
  [[ "$(step_field "$name" 3)" == informational ]] && informational=1
  limit=$(step_field "$name" 2)
  local left=$((t_end - $(date +%s)))
  ((limit > left)) && limit=$left
  if ((limit < 15)); then
    record "$name" notime 0 "GPU_CHECK_BUDGET_S=${budget} used up before it could start"
    log "$name: not run, no time left"
    failures=$((failures + 1))
    return 0
  fi
  log "$name: running (at most ${limit} s) -> $logfile"
  local t0 t1 rc note=""
  t0=$(date +%s.%N)
  STEP_LIMIT=$limit STEP_LOG=$logfile timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" </dev/null >"$logfile" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  if [[ "$note_fn" != "-" ]]; then note=$("$note_fn" "$logfile" 2>/dev/null | head -1); fi
  if ((rc == 124 || rc == 137)); then note="timed out after ${limit} s; $note"; fi
  ((informational)) && note="informational; $note"
  record "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')" "$note"
  log "$name: exit status $rc${note:+ ($note)}"
  if ((rc == 0)); then
    echo "$name" >>"$done_file"
  elif ((!informational)); then
    failures=$((failures + 1))
    failed_logs+=("$logfile")
  fi
}

record_skip() {  # name note
  wanted "$1" || return 0
  grep -qx "$1" "$done_file" && return 0
  record "$1" skip 0 "$2"
  log "$1: skipped ($2)"
}

# ---------------------------------------------------------------------------------------------
# Where everything is.

# Every folder nvidia/* on python3's path (nvidia/cudnn, nvidia/nccl, nvidia/cu13, ...): the
# NVIDIA wheels.
nvidia_wheel_dirs() {
  python3 - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = []
try:
    import nvidia  # a namespace package: __path__, not __file__
    roots += list(nvidia.__path__)
except Exception:
    pass
try:
    roots += [os.path.join(p, "nvidia") for p in site.getsitepackages()]
except Exception:
    pass
roots += [os.path.join(p, "nvidia") for p in sys.path if p]
seen = set()
for r in roots:
    r = os.path.realpath(r)
    if r in seen or not os.path.isdir(r):
        continue
    seen.add(r)
    for d in sorted(glob.glob(os.path.join(r, "*"))):
        print(d)
EOF
}
mapfile -t wheel_dirs < <(nvidia_wheel_dirs)

# lib_dir ROOT LIBGLOB: ROOT/lib or ROOT/lib64, whichever holds LIBGLOB.
lib_dir() {
  local d
  for d in "$1/lib" "$1/lib64"; do
    if compgen -G "$d/$2" >/dev/null; then echo "$d"; return 0; fi
  done
  return 1
}

# find_wheel HEADER LIBGLOB: the first wheel folder with include/HEADER and a lib/LIBGLOB.
find_wheel() {
  local d
  for d in "${wheel_dirs[@]}"; do
    [[ -f "$d/include/$1" ]] && lib_dir "$d" "$2" >/dev/null && { echo "$d"; return 0; }
  done
  return 1
}

nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=/usr/local/cuda
[[ -x "$nvcc" ]] && cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")

# The NCCL_HOSTID probe and the two-process runs: two ranks on this machine's one GPU, each
# claiming a host of its own, so that NCCL connects them over sockets on loopback.
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
# shellcheck disable=SC2054  # INIT,NET is one value
two_rank_env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO
              NCCL_DEBUG_SUBSYS=INIT,NET)

if [[ "$mode" == bundle ]]; then
  # Unpacked on every call (a second call may find a fresh machine); never into OUTDIR.
  unpack_dir=$(mktemp -d "${TMPDIR:-/tmp}/scalescope-bundle.XXXXXX")
  trap 'rm -rf "$unpack_dir"' EXIT
  tar -xzf "$bundle_file" -C "$unpack_dir" || { echo "gpu-check: cannot unpack $bundle_file" >&2; exit 2; }
  bundle_root="$unpack_dir/scalescope-bundle"
  [[ -f "$bundle_root/manifest.txt" ]] || { echo "gpu-check: $bundle_file has no scalescope-bundle/manifest.txt" >&2; exit 2; }
  bin="$bundle_root/bin/scalescope"
  tests_dir="$bundle_root/tests"
  probe="$bundle_root/bin/nccl_hostid_probe"
  bench_dir="$bundle_root/bench"
  mpirun="$bundle_root/bin/mpirun"
  [[ -x "$mpirun" ]] || mpirun=""
  # The NVIDIA libraries the manifest names (the driver's libcuda excepted): each from the
  # first of LD_LIBRARY_PATH, the wheels, the toolkit, the loader's cache that has it.
  read -ra vendor_libs <<<"$(sed -n 's/^nvidia libraries[^:]*: //p' "$bundle_root/manifest.txt")"
  search=()
  IFS=: read -ra ld_dirs <<<"${LD_LIBRARY_PATH:-}"
  for d in "${ld_dirs[@]}" "${wheel_dirs[@]/%//lib}" "$cuda_home/lib64" /usr/local/cuda/lib64; do
    [[ -n "$d" && -d "$d" ]] && search+=("$d")
  done
  vendor_path=""
  vendor_missing=()
  vendor_found=()
  for lib in "${vendor_libs[@]}"; do
    [[ "$lib" == libcuda.so* ]] && continue
    found=""
    for d in "${search[@]}"; do
      if [[ -e "$d/$lib" ]]; then found=$d; break; fi
    done
    if [[ -z "$found" ]] && ldconfig -p 2>/dev/null | grep -q " $lib "; then found="(loader cache)"; fi
    if [[ -z "$found" ]]; then
      vendor_missing+=("$lib")
    else
      vendor_found+=("$lib: $found")
      [[ "$found" == "(loader cache)" || ":$vendor_path:" == *":$found:"* ]] || vendor_path+="${vendor_path:+:}$found"
    fi
  done
  export LD_LIBRARY_PATH="$vendor_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  vendor_found_text=$(printf '%s\n' "${vendor_found[@]}")
  vendor_missing_text="${vendor_missing[*]}"
  export bundle_root vendor_found_text vendor_missing_text
else
  # shellcheck source=scripts/gpu-check/build_env.sh
  source "$repo/scripts/gpu-check/build_env.sh"
fi

sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
for s in "$cuda_home/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
         "${wheel_dirs[@]/%//bin/compute-sanitizer}" "${wheel_dirs[@]/%//compute-sanitizer/compute-sanitizer}"; do
  [[ -z "$sanitizer" && -x "$s" ]] && sanitizer=$s
done
printf -v two_rank_env_q '%q ' "${two_rank_env[@]}"
# The binary to compare with: in bundle mode beside the bundle's, whose libraries it then loads
# through its RPATH ($ORIGIN/../lib).
before_bin=$before_file
if [[ -n "$before_file" && "$mode" == bundle ]]; then
  before_bin="$bundle_root/bin/scalescope-before"
  cp "$before_file" "$before_bin" 2>/dev/null || before_bin=$before_file
fi
side_by_side_cases=${GPU_CHECK_CASES:-gpt:preset=small:8:tf32 gpt:preset=small:8:bf16 resnet:depth=50:64:tf32 resnet:depth=50:64:bf16}
ncu=${NCU:-$(command -v ncu || true)}
for n in "$cuda_home/bin/ncu" /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [[ -z "$ncu" && -x "$n" ]] && ncu=$n
done
export before_bin side_by_side_cases ncu
export out repo mode bin tests_dir probe bench_dir mpirun nvcc cuda_home sanitizer two_rank_env_q
export SCALESCOPE_SOURCE_DIR="$repo"  # tests that read the source tree's data files

# ---------------------------------------------------------------------------------------------
# Steps. Each writes its log to OUTDIR; a step's last words, or its note function, say what
# it found.
# shellcheck source=scripts/gpu-check/steps.sh
source "$repo/scripts/gpu-check/steps.sh"
# shellcheck source=scripts/gpu-check/compare_steps.sh
source "$repo/scripts/gpu-check/compare_steps.sh"

# ---------------------------------------------------------------------------------------------

log "$mode mode; logs go to $out (budget ${budget} s)"
run_step env "$out/env.log" note_env step_env
run_step nvidia-smi "$out/nvidia-smi.log" note_nvidia_smi step_nvidia_smi
if [[ "$mode" == build ]]; then
  run_step configure "$out/configure.log" note_configure step_configure
  run_step build "$out/build.log" note_build step_build
else
  run_step bundle "$out/bundle.log" note_bundle step_bundle
fi
run_step main-command "$out/main-command.log" note_main_command step_main_command
run_step resnet50-b128 "$out/resnet50-b128.log" note_run step_resnet50_b128
run_step h2d-overlap "$out/h2d-overlap.log" note_h2d step_h2d_overlap
run_step devices "$out/devices.log" note_devices step_devices
if [[ -z "$before_file" ]]; then
  record_skip side-by-side "GPU_CHECK_BEFORE unset (a scalescope binary of the commit to compare with)"
elif wanted side-by-side && [[ ! -x "$before_file" ]]; then
  record "side-by-side" 1 0 "GPU_CHECK_BEFORE: no executable $before_file"
  failures=$((failures + 1))
else
  run_step side-by-side "$out/side-by-side.log" note_side_by_side step_side_by_side
fi
run_step profile-layers "$out/profile-layers.log" note_profile_layers step_profile_layers
run_step conv-search "$out/conv-search.log" note_conv_search step_conv_search
run_step memory-plan "$out/memory-plan.log" note_memory_plan step_memory_plan
run_step gpt-profile "$out/gpt-profile.log" note_gpt_profile step_gpt_profile
if [[ -z "$ncu" ]]; then
  record_skip kernels "no Nsight Compute (ncu on PATH, in the toolkit, or NCU)"
else
  run_step kernels "$out/kernels.log" note_kernels step_kernels
fi
if wanted head-copies && ! python3 -c 'import torch, cupy' >/dev/null 2>&1; then
  record_skip head-copies "python3 has no torch or no cupy"
else
  run_step head-copies "$out/head-copies.log" note_head_copies step_head_copies
fi
if wanted compare-16bit && ! python3 -c 'import torch' >/dev/null 2>&1; then
  record_skip compare-16bit "python3 has no torch"
else
  run_step compare-16bit "$out/compare-16bit.log" note_compare_16bit step_compare_16bit
fi
for tool in memcheck racecheck; do
  if [[ -z "$sanitizer" ]]; then
    record_skip "sanitizer-$tool" "no compute-sanitizer (PATH, the toolkit, the wheels; or set COMPUTE_SANITIZER)"
  else
    run_step "sanitizer-$tool" "$out/sanitizer-$tool.log" note_sanitizer step_sanitizer "$tool"
  fi
done
run_step nccl_hostid "$out/nccl_hostid.log" note_verdict step_nccl_hostid
skip_two=$(two_rank_skip_reason)
for s in train collectives abort; do
  fn=note_2proc
  [[ $s == abort ]] && fn=note_abort
  if [[ -n "$skip_two" ]]; then
    record_skip "nccl-2proc-$s" "$skip_two"
  else
    run_step "nccl-2proc-$s" "$out/nccl-2proc-$s.log" "$fn" "step_nccl_2proc_$s"
  fi
done
run_step test_models_cuda "$out/test_models_cuda.log" note_gtest gtest test_models '*Cuda*' test_models_cuda
run_step test_core_cuda "$out/test_core_cuda.log" note_gtest gtest test_core '*Cuda*' test_core_cuda
run_step test_harness_gpu "$out/test_harness_gpu.log" note_gtest \
  gtest test_harness '*Nccl*:*Nvml*:*GpuTrainer*/cuda' test_harness_gpu
run_step sweep-gpu "$out/sweep-gpu.log" note_sweep sweep cuda:1 sweep-gpu
run_step sweep-cpu "$out/sweep-cpu.log" note_sweep sweep cpu:1 sweep-cpu
# bench/compare_pytorch.py --device cuda: scalescope's single-GPU step beside PyTorch's.
if wanted compare-pytorch && ! python3 -c 'import torch' >/dev/null 2>&1; then
  record_skip compare-pytorch "python3 has no torch"
else
  run_step compare-pytorch "$out/compare_pytorch.log" - step_compare_pytorch
fi
if [[ "$mode" == build ]]; then
  # ctest stops starting tests when its limit (or the budget, less a margin) comes.
  ctest_end=$(($(date +%s) + $(step_field ctest 2)))
  ((ctest_end > t_end - 20)) && ctest_end=$((t_end - 20))
  run_step ctest "$out/ctest.log" note_ctest step_ctest "$ctest_end"
fi
run_step nccl_hostid_control "$out/nccl_hostid_control.log" note_verdict step_nccl_hostid_control

# ---------------------------------------------------------------------------------------------

for f in "${failed_logs[@]}"; do
  echo
  echo "---- last lines of $f"
  tail -n 15 "$f"
done
if [[ -n "$tarball" ]]; then
  mkdir -p "$(dirname "$tarball")"
  tar -czf "$tarball" -C "$(dirname "$out")" "$(basename "$out")" && log "packed $out into $tarball ($(du -h "$tarball" | cut -f1))"
fi
echo
echo "==== summary ($summary)"
cat "$summary"
echo
log "logs are in $out; $failures step(s) failed"
((failures == 0))
