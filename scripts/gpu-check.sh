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

# Reads a compute-sanitizer log; prints "TOOL: N errors of ours ..." and exits 1 when there is
# one, or when the log has no summary (the sanitizer did not finish). API errors whose host
# backtrace runs through libnccl are NCCL's own (it probes kernel images and attributes at
# init, expecting some calls to fail) and are counted apart; racecheck's warnings are shown,
# not counted.
summarize_sanitizer() {
  python3 - "$1" <<'EOF'
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
records, current = [], None
for line in lines:
    if not line.startswith("========="):
        continue
    body = line[len("========="):]
    if not body.strip():
        current = None
    elif body.startswith(" ") and not body.startswith("  "):
        current = [body.strip()]
        records.append(current)
    elif current is not None:
        current.append(body.strip())
tool = "memcheck"
ours, nccl, warnings, summary = [], 0, 0, None
for r in records:
    head = r[0]
    if head.startswith("COMPUTE-SANITIZER"):
        continue
    m = re.match(r"(ERROR|RACECHECK) SUMMARY: (.*)", head)
    if m:
        if m.group(1) == "RACECHECK":
            tool = "racecheck"
        summary = (summary + "; " if summary else "") + head
        continue
    if head.startswith(("LEAK SUMMARY", "Target application returned", "This application")):
        continue
    if head.startswith("Warning:"):
        warnings += 1
        continue
    if "on CUDA API call to" in head and any("libnccl" in x for x in r if "Host Frame" in x):
        nccl += 1
        continue
    ours.append(head)
if summary is None:
    print(f"{tool}: no summary in the log: the sanitizer did not finish")
    sys.exit(1)
note = f"{tool}: {len(ours)} errors of ours"
if nccl:
    note += f", {nccl} API errors inside NCCL not counted (host backtrace in libnccl)"
if warnings:
    note += f", {warnings} warnings"
note += f" [{summary}]"
if ours:
    note += f"; first: {ours[0][:160]}"
print(note)
sys.exit(1 if ours else 0)
EOF
}

# name|seconds at most|required or informational|build, bundle or both (the modes it runs in)
step_table=(
  "env|60|required|both"
  "nvidia-smi|30|required|both"
  "configure|180|required|build"
  "build|480|required|build"
  "bundle|60|required|bundle"
  "main-command|75|required|both"
  "resnet50-b128|120|required|both"
  "h2d-overlap|90|required|both"
  "devices|60|required|both"
  "sanitizer-memcheck|150|required|both"
  "sanitizer-racecheck|150|required|both"
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

record() {  # name status seconds note
  printf '%-28s %-6s %8s  %s\n' "$1" "$2" "$3" "$4" >>"$summary"
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
  deps_root=$(realpath -m "${GPU_DEPS_ROOT:-third_party/gpu-debs/root}")
  build_dir=$(realpath -m "${BUILD_DIR:-build-gpu}")
  shim="$build_dir/gpu-check-shim"
  mkdir -p "$shim"
  bin="$build_dir/scalescope"
  tests_dir="$build_dir/tests"
  probe="$build_dir/nccl_hostid_probe"
  bench_dir="$repo/bench"
  mpirun=""  # this build is configured without MPI: the bundle carries Open MPI instead

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
  # Steps run in child shells (under timeout), which see exported functions and variables but
  # no arrays: the CMake arguments travel as one quoted string.
  printf -v cmake_args_q '%q ' "${cmake_args[@]}"
  export build_dir nccl_root nccl_lib shim deps_root cmake_args_q cudnn_root cudnn_lib zlib_so \
    cublas_note
fi

sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
for s in "$cuda_home/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
         "${wheel_dirs[@]/%//bin/compute-sanitizer}" "${wheel_dirs[@]/%//compute-sanitizer/compute-sanitizer}"; do
  [[ -z "$sanitizer" && -x "$s" ]] && sanitizer=$s
done
printf -v two_rank_env_q '%q ' "${two_rank_env[@]}"
export out repo mode bin tests_dir probe bench_dir mpirun nvcc cuda_home sanitizer two_rank_env_q
export SCALESCOPE_SOURCE_DIR="$repo"  # tests that read the source tree's data files

# ---------------------------------------------------------------------------------------------
# Steps. Each writes its log to OUTDIR; a step's last words, or its note function, say what
# it found.

step_env() {
  echo "== date"; date -u
  echo "== host"; uname -a; grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null
  echo "cores: $(nproc)"; free -g 2>/dev/null | head -2
  echo "== tools"
  [[ -x "$nvcc" ]] && "$nvcc" --version | tail -2
  command -v cmake >/dev/null && cmake --version | head -1
  command -v ninja >/dev/null && echo "ninja $(ninja --version)"
  ldd --version | head -1
  echo "compute-sanitizer: ${sanitizer:-none found}"
  echo "python3: $(command -v python3) $(python3 --version 2>&1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "NCCL_IB_DISABLE=$NCCL_IB_DISABLE"
  if [[ "$mode" == bundle ]]; then
    echo "== bundle ($bundle_root)"
    cat "$bundle_root/manifest.txt"
    return 0
  fi
  echo "== paths"
  echo "repo:        $repo"
  echo "build dir:   $build_dir"
  echo "debs:        $deps_root"
  echo "cuDNN root:  ${cudnn_root:-NOT FOUND}  (lib: ${cudnn_lib:-NOT FOUND})"
  echo "NCCL root:   ${nccl_root:-NOT FOUND}  (lib: ${nccl_lib:-NOT FOUND})"
  echo "CUDA home:   $cuda_home; $cublas_note"
  echo "zlib:        ${zlib_so:-NOT FOUND}"
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
note_env() { grep -m1 -E 'MISSING|NOT FOUND|no cuBLAS' "$1" || grep -m1 '^commit:' "$1" || true; }

step_nvidia_smi() { nvidia-smi && nvidia-smi -L; }
note_nvidia_smi() { grep -m1 -E '^GPU 0' "$1" || true; }

# The bundle's binaries find every library: theirs inside it, NVIDIA's on this machine.
step_bundle() {
  echo "== NVIDIA libraries the bundle expects from this machine"
  echo "$vendor_found_text"
  [[ -z "$vendor_missing_text" ]] || echo "MISSING: $vendor_missing_text (install the nvidia-* wheels, or put their lib folders on LD_LIBRARY_PATH)"
  local f libs missing=0
  for f in "$bin" "$tests_dir"/* "$probe"; do
    [[ -x "$f" ]] || continue
    echo "== ldd ${f#"$bundle_root"/}"
    libs=$(ldd "$f" 2>&1)
    echo "$libs"
    grep -q 'not found' <<<"$libs" && missing=1
  done
  "$bin" --version 2>&1 | head -3
  [[ -z "$vendor_missing_text" ]] && ((missing == 0))
}
note_bundle() {
  local m="$bundle_root/manifest.txt"
  echo "$(sed -n 's/^commit: \([0-9a-f]\{10\}\).*/\1/p' "$m"), dirty: $(sed -n 's/^dirty: \([a-z]*\).*/\1/p' "$m"), archs $(sed -n 's/^cuda architectures: //p' "$m")$(grep -m1 -o 'MISSING: [^(]*' "$1" | sed 's/^/; /')$(grep -m1 -o '[^ ]* => not found' "$1" | sed 's/^/; /')"
}

# README's main command, as README writes it (the first `build/scalescope sweep` in it), with
# this check's binary; stopped by SIGINT after a while, since what is asked is whether it
# chose the GPUs, which it says first. Run in a folder of its own: it writes its report there.
step_main_command() {
  local line args
  line=$(grep -m1 -oE 'build/scalescope sweep[^#`]*' "$repo/README.md" | sed 's/[[:space:]]*$//')
  [[ -n "$line" ]] || { echo "README.md has no 'build/scalescope sweep' command"; return 1; }
  read -ra args <<<"${line#build/scalescope}"
  mkdir -p "$out/main-command" && cd "$out/main-command" || return 1
  local run_s=$((STEP_LIMIT > 45 ? STEP_LIMIT - 25 : 20))
  echo "README: $line"
  echo "runs:   $bin ${args[*]}   (in $PWD, stopped by SIGINT after $run_s s)"
  echo "----"
  timeout -s INT --kill-after=15 "$run_s" "$bin" "${args[@]}" 2>&1 | tee "$out/main-command/output.txt"
  local rc=${PIPESTATUS[0]}
  echo "---- exit status $rc (130: stopped by SIGINT as planned)"
  ((rc == 0 || rc == 130)) || return 1
  # A sweep on GPUs names cuda devices before its first table.
  head -30 "$out/main-command/output.txt" | grep -q 'cuda:[0-9]' ||
    { echo "NO GPU CHOSEN: no cuda device named in its first lines"; return 1; }
}
note_main_command() {
  grep -m1 'NO GPU CHOSEN' "$1" || sed -n '/^----$/{n;p;q}' "$1" | cut -c1-200
}

# One GPU, ResNet-50 at 128 images: refused before by a fixed workspace limit.
step_resnet50_b128() {
  "$bin" train --devices cuda:1 --model resnet:depth=50 --batch 128 --steps 12 --no-eval \
    -o "$out/resnet50-b128.json"
}
# What the run said about workspace and determinism, and its speed.
note_run() {
  local json="${1%.log}.json"
  local said
  said=$(grep -m1 -iE 'workspace|determinis' "$1" | cut -c1-140)
  if [[ -s "$json" ]]; then
    python3 - "$json" "$said" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("summary", {})
fields = [f"{k} {s[k]:.1f}" for k in ("samples_per_s", "step_ms_median") if isinstance(s.get(k), (int, float))]
print("; ".join(fields + ([sys.argv[2]] if sys.argv[2] else [])))
EOF
  else
    echo "no report; $(grep -m1 -iE 'error' "$1" | cut -c1-200)"
  fi
}

# ResNet-50 at 64 images, host synthetic data: how much of the copy the step waited for.
step_h2d_overlap() {
  "$bin" train --devices cuda:1 --model resnet:depth=50 --batch 64 --steps 30 --no-eval \
    --data synthetic -o "$out/h2d-overlap.json" || return 1
  python3 - "$out/h2d-overlap.json" <<'EOF'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
s = r.get("summary", {})
print("summary:", json.dumps({k: v for k, v in s.items() if "h2d" in k or "input" in k or k.startswith("step_ms")}))
# Every per-step field that names the copy, as medians over the measured steps.
steps = r.get("steps", [])[r.get("warmup_steps", 0):]
keys = sorted({k for st in steps for k in st if "h2d" in k or k in ("step_ms", "input_ms")})
med = {k: statistics.median(st[k] for st in steps if isinstance(st.get(k), (int, float))) for k in keys
       if any(isinstance(st.get(k), (int, float)) for st in steps)}
print("h2d: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()) + f" (medians of {len(steps)} measured steps)")
EOF
}
note_h2d() { grep -m1 '^h2d: ' "$1" || grep -m1 -iE 'error' "$1" | cut -c1-200; }

step_devices() { "$bin" devices && "$bin" devices --json >"$out/devices.json"; }
note_devices() { grep -m1 -iE 'pinned|pageable' "$1" | sed 's/^ *//' | cut -c1-200; }

# compute-sanitizer on a few training steps of one GPU.
step_sanitizer() {  # memcheck | racecheck
  local raw="$out/sanitizer-$1.out"
  "$sanitizer" --tool "$1" --print-limit 100 "$bin" train --devices cuda:1 --model cifar-cnn \
    --steps 3 --no-eval >"$raw" 2>&1
  local rc=$?
  tail -n 40 "$raw"
  echo "---- scalescope under $1: exit status $rc; the whole output is in $(basename "$raw")"
  summarize_sanitizer "$raw" && ((rc == 0))
}
note_sanitizer() { grep -m1 -E '^(memcheck|racecheck): ' "$1" || echo "no summary line"; }

# The NCCL_HOSTID probe: the bundle's binary, or built with nvcc against the wheel's NCCL.
step_nccl_hostid() {
  if [[ "$mode" == build ]]; then
    echo "== build: $nvcc -std=c++17 -O2 scripts/nccl_hostid_probe.cpp"
    "$nvcc" -std=c++17 -O2 scripts/nccl_hostid_probe.cpp -I"$nccl_root/include" -L"$shim" -lnccl \
      -Xlinker -rpath -Xlinker "$nccl_lib" -o "$probe" || return 1
  fi
  echo "== run"
  timeout --kill-after=5 $((STEP_LIMIT - 10)) "$probe" --timeout 40
}
step_nccl_hostid_control() {
  [[ -x "$probe" ]] || { echo "no $probe (the nccl_hostid step builds it)"; return 1; }
  # The control is expected to fail (NCCL refuses two ranks on one GPU of one host); the step
  # passes when the probe reached a verdict either way.
  local output
  output=$(timeout --kill-after=5 $((STEP_LIMIT - 10)) "$probe" --timeout 20 --same-host 2>&1)
  echo "$output"
  grep -qE 'two-rank on one GPU: (WORKS|FAILS)' <<<"$output"
}
note_verdict() { grep -m1 -E 'two-rank on one GPU: (WORKS|FAILS)' "$1" || echo "no verdict line"; }

# two_ranks [MPIRUN OPTIONS] -- COMMAND...: COMMAND as ranks 0 and 1 under the bundle's mpirun,
# both on this machine's GPU 0, each with an NCCL_HOSTID of its own. With RANK_PID_DIR set each
# rank writes its scalescope's pid there and reports its exit status on stderr.
two_ranks() {
  local opts=()
  while [[ "$1" != -- ]]; do opts+=("$1"); shift; done
  shift
  [[ $(id -u) -eq 0 ]] && opts+=(--allow-run-as-root)
  # shellcheck disable=SC2016  # expanded by each rank's shell
  local rank_shell='export NCCL_HOSTID="scalescope-rank$OMPI_COMM_WORLD_RANK"
if [ -z "${RANK_PID_DIR:-}" ]; then exec "$@"; fi
"$@" & pid=$!
echo "$pid" >"$RANK_PID_DIR/rank$OMPI_COMM_WORLD_RANK.pid"
wait "$pid"; rc=$?
echo "rank $OMPI_COMM_WORLD_RANK exit $rc" >&2
exit "$rc"'
  eval "export $two_rank_env_q"
  echo "\$ mpirun -np 2 ${opts[*]} [NCCL_HOSTID=scalescope-rank<R>; $two_rank_env_q] $*"
  "$mpirun" -np 2 --oversubscribe --bind-to none "${opts[@]}" bash -c "$rank_shell" rank "$@"
}

# Two processes, one replica each on GPU 0: NCCL's multi-rank path, buckets during backward,
# weights compared across the ranks.
step_nccl_2proc_train() {
  two_ranks -- "$bin" train --devices cuda:2 --model cifar-cnn --batch 64 --steps 40 \
    --check-every 10 --no-eval --network-interface lo -o "$out/nccl-2proc-train.json" || return 1
  python3 - "$out/nccl-2proc-train.json" <<'EOF'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
steps = r.get("steps", [])[r.get("warmup_steps", 0):]
def med(key):
    v = [st[key] for st in steps if isinstance(st.get(key), (int, float))]
    return statistics.median(v) if v else float("nan")
c = r.get("cluster") or {}
print(f"2 ranks: processes {c.get('processes')}, replicas {len(r.get('steps', [{}])[0].get('replicas', [])) or '?'}, "
      f"step {med('step_ms'):.2f} ms, all-reduce total {med('allreduce_ms'):.2f} ms, "
      f"exposed {med('allreduce_exposed_ms'):.2f} ms, buckets {len(r.get('bucket_bytes', []))}")
EOF
}
note_2proc() { { grep -m1 '^2 ranks: ' "$1" || grep -m1 -E 'lost|[Ee]rror' "$1"; } | cut -c1-220; }

step_nccl_2proc_collectives() {
  two_ranks -- "$bin" collectives --devices cuda:2 -b 8 -e 64M -f 4 -w 2 -n 10 \
    --network-interface lo --json "$out/nccl-2proc-collectives.json" || return 1
  echo "2 ranks: $(grep -m1 'Wrong values' "$STEP_LOG" | sed 's/^# *//'), $(grep -m1 'Avg bus bandwidth' "$STEP_LOG" | sed 's/^# *//')"
  grep -qE 'Wrong values *: 0 OK' "$STEP_LOG"
}

# Rank 1 is killed while both train: rank 0 must notice, abort its NCCL communicator and exit
# 1 naming rank 1, well within the collective timeout (20 s here).
step_nccl_2proc_abort() {
  local dir="$out/abort" timeout_s=20
  rm -rf "$dir" && mkdir -p "$dir"
  RANK_PID_DIR="$dir" two_ranks --enable-recovery -- "$bin" train --devices cuda:2 \
    --model cifar-cnn --batch 64 --steps 1000000 --no-eval --network-interface lo \
    --collective-timeout-ms $((timeout_s * 1000)) >"$dir/ranks.log" 2>&1 &
  local launcher=$! waited=0
  until grep -q '^step ' "$dir/ranks.log" 2>/dev/null && [[ -s "$dir/rank1.pid" ]]; do
    sleep 1
    waited=$((waited + 1))
    kill -0 "$launcher" 2>/dev/null && ((waited < STEP_LIMIT - 3 * timeout_s)) && continue
    cat "$dir/ranks.log"
    echo "the two ranks never started training"
    kill "$launcher" 2>/dev/null
    return 1
  done
  sleep 3
  kill -9 "$(cat "$dir/rank1.pid")"
  local killed_at=$SECONDS
  echo "killed rank 1 (pid $(cat "$dir/rank1.pid")) after rank 0's first step"
  local rc=0
  timeout $((2 * timeout_s + 10)) tail --pid="$launcher" -f /dev/null || rc=1
  cat "$dir/ranks.log"
  if ((rc)); then
    echo "rank 0 still running $((SECONDS - killed_at)) s after rank 1 was killed"
    kill "$launcher" 2>/dev/null
    return 1
  fi
  local elapsed=$((SECONDS - killed_at))
  if grep -q 'rank 0 exit 1' "$dir/ranks.log" && grep -qE 'lost (contact with )?process rank 1' "$dir/ranks.log"; then
    echo "rank 0 exit 1 ${elapsed} s after rank 1 was killed: $(grep -m1 -oE 'lost (contact with )?process rank 1[^;]*' "$dir/ranks.log")"
  else
    echo "rank 0 did not exit 1 naming rank 1 (${elapsed} s after the kill)"
    return 1
  fi
}
note_abort() { grep -m1 -E '^rank 0 (exit 1 |did not|still)|never started' "$1" | cut -c1-220; }

two_rank_skip_reason() {  # empty when the two-process steps can run
  if [[ -z "$mpirun" ]]; then
    echo "no mpirun: the build path configures MPI off (the bundle carries Open MPI)"
  elif ! grep -q 'two-rank on one GPU: WORKS' "$out/nccl_hostid.log" 2>/dev/null; then
    echo "the NCCL_HOSTID probe did not find two ranks on one GPU working ($(note_verdict "$out/nccl_hostid.log" 2>/dev/null))"
  fi
}

note_configure() { grep -m1 -E 'CMake Error|scalescope: CUDA=' "$1" || true; }

# -k 0: build everything that can be built, so one broken target does not hide the rest.
step_build() { cmake --build "$build_dir" -j "$(nproc)" -- -k 0; }
note_build() {
  echo "$(grep -c 'warning:' "$1") warning lines, $(grep -c 'error:' "$1") error lines, $(grep -c '^FAILED:' "$1") failed targets"
}
step_configure() { eval "cmake -S \"\$repo\" -B \"\$build_dir\" $cmake_args_q"; }

gtest() {  # binary filter name
  "$tests_dir/$1" --gtest_filter="$2" --gtest_output="json:$out/$3.json"
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

step_compare_pytorch() { python3 "$bench_dir/compare_pytorch.py" --device cuda --binary "$bin" --rounds 1; }

step_ctest() {  # STOP_EPOCH: ctest starts no test after it
  ctest --test-dir "$build_dir" --output-on-failure --no-tests=error --timeout 300 \
    --stop-time "$(date -d "@$1" +%H:%M:%S)" --output-junit "$out/ctest-junit.xml"
}
note_ctest() { grep -m1 -E 'tests passed|No tests were found' "$1" || echo "no ctest summary line"; }

export -f step_env step_nvidia_smi step_bundle step_main_command step_resnet50_b128 \
  step_h2d_overlap step_devices step_sanitizer summarize_sanitizer step_nccl_hostid \
  step_nccl_hostid_control two_ranks step_nccl_2proc_train step_nccl_2proc_collectives \
  step_nccl_2proc_abort step_configure step_build gtest sweep step_compare_pytorch step_ctest \
  note_verdict

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
