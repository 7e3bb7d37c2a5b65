#include "core/denormals.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cfloat>
#include <thread>

#include "core/error.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// Restores the thread's handling of denormals when a test ends, whatever it set.
class DenormalsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_denormals(was_flushed_ ? Denormals::kFlush : Denormals::kKeep);
    unsetenv("SCALESCOPE_DENORMALS");
  }
  bool was_flushed_ = denormals_flushed();
};

// Arithmetic the compiler cannot fold: a denormal operand, and a product whose exact result is
// denormal.
float denormal_times_one() {
  volatile float tiny = FLT_MIN / 4.0f;  // 2^-128: denormal
  volatile float one = 1.0f;
  return tiny * one;
}
float product_into_denormals() {
  volatile float a = FLT_MIN;  // 2^-126, the smallest normal
  volatile float half = 0.5f;
  return a * half;
}

TEST_F(DenormalsTest, FlushingMakesDenormalOperandsAndResultsZero) {
  set_denormals(Denormals::kKeep);
  EXPECT_FALSE(denormals_flushed());
  EXPECT_EQ(denormal_times_one(), FLT_MIN / 4.0f);
  EXPECT_EQ(product_into_denormals(), FLT_MIN / 2.0f);
  set_denormals(Denormals::kFlush);
  EXPECT_TRUE(denormals_flushed());
  EXPECT_EQ(denormal_times_one(), 0.0f);
  EXPECT_EQ(product_into_denormals(), 0.0f);
  volatile float normal = 3.0f;
  EXPECT_EQ(normal * 0.5f, 1.5f);  // normal floats as before
}

// The CLI sets it before a command starts its threads: they inherit it.
TEST_F(DenormalsTest, ThreadsStartedAfterwardsInheritIt) {
  set_denormals(Denormals::kFlush);
  bool flushed = false;
  float product = 1.0f;
  std::thread([&] {
    flushed = denormals_flushed();
    product = product_into_denormals();
  }).join();
  EXPECT_TRUE(flushed);
  EXPECT_EQ(product, 0.0f);
}

TEST_F(DenormalsTest, TheEnvironmentChoosesAndABadValueIsNamed) {
  unsetenv("SCALESCOPE_DENORMALS");
  EXPECT_EQ(denormals_from_environment(), Denormals::kKeep);
  setenv("SCALESCOPE_DENORMALS", "", 1);
  EXPECT_EQ(denormals_from_environment(), Denormals::kKeep);
  setenv("SCALESCOPE_DENORMALS", "keep", 1);
  EXPECT_EQ(denormals_from_environment(), Denormals::kKeep);
  setenv("SCALESCOPE_DENORMALS", "flush", 1);
  EXPECT_EQ(denormals_from_environment(), Denormals::kFlush);
  setenv("SCALESCOPE_DENORMALS", "FTZ", 1);
  EXPECT_CONTAINS(testing_util::error_of([] { (void)denormals_from_environment(); }),
                  "SCALESCOPE_DENORMALS=FTZ: give keep or flush");
}

}  // namespace
}  // namespace scalescope
