#!/usr/bin/env bash
# Usage: scripts/gpu-deps.sh [DIR]          (run on a Debian 12 machine with apt, not on the GPU machine)
#
# Gathers the Debian libraries that building scalescope needs and that the GPU machine's image
# lacks (oneDNN, Gloo, fmt, CLI11, nlohmann/json, GoogleTest, Google Benchmark, zlib headers and
# the runtime libraries they load), so that scripts/gpu-check.sh can build there with no apt
# and no network. Each package's .deb is fetched with `apt-get download` and unpacked with
# `dpkg -x` into DIR (default: third_party/gpu-debs/root, which git ignores); documentation is
# dropped. Nothing is installed on this machine. Carry the folder above DIR
# (third_party/gpu-debs) to the GPU machine.
#
# DIR is emptied first. Exit status: 0 when every package was unpacked and every shared library
# in DIR finds its dependencies in DIR or among the base libraries any glibc system has.
set -euo pipefail

cd "$(dirname "$0")/.."
root=${1:-third_party/gpu-debs/root}
if [[ -z "$root" || "$(realpath -m "$root")" == / ]]; then
  echo "gpu-deps: refusing to unpack into '$root'" >&2
  exit 2
fi

# Build-time packages (headers, CMake configs, static GoogleTest) and the runtime libraries
# their shared objects load. Not here: MPI (gpu-check.sh configures -DSCALESCOPE_WITH_MPI=OFF);
# the zlib runtime and the C/C++ runtimes (part of every image; a second copy on
# LD_LIBRARY_PATH would shadow the image's newer one); hiredis and ibverbs headers (Gloo's
# headers that scalescope includes use neither; only libgloo.so.0 loads their libraries).
packages=(
  libdnnl-dev libdnnl2                                      # oneDNN
  ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers    # OpenCL, needed by oneDNN's CMake config and library
  libgloo-dev libgloo0                                      # Gloo
  libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200  # loaded by libgloo.so.0
  nlohmann-json3-dev
  libfmt-dev libfmt9
  libcli11-dev
  libgtest-dev libgmock-dev                                 # static libraries: no runtime package
  libbenchmark-dev libbenchmark1debian
  zlib1g-dev
)

debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
# As root, apt downloads as its own user, who cannot write into a private temporary folder.
sandbox=()
[[ $(id -u) -eq 0 ]] && sandbox=(-o APT::Sandbox::User=root)

download() { (cd "$debs" && apt-get download -q "${sandbox[@]}" "${packages[@]}"); }
if ! download; then
  echo "gpu-deps: download failed; refreshing the package lists and trying again"
  apt-get update -q
  download
fi

rm -rf "$root"
mkdir -p "$root"
for deb in "$debs"/*.deb; do
  dpkg -x "$deb" "$root"
done
rm -rf "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/lintian \
       "$root"/usr/share/bug "$root"/usr/share/doc-base "$root"/usr/src  # usr/src: a link into googletest's sources
# Some packages (libnl) still install into /lib: merge it into /usr/lib, so that one library
# folder holds everything.
if [[ -d "$root/lib" ]]; then
  cp -a "$root/lib/." "$root/usr/lib/"
  rm -rf "${root:?}/lib"
fi
# zlib1g-dev's libz.so points at /lib/x86_64-linux-gnu/libz.so.1.2.13, this release's runtime,
# which another image does not have (and whose libz.so.1 must stay the image's own):
# gpu-check.sh links against the image's libz.so.1 instead. Its headers are what is needed.
rm -f "$root"/usr/lib/x86_64-linux-gnu/libz.so "$root"/usr/lib/x86_64-linux-gnu/libz.a
find "$root" -depth -type d -empty -delete

# Gloo's CMake export names its library by absolute path (/usr/lib/libgloo.so.0.5.0), which
# does not exist on the GPU machine; make it relative to the config's own prefix as the other
# packages' exports are.
mapfile -t gloo_targets < <(find "$root" -path '*/cmake/Gloo/GlooTargets-*.cmake')
# shellcheck disable=SC2016  # ${_IMPORT_PREFIX} is CMake's, written literally
sed -i 's|"/usr/lib/libgloo|"${_IMPORT_PREFIX}/lib/libgloo|g' "${gloo_targets[@]}"
if [[ ${#gloo_targets[@]} -eq 0 ]] || grep -q '"/usr/lib/libgloo' "${gloo_targets[@]}"; then
  echo "gpu-deps: could not relocate Gloo's CMake export" >&2
  exit 1
fi

if dangling=$(find "$root" -xtype l -printf '%p -> %l\n') && [[ -n "$dangling" ]]; then
  echo "gpu-deps: links that point outside $root or nowhere:" >&2
  echo "$dangling" >&2
  exit 1
fi

# What was unpacked, for gpu-check.sh's log.
for deb in "$debs"/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' ' -
done | sort >"$root/gpu-debs.manifest"

# Every NEEDED entry of every shared library must be in DIR or a base library of the image.
base='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libgomp|libz|ld-linux-x86-64)\.so'
have=$(find "$root" \( -name '*.so' -o -name '*.so.*' \) -printf '%f\n' | sort -u)
missing=0
while IFS= read -r lib; do
  while IFS= read -r needed; do
    if ! grep -qxF "$needed" <<<"$have" && ! grep -qE "$base" <<<"$needed"; then
      echo "gpu-deps: ${lib#"$root"/} needs $needed, which is not unpacked" >&2
      missing=1
    fi
  done < <(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done < <(find "$root" -type f \( -name '*.so' -o -name '*.so.*' \))

echo "gpu-deps: $(wc -l <"$root/gpu-debs.manifest") packages unpacked into $root ($(du -sh "$root" | cut -f1))"
exit "$missing"
