// Whether a build's CUDA code runs on a GPU: the CUDA architectures it was built for (CMake's
// CMAKE_CUDA_ARCHITECTURES, core/build_info.h) against the GPU's compute capability. A GPU the
// build has no code for is refused by name when it is opened, where each kernel launch would
// fail with CUDA's "no kernel image is available for execution on the device".
#pragma once

#include <string>

namespace scalescope {

// The oldest GPUs scalescope's CUDA kernels run on: compute capability 8.0 (Ampere), whose
// tensor cores compute bf16 and TF32 (the flash attention's bf16 products compile for no
// earlier one, and TF32, the GPU default, does not exist there).
constexpr int kMinCudaMajor = 8;

// "" where a build for `architectures` carries code that a GPU of compute capability
// major.minor runs, else why not (also for a GPU older than kMinCudaMajor). `architectures` is
// CMake's list, its entries separated by ',' or ';': "80" (machine code and PTX), "80-real"
// (machine code), "80-virtual" (PTX), with the suffix "a" (arch-specific: that capability alone) or
// "f" (the family: that major). Machine code for X.Y runs on X.Z for Z >= Y; PTX for X.Y is
// compiled by the driver for any X'.Y' >= X.Y. "all", "all-major" and "native" (chosen by CMake
// when it built) and entries it cannot read are taken to fit: the check refuses only what it knows
// cannot run.
std::string cuda_code_mismatch(const std::string& architectures, int major, int minor);

}  // namespace scalescope
