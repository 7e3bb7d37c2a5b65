#!/usr/bin/env bash
# Usage: scripts/bundle-check.sh BUNDLE [--root DIR]      (as root; Debian, with debootstrap)
#
# Shows that a bundle from scripts/bundle.sh runs on a Debian 12 system with none of the -dev
# packages and none of scalescope's libraries installed: a minimal `debootstrap bookworm` root
# (made once, about 100 MB downloaded, and kept in DIR, default
# /var/tmp/scalescope-bundle-check/root) into which only the bundle is unpacked
# (/opt/scalescope-bundle), with the NVIDIA libraries its manifest names copied from this
# machine's CUDA toolkit into /opt/nvidia/lib, standing in for the GPU machine's nvidia-*
# wheels (the binaries link the CUDA runtime, cuBLAS, cuDNN and NCCL dynamically). In that
# root, with only /opt/nvidia/lib on LD_LIBRARY_PATH, it runs:
#   - `scalescope devices` (exit 0; without a GPU it says there is none),
#   - each test binary on a CPU filter,
#   - a short CPU training run and sweep (the sweep also writing its HTML report),
#   - two processes under the bundle's mpirun (builds with MPI): train and collectives on
#     cpu:2 over loopback (`--network-interface lo`: debootstrap writes no /etc/hosts, so the
#     host name does not resolve), the relocated Open MPI with its own components.
# Not in CI: debootstrap downloads the base system. Exit status: 0 when every check passed.

# The commands given to in_root are expanded by the root's shell, hence in single quotes.
# shellcheck disable=SC2016
set -uo pipefail

usage() {  # [exit status, default 2]
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
  exit "${1:-2}"
}
bundle=""
root=/var/tmp/scalescope-bundle-check/root
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) [[ $# -ge 2 ]] || usage; root=$(realpath -m "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    -*) usage ;;
    *) [[ -z "$bundle" ]] || usage; bundle=$(realpath -m "$1"); shift ;;
  esac
done
[[ -f "$bundle" ]] || usage
[[ $(id -u) -eq 0 ]] || { echo "bundle-check: needs root (debootstrap, chroot, mount)" >&2; exit 2; }

log() { echo "bundle-check: $*"; }
failures=0
check() {  # description command...: runs it, says ok or FAILED
  local what=$1 t0=$SECONDS
  shift
  if "$@"; then
    log "ok ($((SECONDS - t0)) s): $what"
  else
    log "FAILED ($((SECONDS - t0)) s): $what"
    failures=$((failures + 1))
  fi
}

if [[ ! -x "$root/bin/sh" ]]; then
  command -v debootstrap >/dev/null || { echo "bundle-check: apt-get install debootstrap" >&2; exit 2; }
  log "creating a minimal Debian 12 root in $root (debootstrap --variant=minbase)"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
    { tail "$root.log"; exit 1; }
fi

# The bundle and the NVIDIA stand-ins, fresh each time; /proc, /sys and /dev for the loader,
# OpenMP, hwloc and Open MPI's shared memory.
rm -rf "$root/opt/scalescope-bundle" "$root/opt/nvidia" "$root/tmp/check"
mkdir -p "$root/opt/nvidia/lib" "$root/tmp/check"
tar -xzf "$bundle" -C "$root/opt" || exit 1
manifest="$root/opt/scalescope-bundle/manifest.txt"
read -ra vendor <<<"$(sed -n 's/^nvidia libraries[^:]*: //p' "$manifest")"
for lib in "${vendor[@]}"; do
  src=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
  [[ -z "$src" && -e "/usr/local/cuda/lib64/$lib" ]] && src="/usr/local/cuda/lib64/$lib"
  if [[ -z "$src" ]]; then
    log "no $lib on this machine to stand in (the driver's, expected without a GPU)"
    continue
  fi
  cp -L "$src" "$root/opt/nvidia/lib/$lib"
  # libcudnn.so.9 opens its sub-libraries (libcudnn_graph.so.9, ...) from its own folder, as
  # the wheel has them; without them cuDNN aborts at its first call.
  [[ "$lib" == libcudnn.so.* ]] && cp -L "$(dirname "$src")"/libcudnn_*.so.[0-9] "$root/opt/nvidia/lib/"
done
mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    m=${mounted[i]}
    umount -R "$m" 2>/dev/null || umount -l "$m"
  done
}
trap cleanup EXIT
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount -t sysfs sysfs "$root/sys" && mounted+=("$root/sys")
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" && mounted+=("$root/dev")

# in_root COMMAND: a login-free shell in the root, with only the NVIDIA stand-ins on the
# library path and the bundle's bin/ first on PATH.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/tmp PATH=/opt/scalescope-bundle/bin:/usr/bin:/bin \
    LD_LIBRARY_PATH=/opt/nvidia/lib OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
    /bin/bash -c "cd /tmp/check && $1"
}

log "the root: $(in_root '. /etc/os-release; echo $PRETTY_NAME'), $(in_root 'dpkg-query -W -f="\${Package}\n"' | wc -l) packages, -dev packages: $(in_root 'dpkg-query -W -f="\${Package}\n"' | grep -c -- '-dev$')"
log "bundle: $(sed -n 's/^commit: //p' "$manifest"); $(du -sh "$root/opt/scalescope-bundle" | cut -f1) unpacked; stand-ins: $(find "$root/opt/nvidia/lib" -type f -printf '%f\n' | sort | paste -sd' ' -)"
check "no -dev package in the root" in_root '! dpkg-query -W -f="\${Package}\n" | grep -q -- "-dev$"'
check "no scalescope library outside the bundle: libfmt, libgloo, libdnnl, libgomp are absent from the root" \
  in_root '! ls /usr/lib/x86_64-linux-gnu/ | grep -qE "^lib(fmt|gloo|dnnl|gomp|mpi)\.so"'
check "ldd: every library of every binary resolves" \
  in_root 'for f in /opt/scalescope-bundle/bin/* /opt/scalescope-bundle/tests/* /opt/scalescope-bundle/libexec/*; do
             [ -x "$f" ] && head -c4 "$f" | grep -q ELF || continue
             ldd "$f" | grep "not found" | sed "s|^|$f: |"; done | grep -v "libcuda.so" | { ! grep .; }'
check "scalescope devices exits 0 and says there is no GPU" \
  in_root 'scalescope devices | tee devices.txt && grep -iqE "no (cuda|gpu)|0 cuda|none" devices.txt'
# Not test_harness's Cli tests, which run the build's scalescope by its path in the build tree,
# nor its NetworkChoice tests, which need this host's name to resolve.
for t in "test_core:CpuBackend*:DeviceSpec*:CpuDevice*:SimDevice*:Error*" \
         "test_models:Cpu*:KernelMath*:Model.*:Checkpoint*" \
         "test_harness:ProcessLayout*:DeviceIndex*:Gloo/*:SimTrainer*" "test_pipelines:*" \
         "test_reports:Stats*:RunReport*:SweepReport*:Html*"; do
  binary=${t%%:*}
  [[ -x "$root/opt/scalescope-bundle/tests/$binary" ]] || continue
  check "$binary --gtest_filter='${t#*:}'" \
    in_root "/opt/scalescope-bundle/tests/$binary --gtest_filter='${t#*:}' --gtest_brief=1 > $binary.txt 2>&1; rc=\$?; grep -E '^\[ *(PASSED|FAILED|SKIPPED) *\]|tests? from .* ran' $binary.txt; exit \$rc"
done
check "train on cpu:2" in_root 'scalescope train --devices cpu:2 --model mlp:scale=0.05 --steps 10 -q -o run.json && test -s run.json'
check "a short sweep with its HTML report" \
  in_root 'scalescope sweep --devices cpu:1,2 --models mlp:scale=0.05 --batch 16 --steps 5 --repeats 1 -q -o sweep.json --html sweep.html && test -s sweep.html'
if [[ -x "$root/opt/scalescope-bundle/bin/mpirun" ]]; then
  check "mpirun -np 2 scalescope train --devices cpu:2 (the bundle's Open MPI)" \
    in_root 'mpirun -np 2 --oversubscribe --bind-to none scalescope train --devices cpu:2 --model mlp:scale=0.05 --steps 10 -q --network-interface lo -o mpi-run.json && grep -q "\"processes\": *2" mpi-run.json'
  check "mpirun -np 2 scalescope collectives --devices cpu:2 (data check)" \
    in_root 'mpirun -np 2 --oversubscribe --bind-to none scalescope collectives --devices cpu:2 -e 1M --network-interface lo | tee coll.txt | tail -4 && grep -qE "Wrong values *: 0 OK" coll.txt'
fi
log "$failures check(s) failed"
((failures == 0))
