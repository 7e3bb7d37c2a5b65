#!/usr/bin/env bash
# Usage: scripts/gpu-check.sh OUTDIR [--steps LIST] [--tar FILE] [--dry-run]
#
# Runs ON A GPU MACHINE whose image has nvcc, CMake, ninja and python3 with the nvidia-cudnn
# and nvidia-nccl wheels, but none of Debian's -dev packages, no apt and no network. Builds
# scalescope with CUDA into build-gpu, runs the GPU tests, short GPU and CPU sweeps, the
# PyTorch comparison, a probe of NCCL_HOSTID and the whole ctest suite, and writes every log to
# OUTDIR. The Debian libraries come unpacked from scripts/gpu-deps.sh (run on a Debian 12
# machine beforehand; carry third_party/gpu-debs).
#
#   --steps LIST  run only these steps (comma-separated names from the list below)
#   --tar FILE    also pack OUTDIR into FILE (.tar.gz): one file to fetch instead of many
#   --dry-run     print the steps in order with their time limits, and exit
#
# Steps, in order (what matters most first, so that one ten-minute call gets it):
#   env nvidia-smi configure build devices test_models_cuda test_core_cuda
#   test_harness_gpu sweep-gpu sweep-cpu compare-pytorch ctest nccl_hostid nccl_hostid_control
# The NCCL_HOSTID probe and its control come last and are informational: their result is
# recorded, but it cannot make the script fail.
# Resumable: a step that passed in OUTDIR (OUTDIR/done.txt) is not run again, so a second call
# with the same OUTDIR continues where the first stopped, with a budget of its own.
#
# Environment (all optional):
#   GPU_DEPS_ROOT      the unpacked debs (default third_party/gpu-debs/root)
#   CUDNN_ROOT, NCCL_ROOT  folders with include/ and lib/ (default: found in python3's
#                      site-packages, nvidia/cudnn and nvidia/nccl)
#   BUILD_DIR          default build-gpu
#   CUDACXX            nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   GPU_CHECK_BUDGET_S seconds for the whole run (default 570: one 600 s device call); a step
#                      never runs past it, and steps that find no time left are recorded as such
#   GPU_CHECK_WERROR   ON to keep -Werror (default OFF: another compiler's new warnings must not
#                      stop a check of the GPU code; warnings are counted in the summary)
#
# Never stops at a failed step. OUTDIR/summary.txt has one line per step: name, exit status
# ("skip" when deliberately not run, "notime" when the budget ran out), seconds, a note.
# Exit status: 0 when every step that ran passed, 1 otherwise, 2 on a usage error.

set -uo pipefail

usage() {  # [exit status, default 2]
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
  exit "${1:-2}"
}
# name|seconds at most|required or informational (an informational step cannot fail the run)
step_table=(
  "env|60|required"
  "nvidia-smi|30|required"
  "configure|180|required"
  "build|480|required"
  "devices|60|required"
  "test_models_cuda|300|required"
  "test_core_cuda|300|required"
  "test_harness_gpu|300|required"
  "sweep-gpu|240|required"
  "sweep-cpu|240|required"
  "compare-pytorch|300|required"
  "ctest|300|required"
  "nccl_hostid|240|informational"
  "nccl_hostid_control|120|informational"
)
all_steps=","
for row in "${step_table[@]}"; do all_steps+="${row%%|*},"; done

out=""
only_steps=""
tarball=""
dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) [[ $# -ge 2 ]] || usage; only_steps=",$2,"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --tar) [[ $# -ge 2 ]] || usage; tarball=$(realpath -m "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu-check: unknown option $1" >&2; usage ;;
    *) [[ -z "$out" ]] || usage; out=$(realpath -m "$1"); shift ;;
  esac
done
[[ -n "$out" || $dry_run == 1 ]] || usage
if [[ -n "$only_steps" ]]; then
  IFS=, read -ra chosen <<<"$only_steps"
  for s in "${chosen[@]}"; do
    [[ -z "$s" || "$all_steps" == *",$s,"* ]] || { echo "gpu-check: unknown step '$s'" >&2; usage; }
  done
fi

wanted() { [[ -z "$only_steps" || "$only_steps" == *",$1,"* ]]; }
if ((dry_run)); then
  printf '%-22s %9s  %s\n' step "at most" kind
  for row in "${step_table[@]}"; do
    IFS='|' read -r name limit kind <<<"$row"
    wanted "$name" || continue
    printf '%-22s %7s s  %s\n' "$name" "$limit" "$kind"
  done
  exit 0
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
mkdir -p "$out" || exit 2
summary="$out/summary.txt"
done_file="$out/done.txt"
touch "$done_file"
[[ -s "$summary" ]] || printf '# %-24s %-6s %8s  %s\n' step status seconds note >"$summary"

t_start=$(date +%s)
budget=${GPU_CHECK_BUDGET_S:-570}
t_end=$((t_start + budget))
failures=0
failed_logs=()

log() { echo "[gpu-check $(date +%H:%M:%S)] $*"; }

record() {  # name status seconds note
  printf '%-26s %-6s %8s  %s\n' "$1" "$2" "$3" "$4" >>"$summary"
}

# run_step NAME LOG LIMIT_S NOTE_FUNCTION COMMAND...: runs COMMAND (a program or an exported
# function) under timeout(1), output to LOG, and records the result. NOTE_FUNCTION (or "-")
# is called with LOG to make the note.
run_step() {
  local name=$1 logfile=$2 limit=$3 note_fn=$4
  shift 4
  wanted "$name" || return 0
  if grep -qx "$name" "$done_file"; then
    log "$name: passed in an earlier call (OUTDIR/done.txt)"
    return 0
  fi
  local informational=0
  [[ "$(step_kind "$name")" == informational ]] && informational=1
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
  timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" </dev/null >"$logfile" 2>&1
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

step_kind() {  # name -> required | informational
  local row
  for row in "${step_table[@]}"; do
    [[ "${row%%|*}" == "$1" ]] && { echo "${row##*|}"; return; }
  done
}
step_limit() {  # name -> seconds
  local row name limit
  for row in "${step_table[@]}"; do
    IFS='|' read -r name limit _ <<<"$row"
    [[ "$name" == "$1" ]] && { echo "$limit"; return; }
  done
}

record_skip() {  # name note
  wanted "$1" || return 0
  record "$1" skip 0 "$2"
  log "$1: skipped ($2)"
}

# ---------------------------------------------------------------------------------------------
# Where everything is.

deps_root=$(realpath -m "${GPU_DEPS_ROOT:-third_party/gpu-debs/root}")
build_dir=$(realpath -m "${BUILD_DIR:-build-gpu}")
shim="$build_dir/gpu-check-shim"
mkdir -p "$shim"

nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")

# find_wheel HEADER LIBGLOB: the first folder nvidia/* on python3's path that has
# include/HEADER and lib/LIBGLOB (nvidia/cudnn, nvidia/nccl, nvidia/cu13, ...).
find_wheel() {
  python3 - "$1" "$2" <<'EOF'
import glob, os, site, sys
header, libglob = sys.argv[1:]
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
        if os.path.isfile(os.path.join(d, "include", header)) and glob.glob(os.path.join(d, "lib", libglob)):
            print(d)
            sys.exit(0)
sys.exit(1)
EOF
}

# lib_dir ROOT LIBGLOB: ROOT/lib or ROOT/lib64, whichever holds LIBGLOB.
lib_dir() {
  local d
  for d in "$1/lib" "$1/lib64"; do
    if compgen -G "$d/$2" >/dev/null; then echo "$d"; return 0; fi
  done
  return 1
}

cudnn_root=${CUDNN_ROOT:-$(find_wheel cudnn_version.h 'libcudnn.so*' || true)}
nccl_root=${NCCL_ROOT:-$(find_wheel nccl.h 'libnccl.so*' || true)}
cudnn_lib=""
nccl_lib=""
[[ -n "$cudnn_root" ]] && cudnn_lib=$(lib_dir "$cudnn_root" 'libcudnn.so*')
[[ -n "$nccl_root" ]] && nccl_lib=$(lib_dir "$nccl_root" 'libnccl.so*')

# The probe links with -lnccl: an unversioned link where the wheel has only libnccl.so.2.
if [[ -n "$nccl_lib" ]]; then
  nccl_so=$(compgen -G "$nccl_lib/libnccl.so*" | sort | head -1)
  ln -sfn "$nccl_so" "$shim/libnccl.so"
fi

# zlib: the headers come from the debs, the library is the image's own libz.so.1.
zlib_so=$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
for f in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 /usr/lib64/libz.so.1; do
  [[ -n "$zlib_so" ]] && break
  [[ -e "$f" ]] && zlib_so=$f
done
[[ -n "$zlib_so" ]] && ln -sfn "$zlib_so" "$shim/libz.so"

# CMake package folders inside the debs (found, not assumed: the multiarch path may differ).
cfg_dir() {
  local f
  f=$(find "$deps_root" -name "$1" -print -quit 2>/dev/null)
  [[ -n "$f" ]] && dirname "$f"
}

deps_libs="$deps_root/usr/lib/x86_64-linux-gnu:$deps_root/usr/lib"
cmake_args=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DSCALESCOPE_WITH_CUDA=ON
  -DSCALESCOPE_WITH_MPI=OFF
  -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_CUDA_COMPILER="$nvcc"
  -DSCALESCOPE_WERROR="${GPU_CHECK_WERROR:-OFF}"
  -DCMAKE_PREFIX_PATH="$deps_root/usr"
  -DCMAKE_INCLUDE_PATH="$deps_root/usr/include"
  -DCMAKE_LIBRARY_PATH="$deps_root/usr/lib/x86_64-linux-gnu;$deps_root/usr/lib"
  -Ddnnl_DIR="$(cfg_dir dnnl-config.cmake)"
  -DGloo_DIR="$(cfg_dir GlooConfig.cmake)"
  -Dfmt_DIR="$(cfg_dir fmt-config.cmake)"
  -DCLI11_DIR="$(cfg_dir CLI11Config.cmake)"
  -Dnlohmann_json_DIR="$(cfg_dir nlohmann_jsonConfig.cmake)"
  -DGTest_DIR="$(cfg_dir GTestConfig.cmake)"
  -Dbenchmark_DIR="$(cfg_dir benchmarkConfig.cmake)"
  -DOpenCL_INCLUDE_DIR="$deps_root/usr/include"
  -DOpenCL_LIBRARY="$deps_root/usr/lib/x86_64-linux-gnu/libOpenCL.so"
  -DZLIB_INCLUDE_DIR="$deps_root/usr/include"
  -DZLIB_LIBRARY="$shim/libz.so"
  -DCUDNN_ROOT="$cudnn_root"
  -DNCCL_ROOT="$nccl_root"
  # libgloo.so.0 and libdnnl.so.2 need libraries that only the debs have; the linker must
  # find them too, not just the loader.
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$deps_libs"
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$deps_libs"
  -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$deps_libs"
  # CMake 4 refuses configs that ask for policies older than 3.5; 3.x ignores this.
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5
)

ld_path="$deps_libs"
[[ -n "$cudnn_lib" ]] && ld_path="$ld_path:$cudnn_lib"
[[ -n "$nccl_lib" ]] && ld_path="$ld_path:$nccl_lib"

# cuBLAS normally comes with the toolkit. If this toolkit lacks it, take it from python3's
# CUDA wheels (nvidia/cu13 or similar) rather than fail.
cublas_note="cuBLAS from the toolkit ($cuda_home)"
if [[ ! -f "$cuda_home/include/cublas_v2.h" ]] || ! compgen -G "$cuda_home/lib*/libcublas.so*" >/dev/null; then
  cublas_root=$(find_wheel cublas_v2.h 'libcublas.so*' || true)
  if [[ -n "$cublas_root" ]]; then
    cublas_lib=$(lib_dir "$cublas_root" 'libcublas.so*')
    ln -sfn "$(compgen -G "$cublas_lib/libcublas.so.*" | sort | head -1)" "$shim/libcublas.so"
    ln -sfn "$(compgen -G "$cublas_lib/libcublasLt.so.*" | sort | head -1)" "$shim/libcublasLt.so"
    cmake_args+=(-DCUDA_cublas_LIBRARY="$shim/libcublas.so" -DCUDA_cublasLt_LIBRARY="$shim/libcublasLt.so"
                 -DCMAKE_CXX_FLAGS="-isystem $cublas_root/include" -DCMAKE_CUDA_FLAGS="-isystem $cublas_root/include")
    ld_path="$ld_path:$cublas_lib"
    cublas_note="cuBLAS from the wheel $cublas_root (the toolkit at $cuda_home has none)"
  else
    cublas_note="no cuBLAS in $cuda_home nor in python3's wheels: configure will fail"
  fi
fi
export LD_LIBRARY_PATH="$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The debs put libibverbs on that path (libgloo.so.0 loads it). NCCL would then probe it for
# InfiniBand, which this one-GPU machine does not have, and libibverbs warns on stderr about
# its missing provider configuration: say up front that there is no IB.
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}

bin="$build_dir/scalescope"
probe="$build_dir/nccl_hostid_probe"
export out repo build_dir bin probe nvcc nccl_root nccl_lib shim cuda_home deps_root

# ---------------------------------------------------------------------------------------------
# Steps.

step_env() {
  echo "== date"; date -u
  echo "== host"; uname -a; grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null
  echo "cores: $(nproc)"; free -g 2>/dev/null | head -2
  echo "== tools"
  "$nvcc" --version | tail -2
  cmake --version | head -1
  echo "ninja $(ninja --version)"
  "${CXX:-c++}" --version | head -1
  ldd --version | head -1
  echo "python3: $(command -v python3) $(python3 --version 2>&1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
  echo "== paths"
  echo "repo:        $repo"
  echo "build dir:   $build_dir"
  echo "debs:        $deps_root"
  echo "cuDNN root:  ${cudnn_root:-NOT FOUND}  (lib: ${cudnn_lib:-NOT FOUND})"
  echo "NCCL root:   ${nccl_root:-NOT FOUND}  (lib: ${nccl_lib:-NOT FOUND})"
  echo "CUDA home:   $cuda_home; $cublas_note"
  echo "zlib:        ${zlib_so:-NOT FOUND}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "NCCL_IB_DISABLE=$NCCL_IB_DISABLE"
  for h in "$cudnn_root/include/cudnn_version.h" "$nccl_root/include/nccl.h"; do
    [[ -f "$h" ]] && echo "$(basename "$h"): $(grep -E '^#define (CUDNN|NCCL)_(MAJOR|MINOR|PATCH(LEVEL)?) ' "$h" | awk '{print $3}' | paste -sd. -)"
  done
  echo "== CMake arguments: $cmake_args_q"
  echo "== debs"
  if [[ -f "$deps_root/gpu-debs.manifest" ]]; then
    cat "$deps_root/gpu-debs.manifest"
  else
    echo "MISSING: $deps_root/gpu-debs.manifest -- run scripts/gpu-deps.sh on the Debian machine and carry third_party/gpu-debs"
    return 1
  fi
  [[ -n "$cudnn_root" && -n "$cudnn_lib" && -n "$nccl_root" && -n "$nccl_lib" ]]
}
note_env() { grep -m1 -E 'MISSING|NOT FOUND|no cuBLAS' "$1" || true; }

step_nvidia_smi() { nvidia-smi && nvidia-smi -L; }
note_nvidia_smi() { grep -m1 -E '^GPU 0' "$1" || true; }

# The NCCL_HOSTID probe: built with nvcc against the wheel's NCCL, run under timeout.
step_nccl_hostid() {
  mkdir -p "$build_dir"
  echo "== build: $nvcc -std=c++17 -O2 scripts/nccl_hostid_probe.cpp"
  "$nvcc" -std=c++17 -O2 scripts/nccl_hostid_probe.cpp -I"$nccl_root/include" -L"$shim" -lnccl \
    -Xlinker -rpath -Xlinker "$nccl_lib" -o "$probe" || return 1
  echo "== run"
  timeout --kill-after=5 180 "$probe" --timeout 60
}
step_nccl_hostid_control() {
  [[ -x "$probe" ]] || { echo "no $probe (the nccl_hostid step builds it)"; return 1; }
  # The control is expected to fail (NCCL refuses two ranks on one GPU of one host); the step
  # passes when the probe reached a verdict either way.
  local output
  output=$(timeout --kill-after=5 100 "$probe" --timeout 20 --same-host 2>&1)
  echo "$output"
  grep -qE 'two-rank on one GPU: (WORKS|FAILS)' <<<"$output"
}
note_verdict() { grep -m1 -E 'two-rank on one GPU: (WORKS|FAILS)' "$1" || echo "no verdict line"; }

note_configure() { grep -m1 -E 'CMake Error|scalescope: CUDA=' "$1" || true; }

# -k 0: build everything that can be built, so one broken target does not hide the rest.
step_build() { cmake --build "$build_dir" -j "$(nproc)" -- -k 0; }
note_build() {
  echo "$(grep -c 'warning:' "$1") warning lines, $(grep -c 'error:' "$1") error lines, $(grep -c '^FAILED:' "$1") failed targets"
}

step_devices() { "$bin" devices && "$bin" devices --json >"$out/devices.json"; }

gtest() {  # binary filter name
  "$build_dir/tests/$1" --gtest_filter="$2" --gtest_output="json:$out/$3.json"
}
note_gtest() {  # from the JSON beside the log
  python3 - "${1%.log}.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
tests = [t for s in d.get("testsuites", []) for t in s.get("testsuite", [])]
skipped = sum(1 for t in tests if t.get("result") == "SKIPPED")
failed = sum(1 for t in tests if t.get("failures"))
print(f"{len(tests)} tests, {failed} failed, {skipped} skipped" + ("  <- NO TESTS RAN" if not tests else ""))
EOF
}

sweep() {  # devices json-name
  "$bin" sweep --devices "$1" --models cifar-cnn,mlp:scale=0.1 --batch 64 --repeats 2 --steps 20 \
    -o "$out/$2.json"
}
note_sweep() {
  local json="${1%.log}.json"
  if [[ -s "$json" ]]; then echo "report $(basename "$json")"; else echo "no report written"; fi
}

step_compare_pytorch() { python3 bench/compare_pytorch.py --device cuda --binary "$bin" --rounds 1; }

step_ctest() {  # STOP_EPOCH: ctest starts no test after it
  ctest --test-dir "$build_dir" --output-on-failure --no-tests=error --timeout 300 \
    --stop-time "$(date -d "@$1" +%H:%M:%S)" --output-junit "$out/ctest-junit.xml"
}
note_ctest() { grep -m1 -E 'tests passed|No tests were found' "$1" || echo "no ctest summary line"; }

# Steps run in child shells (under timeout), which see exported functions and variables but no
# arrays: the CMake arguments travel as one quoted string.
printf -v cmake_args_q '%q ' "${cmake_args[@]}"
step_configure() { eval "cmake -S \"\$repo\" -B \"\$build_dir\" $cmake_args_q"; }
export -f step_env step_nvidia_smi step_nccl_hostid step_nccl_hostid_control step_configure \
  step_build step_devices gtest sweep step_compare_pytorch step_ctest
export cmake_args_q cudnn_root cudnn_lib zlib_so cublas_note

# ---------------------------------------------------------------------------------------------

log "logs go to $out (budget ${budget} s)"
run_step env "$out/env.log" "$(step_limit env)" note_env step_env
run_step nvidia-smi "$out/nvidia-smi.log" "$(step_limit nvidia-smi)" note_nvidia_smi step_nvidia_smi
run_step configure "$out/configure.log" "$(step_limit configure)" note_configure step_configure
run_step build "$out/build.log" "$(step_limit build)" note_build step_build
run_step devices "$out/devices.log" "$(step_limit devices)" - step_devices
run_step test_models_cuda "$out/test_models_cuda.log" "$(step_limit test_models_cuda)" note_gtest \
  gtest test_models '*Cuda*' test_models_cuda
run_step test_core_cuda "$out/test_core_cuda.log" "$(step_limit test_core_cuda)" note_gtest \
  gtest test_core '*Cuda*' test_core_cuda
run_step test_harness_gpu "$out/test_harness_gpu.log" "$(step_limit test_harness_gpu)" note_gtest \
  gtest test_harness '*Nccl*:*Nvml*:*GpuTrainer*/cuda' test_harness_gpu
run_step sweep-gpu "$out/sweep-gpu.log" "$(step_limit sweep-gpu)" note_sweep sweep cuda:1 sweep-gpu
run_step sweep-cpu "$out/sweep-cpu.log" "$(step_limit sweep-cpu)" note_sweep sweep cpu:1 sweep-cpu
# bench/compare_pytorch.py --device cuda: scalescope's single-GPU step beside PyTorch's.
if wanted compare-pytorch && ! python3 -c 'import torch' >/dev/null 2>&1; then
  record_skip compare-pytorch "python3 has no torch"
else
  run_step compare-pytorch "$out/compare_pytorch.log" "$(step_limit compare-pytorch)" - \
    step_compare_pytorch
fi
# ctest stops starting tests when its limit (or the budget, less a margin) comes.
ctest_end=$(($(date +%s) + $(step_limit ctest)))
((ctest_end > t_end - 20)) && ctest_end=$((t_end - 20))
run_step ctest "$out/ctest.log" "$(step_limit ctest)" note_ctest step_ctest "$ctest_end"
run_step nccl_hostid "$out/nccl_hostid.log" "$(step_limit nccl_hostid)" note_verdict \
  step_nccl_hostid
run_step nccl_hostid_control "$out/nccl_hostid_control.log" "$(step_limit nccl_hostid_control)" \
  note_verdict step_nccl_hostid_control

# ---------------------------------------------------------------------------------------------

for f in "${failed_logs[@]}"; do
  echo
  echo "---- last lines of $f"
  tail -n 15 "$f"
done
if [[ -n "$tarball" ]]; then
  mkdir -p "$(dirname "$tarball")"
  tar -czf "$tarball" -C "$(dirname "$out")" "$(basename "$out")" && log "packed $out into $tarball"
fi
echo
echo "==== summary ($summary)"
cat "$summary"
echo
log "logs are in $out; $failures step(s) failed"
((failures == 0))
