#!/usr/bin/env bash
# Configures and builds scalescope into ./build (or $BUILD_DIR). A CUDA build where nvcc
# exists (the GPU code then compiles even on machines without a GPU), CPU-only otherwise.
# Extra arguments go to the CMake configure step, e.g. -DSCALESCOPE_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@"
cmake --build "$build_dir" -j "$(nproc)"
