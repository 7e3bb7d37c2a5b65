#include "core/cuda_architectures.h"

#include <gtest/gtest.h>

#include <string>

#include "core/build_info.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

bool runs(const std::string& architectures, int major, int minor) {
  return cuda_code_mismatch(architectures, major, minor).empty();
}

// The default build (CMakeLists.txt): machine code for 8.0, 8.6, 8.9 and PTX with machine code
// for 9.0. Every Ampere, Ada and Hopper GPU runs it, and a later one through the PTX.
TEST(CudaArchitectures, TheDefaultBuildRunsFromAmpereOn) {
  const std::string built = "80-real,86-real,89-real,90";
  for (const auto& [major, minor] :
       {std::pair{8, 0}, {8, 6}, {8, 7}, {8, 9}, {9, 0}, {10, 0}, {12, 0}}) {
    EXPECT_TRUE(runs(built, major, minor)) << major << "." << minor;
  }
}

// A build without code for the GPU names the option to rebuild with.
TEST(CudaArchitectures, ABuildWithoutCodeForTheGpuNamesTheOptionToRebuildWith) {
  EXPECT_EQ(cuda_code_mismatch("90", 8, 0),
            "this build has no CUDA code that a GPU of compute capability 8.0 runs (built for "
            "CUDA architectures 90); rebuild with -DCMAKE_CUDA_ARCHITECTURES=80 "
            "(scripts/build.sh passes it to CMake)");
}

// Before Ampere no build would do (the flash attention's bf16 products do not compile for 7.5,
// seen with nvcc 13.0): a T4 is refused whatever the build has.
TEST(CudaArchitectures, AGpuBeforeAmpereIsRefusedWhateverTheBuild) {
  for (const char* built : {"80-real,86-real,89-real,90", "75", "all"}) {
    EXPECT_EQ(cuda_code_mismatch(built, 7, 5),
              "scalescope's GPU kernels need compute capability 8.0 or later (bf16 and TF32 "
              "tensor cores), and this GPU's is 7.5; its cpu devices still run")
        << built;
  }
}

// Machine code runs on its major at its minor or later, never on the next major; PTX on
// anything at or after it.
TEST(CudaArchitectures, MachineCodeStaysInItsMajorAndPtxRunsOnEverythingLater) {
  EXPECT_TRUE(runs("90-real", 9, 0));
  EXPECT_FALSE(runs("90-real", 10, 0));
  EXPECT_FALSE(runs("86-real", 8, 0));
  EXPECT_TRUE(runs("80-real", 8, 9));
  EXPECT_TRUE(runs("80-virtual", 10, 0));
  EXPECT_FALSE(runs("86-virtual", 8, 0));
  EXPECT_TRUE(runs("75", 8, 6));          // through its PTX
  EXPECT_TRUE(runs("90;86-real", 8, 6));  // CMake's own separator
}

// "a" is one capability alone (wgmma's 9.0a); "f" a family (its major, that minor or later).
TEST(CudaArchitectures, ArchSpecificCodeRunsOnItsCapabilityAloneAndFamilyCodeOnItsMajor) {
  EXPECT_TRUE(runs("90a", 9, 0));
  EXPECT_FALSE(runs("90a", 10, 0));
  EXPECT_FALSE(runs("90a-real", 9, 1));
  EXPECT_TRUE(runs("100f", 10, 3));
  EXPECT_FALSE(runs("100f", 12, 0));
  EXPECT_FALSE(runs("103f", 10, 0));
}

// What the check cannot judge it lets through: CMake's keywords, entries it cannot read, an
// empty list.
TEST(CudaArchitectures, WhatItCannotReadIsTakenToFit) {
  for (const char* built : {"all", "all-major", "native", "sm_90", "9.0", "", "90-real,bogus"}) {
    EXPECT_TRUE(runs(built, 8, 0)) << built;
  }
}

// This build's own list reads, and runs on the H100 and H200 (9.0) of the GPU checks; a
// CPU-only build's "none" is taken to fit (it opens no GPU at all).
TEST(CudaArchitectures, ThisBuildsListRunsOnAHopper) {
  EXPECT_TRUE(runs(build_info::kCudaArchitectures, 9, 0)) << build_info::kCudaArchitectures;
}

}  // namespace
}  // namespace scalescope
