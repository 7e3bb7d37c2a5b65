#!/usr/bin/env bash
# Usage: scripts/bundle.sh [--build-dir DIR] [-o FILE] [--tree DIR] [CMAKE_ARGS...]
#        scripts/bundle.sh --check DIR
#
# Packs scalescope as clusters deploy a build made once on a build host: one archive holding
# bin/scalescope, the test binaries (tests/), scripts/nccl_hostid_probe's binary (CUDA builds),
# Open MPI's launcher and components (builds with MPI: bin/mpirun), the Python scripts
# gpu-check.sh runs (bench/), and in lib/ every shared library these load except
#   - NVIDIA's (driver, CUDA runtime, cuDNN, cuBLAS/cuBLASLt, NCCL, NVML, nvrtc, ...): they come
#     from the GPU machine (its driver and its nvidia-* Python wheels or CUDA toolkit), and
#   - glibc's (libc, libm, libpthread, libdl, librt, ld-linux, ...): a copy of another glibc
#     cannot be mixed with the system's loader.
# Every ELF file carries DT_RPATH $ORIGIN/../lib (lib/ itself: $ORIGIN), searched before
# LD_LIBRARY_PATH, so the bundle's libraries win over whatever the machine has; the NVIDIA
# ones are then found on LD_LIBRARY_PATH (scripts/gpu-check.sh --bundle sets it).
# manifest.txt records what it was built from (git commit and dirty state, build type, CUDA
# architectures, toolkit and library versions) and which NVIDIA libraries it expects.
#
#   --build-dir DIR  pack this existing build instead of building one
#   -o FILE          the archive (.tar.gz; default: BUILD/scalescope-bundle.tar.gz). It
#                    unpacks into one folder, scalescope-bundle/
#   --tree DIR       assemble the bundle's folder here and keep it (DIR must not exist);
#                    without -o, no archive is written
#   --check DIR      only check an assembled folder: every ELF file's RPATH, and every library
#                    it loads found inside DIR, NVIDIA's and glibc's excepted
#   CMAKE_ARGS       without --build-dir: builds with scripts/build.sh into $BUILD_DIR
#                    (default build-bundle), these passed to CMake (e.g.
#                    -DCMAKE_CUDA_ARCHITECTURES=90)
#
# Needs patchelf (Debian: patchelf). Exit status: 0 when packed and checked, 1 when a check
# fails (a library that is neither packed nor allowed), 2 on a usage error.

set -euo pipefail

usage() {  # [exit status, default 2]
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
  exit "${1:-2}"
}

# Libraries the GPU machine supplies: NVIDIA's, and glibc's (the libc6 package's sonames).
vendor_re='^(libcuda|libcudart|libcudnn[a-z_]*|libcublas|libcublasLt|libnccl|libnvidia-[a-z-]+|libnvrtc[a-z.-]*|libnvJitLink|libcufft|libcufftw|libcurand|libcusparse|libcusolver|libcusolverMg|libnvToolsExt|libnvtx3interop|libcupti|libnvperf_[a-z]+)\.so'
glibc_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libthread_db|libc_malloc_debug|libnss_[a-z0-9]+)\.so'
# Open MPI components for fabrics a one-node check does not use; they would pull in
# libfabric, UCX and PSM (tens of MB), and /etc/openmpi disables most of them anyway.
mpi_skip_re='_(ofi|openib|ucx|uct|psm|psm2|usnic|portals4)\.so$'

repo=$(cd "$(dirname "$0")/.." && pwd)
build_dir=""
archive=""
tree=""
check_only=""
cmake_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) [[ $# -ge 2 ]] || usage; build_dir=$(realpath -m "$2"); shift 2 ;;
    -o) [[ $# -ge 2 ]] || usage; archive=$(realpath -m "$2"); shift 2 ;;
    --tree) [[ $# -ge 2 ]] || usage; tree=$(realpath -m "$2"); shift 2 ;;
    --check) [[ $# -ge 2 ]] || usage; check_only=$(realpath -m "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    -D*|-G*) cmake_args+=("$1"); shift ;;
    *) echo "bundle: unknown argument $1" >&2; usage ;;
  esac
done

log() { echo "bundle: $*"; }
die() { echo "bundle: $*" >&2; exit 1; }

is_elf() { [[ -f "$1" && ! -L "$1" ]] && [[ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" == '177ELF' ]]; }
allowed_outside() { [[ "$1" =~ $vendor_re || "$1" =~ $glibc_re ]]; }

# The RPATH an ELF file at PATH (relative to the bundle's root) must carry.
# shellcheck disable=SC2016  # $ORIGIN is the loader's, written literally
rpath_for() {
  case "$1" in
    lib/*/*) echo '$ORIGIN/..' ;;
    lib/*) echo '$ORIGIN' ;;
    *) echo '$ORIGIN/../lib' ;;
  esac
}

# check_tree DIR: every ELF file's RPATH, and what the loader resolves for it: a library must
# be inside DIR unless NVIDIA's or glibc's. LD_LIBRARY_PATH is cleared so that it cannot hide a
# missing one. Prints the problems; returns 1 when there are any.
check_tree() {
  local dir=$1 bad=0 f rel want have line name path ldd_out
  while IFS= read -r f; do
    is_elf "$f" || continue
    rel=${f#"$dir"/}
    want=$(rpath_for "$rel")
    have=$(readelf -d "$f" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
    if [[ "$have" != "$want" ]]; then
      echo "bundle: $rel has RPATH '${have:-none}', expected '$want'" >&2
      bad=1
    fi
    if readelf -d "$f" | grep -q '(RUNPATH)'; then
      echo "bundle: $rel also has a RUNPATH, which would turn its RPATH off" >&2
      bad=1
    fi
    ldd_out=$(env -u LD_LIBRARY_PATH ldd "$f" 2>&1) || true
    while IFS= read -r line; do
      [[ "$line" =~ ^[[:space:]]*([^[:space:]]+)\ =\>\ (.*)$ ]] || continue
      name=${BASH_REMATCH[1]}
      path=${BASH_REMATCH[2]%% (*}
      allowed_outside "$name" && continue
      if [[ "$path" == "not found" ]]; then
        echo "bundle: $rel needs $name, which is not in the bundle" >&2
        bad=1
      elif [[ "$(realpath -m "$path")" != "$dir"/* ]]; then
        echo "bundle: $rel loads $name from $path, outside the bundle" >&2
        bad=1
      fi
    done <<<"$ldd_out"
  done < <(find "$dir" -type f \( -perm -u+x -o -name '*.so*' \))
  return "$bad"
}

if [[ -n "$check_only" ]]; then
  [[ -d "$check_only" ]] || die "--check: no folder $check_only"
  check_tree "$(realpath "$check_only")" && log "$check_only: every library resolves inside it or is allowed outside"
  exit
fi

command -v patchelf >/dev/null || die "needs patchelf (Debian: apt-get install patchelf)"
cd "$repo"
if [[ -z "$build_dir" ]]; then
  build_dir=$(realpath -m "${BUILD_DIR:-build-bundle}")
  log "building into $build_dir"
  BUILD_DIR="$build_dir" scripts/build.sh "${cmake_args[@]}"
elif [[ ${#cmake_args[@]} -gt 0 ]]; then
  die "CMake arguments are for a build of its own; --build-dir takes a finished build"
fi
cache="$build_dir/CMakeCache.txt"
[[ -x "$build_dir/scalescope" && -f "$cache" ]] || die "$build_dir has no scalescope build"
cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -1; }

keep_tree=1
if [[ -z "$tree" ]]; then
  keep_tree=0
  [[ -n "$archive" ]] || archive="$build_dir/scalescope-bundle.tar.gz"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tree="$work/scalescope-bundle"
fi
[[ ! -e "$tree" ]] || die "--tree $tree exists; give a new path"
mkdir -p "$tree"/{bin,tests,lib,bench/anchors}

# --- our binaries
cp "$build_dir/scalescope" "$tree/bin/"
for t in "$build_dir"/tests/test_*; do
  is_elf "$t" && cp "$t" "$tree/tests/"
done
with_cuda=$(cached SCALESCOPE_WITH_CUDA)
nvcc=$(cached CMAKE_CUDA_COMPILER)
if [[ "$with_cuda" == ON ]]; then
  nccl_inc=$(cached NCCL_INCLUDE_DIR)
  nccl_lib=$(cached NCCL_LIBRARY)
  log "building nccl_hostid_probe with $nvcc"
  "$nvcc" -std=c++17 -O2 scripts/nccl_hostid_probe.cpp -I"$nccl_inc" "$nccl_lib" \
    -o "$tree/bin/nccl_hostid_probe"
fi

# --- Open MPI's runtime, when scalescope loads libmpi: the launcher (bin/mpirun, a wrapper
# that points Open MPI's and PMIx's install paths into the bundle), its components and help.
mpi_note="none (built without MPI)"
if readelf -d "$tree/bin/scalescope" | grep -q 'NEEDED.*\[libmpi\.so'; then
  command -v ompi_info >/dev/null || die "scalescope loads libmpi, but ompi_info (openmpi-bin) is missing"
  ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
  orterun=$(readlink -f "$(ompi_path bindir)/orterun")
  pkglibdir=$(ompi_path pkglibdir)
  pkgdatadir=$(ompi_path pkgdatadir)
  sysconfdir=$(ompi_path sysconfdir)
  mkdir -p "$tree"/{libexec,lib/openmpi,lib/pmix,share/openmpi,share/pmix,etc/openmpi}
  cp "$orterun" "$tree/libexec/orterun"
  cp "$(readlink -f "$(ompi_path bindir)/orted")" "$tree/libexec/orted"
  for c in "$pkglibdir"/*.so; do
    [[ "$(basename "$c")" =~ $mpi_skip_re ]] || cp -L "$c" "$tree/lib/openmpi/"
  done
  cp -L "$pkgdatadir"/* "$tree/share/openmpi/" 2>/dev/null || true
  cp -L "$sysconfdir"/openmpi-mca-params.conf "$sysconfdir"/openmpi-default-hostfile \
    "$tree/etc/openmpi/"
  # PMIx (Open MPI's external one): its components and help beside its library.
  pmix_so=$(ldd "$pkglibdir/mca_pmix_ext3x.so" | sed -n 's/.*libpmix\.so\.[0-9]* => \(.*\) (.*/\1/p')
  if [[ -n "$pmix_so" ]]; then
    pmix_home=$(dirname "$(dirname "$(readlink -f "$pmix_so")")")
    cp -L "$pmix_home"/lib/pmix/*.so "$tree/lib/pmix/" 2>/dev/null || true
    cp -L "$pmix_home"/share/pmix/* "$tree/share/pmix/" 2>/dev/null || true
  fi
  cat >"$tree/bin/mpirun" <<'EOF'
#!/bin/sh
# Open MPI's mpirun from this bundle: its install paths (components, help texts, MCA
# defaults) and PMIx's point into the bundle, wherever it was unpacked; the processes it starts
# inherit them.
here=$(cd "$(dirname "$0")/.." && pwd)
export OPAL_PREFIX="$here" OPAL_EXEC_PREFIX="$here" OPAL_BINDIR="$here/bin" \
  OPAL_LIBDIR="$here/lib" OPAL_PKGLIBDIR="$here/lib/openmpi" OPAL_DATADIR="$here/share" \
  OPAL_PKGDATADIR="$here/share/openmpi" OPAL_SYSCONFDIR="$here/etc/openmpi"
export PMIX_PREFIX="$here" PMIX_LIBDIR="$here/lib" PMIX_PKGLIBDIR="$here/lib/pmix" \
  PMIX_DATADIR="$here/share" PMIX_PKGDATADIR="$here/share/pmix"
# Without ssh or rsh Open MPI's default launcher refuses to start even local processes; the
# isolated one starts them on this node only.
if ! command -v ssh >/dev/null && ! command -v rsh >/dev/null; then
  export OMPI_MCA_plm="${OMPI_MCA_plm:-isolated}"
fi
exec "$here/libexec/orterun" "$@"
EOF
  chmod +x "$tree/bin/mpirun"
  mpi_note="$(ompi_info --version | head -1) (bin/mpirun; components for fabrics left out: ofi, openib, ucx, psm)"
fi

# --- the Python that gpu-check.sh runs beside the binaries
cp bench/*.py "$tree/bench/"
cp bench/anchors/anchor_settings.py "$tree/bench/anchors/"

# --- every library the ELF files load, NVIDIA's and glibc's excepted
declare -A vendor_needed=()
while IFS= read -r f; do
  is_elf "$f" || continue
  while IFS= read -r line; do
    [[ "$line" =~ ^[[:space:]]*([^[:space:]]+)\ =\>\ (.*)$ ]] || continue
    name=${BASH_REMATCH[1]}
    path=${BASH_REMATCH[2]%% (*}
    if [[ "$name" =~ $vendor_re ]]; then
      vendor_needed[$name]=1
      continue
    fi
    [[ "$name" =~ $glibc_re ]] && continue
    [[ "$path" != "not found" ]] || die "${f#"$tree"/} needs $name, which this machine does not have"
    [[ -e "$tree/lib/$name" ]] || cp -L "$path" "$tree/lib/$name"
  done < <(ldd "$f" 2>/dev/null)
done < <(find "$tree" -type f)

# --- RPATHs (DT_RPATH: searched before LD_LIBRARY_PATH, unlike RUNPATH)
while IFS= read -r f; do
  is_elf "$f" || continue
  chmod u+w "$f"
  patchelf --remove-rpath "$f"
  patchelf --force-rpath --set-rpath "$(rpath_for "${f#"$tree"/}")" "$f"
done < <(find "$tree" -type f)
check_tree "$tree" || die "the bundle does not resolve its own libraries (above)"

# --- the oldest glibc the bundle runs on: the newest GLIBC_ symbol version any file asks for
# (objdump also meets the scripts and texts, and fails on them).
glibc_needed=$(find "$tree" -type f -print0 | xargs -0 objdump -T 2>/dev/null |
  grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sed 's/GLIBC_//' | sort -uV | tail -1 || true)

# --- what it was built from
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null || true)
{
  echo "scalescope bundle"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) ($(git log -1 --format=%cd --date=iso-strict 2>/dev/null || true))"
  if [[ -z "$dirty" ]]; then
    echo "dirty: no"
  else
    echo "dirty: yes, $(wc -l <<<"$dirty") tracked files differ from the commit (git diff HEAD sha256 $(git diff HEAD | sha256sum | cut -c1-16)): $(awk 'NR <= 30 {print $2} NR == 31 {print "..."}' <<<"$dirty" | paste -sd' ' -)"
  fi
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)), $("$(cached CMAKE_CXX_COMPILER)" --version | head -1)"
  echo "build type: $(cached CMAKE_BUILD_TYPE); tests: $(find "$tree/tests" -type f -printf '%f\n' | sort | paste -sd' ' -)"
  if [[ "$with_cuda" == ON ]]; then
    echo "cuda architectures: $(cached CMAKE_CUDA_ARCHITECTURES)"
    echo "cuda toolkit: $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($nvcc)"
    echo "cuda runtime: $(readelf -d "$tree/bin/scalescope" | grep -q 'NEEDED.*libcudart' && echo "shared (libcudart from the GPU machine)" || echo static)"
    echo "nccl built against: $(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$nccl_inc/nccl.h" | awk '{print $3}' | paste -sd. -)"
    cudnn_h="$(cached CUDNN_INCLUDE_DIR)/cudnn_version.h"
    [[ -f "$cudnn_h" ]] && echo "cudnn built against: $(grep -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' "$cudnn_h" | awk '{print $3}' | paste -sd. -)"
  else
    echo "cuda: off"
  fi
  echo "mpi: $mpi_note"
  echo "glibc needed: $glibc_needed (the newest symbol version a file of the bundle uses)"
  echo "nvidia libraries (from the GPU machine): $(printf '%s\n' "${!vendor_needed[@]}" | sort | paste -sd' ' -)"
  if [[ "$with_cuda" == ON ]]; then
    echo "nvidia libraries opened at run time (from the GPU machine): libcublas.so.$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p') (at the first cuBLAS call), libnvidia-ml.so.1"
  fi
  echo "packed libraries: $(cd "$tree/lib" && find . -maxdepth 1 -name '*.so*' -printf '%f\n' | sort | paste -sd' ' -)"
} >"$tree/manifest.txt"
log "$(du -sh "$tree" | cut -f1) in $tree ($(find "$tree/lib" -maxdepth 1 -name '*.so*' | wc -l) libraries packed; $(grep '^nvidia libraries (from' "$tree/manifest.txt")"

if [[ -n "$archive" ]]; then
  mkdir -p "$(dirname "$archive")"
  # One top folder, whatever --tree called it: gpu-check.sh --bundle unpacks it by that name.
  tar -C "$(dirname "$tree")" --transform "s|^$(basename "$tree")|scalescope-bundle|" \
    -czf "$archive.tmp" "$(basename "$tree")"
  mv "$archive.tmp" "$archive"
  log "wrote $archive ($(du -h "$archive" | cut -f1))"
fi
((keep_tree)) && log "kept the folder $tree"
exit 0
