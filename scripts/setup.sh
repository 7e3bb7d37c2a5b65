#!/usr/bin/env bash
# Installs every Debian 12 package that building scalescope, its tests and its default run
# need. Idempotent: does nothing when all are present.
set -euo pipefail

packages=(
  g++ cmake ninja-build git pkg-config
  libtsan2                         # ThreadSanitizer's runtime (scripts/tsan.sh)
  clang-16 libclang-rt-16-dev      # the ASan+UBSan build and libFuzzer (scripts/asan.sh, fuzz.sh)
  libomp-16-dev                    # OpenMP for clang-16 (the fuzzers' build)
  libdnnl-dev ocl-icd-opencl-dev   # oneDNN (its CMake config needs OpenCL's)
  libgloo-dev                      # collectives on CPU
  libopenmpi-dev openmpi-bin       # multi-process runs (mpirun) and their tests
  iproute2                         # ip netns, veth, tc: the two-node tests (harness.netns_*)
  patchelf                         # the relocatable bundle (scripts/bundle.sh)
  slurmctld slurmd slurm-client munge  # srun across those nodes (harness.netns_slurm)
  zlib1g-dev dataset-fashion-mnist # IDX datasets (gzip) and real data for the tests
  libsqlite3-dev                   # Nsight Systems SQLite exports (scalescope analyze)
  nlohmann-json3-dev libfmt-dev libcli11-dev python3-jsonschema chromium
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark-tools python3-scipy
  python3-torch python3-torchvision  # checkpoint interop and training tests (torchvision: ResNets)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
