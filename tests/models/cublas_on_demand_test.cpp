// models/cuda/cublas_on_demand.cpp: the binary links no cuBLAS; its calls load the library
// and reach it. Calls that need no GPU, so that they run on every machine of a CUDA build.
#include "models/cuda/cublas_on_demand.h"

#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <string>

namespace scalescope {
namespace {

TEST(CublasOnDemand, CallsLoadTheLibraryAndReachIt) {
  int major = -1, minor = -1;
  ASSERT_EQ(cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  // The library that loaded is of the headers' major version (its soname's); its minor may be
  // newer where the machine has a newer toolkit.
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  EXPECT_GE(minor, 0);
  EXPECT_TRUE(cublas_loaded());
  EXPECT_EQ(std::string(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)),
            "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_FALSE(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)).empty());
}

}  // namespace
}  // namespace scalescope
