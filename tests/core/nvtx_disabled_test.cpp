// NVTX_DISABLE compiles the ranges out: core/nvtx.h then includes no NVTX header and a range
// is an empty object. This file defines NVTX_DISABLE itself, so the check runs in every
// build, NVTX or not; core/nvtx.h keeps the two modes in different inline namespaces, so
// this translation unit and the enabled ones of scalescope_core coexist in test_core.
#ifndef NVTX_DISABLE  // a build with SCALESCOPE_NVTX=OFF defines it already
#define NVTX_DISABLE
#endif
#include "core/nvtx.h"

#include <gtest/gtest.h>

#include <type_traits>

static_assert(SCALESCOPE_NVTX_ENABLED == 0, "NVTX_DISABLE must compile NVTX out");
#ifdef NVTX_VERSION
#error "core/nvtx.h included an NVTX header under NVTX_DISABLE"
#endif
static_assert(std::is_empty_v<scalescope::nvtx::Range>);
static_assert(sizeof(scalescope::nvtx::Range) == 1);
static_assert(std::is_trivially_destructible_v<scalescope::nvtx::Range>);
static_assert(!std::is_copy_constructible_v<scalescope::nvtx::Range>);

namespace scalescope::nvtx {
namespace {

// A range is usable as in the trainer, and constant-evaluable: nothing happens at run time.
constexpr bool make_ranges() {
  [[maybe_unused]] Range step(kStep, 1);
  [[maybe_unused]] Range outer(Phase::kBackward, 1);
  [[maybe_unused]] Range inner(Phase::kAllReduce, 1, "allreduce bucket 0");
  return true;
}
static_assert(make_ranges());

TEST(NvtxDisabled, RangesAndThreadNamesCompileToNothing) {
  initialize();
  name_current_thread("scalescope nvtx disabled test");
  for (int64_t step = 1; step <= 3; ++step) {
    Range range(Phase::kForward, step);
    EXPECT_EQ(sizeof(range), 1u);
  }
  EXPECT_STREQ(category(Phase::kAllReduce).name, "allreduce");
}

}  // namespace
}  // namespace scalescope::nvtx
