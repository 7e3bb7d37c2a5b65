// NVTX ranges for Nsight Systems timelines: one domain "scalescope", a category per phase,
// registered strings, the step number as payload. Compiled out when the NVTX3 headers are
// absent (SCALESCOPE_WITH_NVTX=0) or NVTX_DISABLE is defined.
//
// Without a tool attached (nsys, or an injection library named by NVTX_INJECTION64_PATH)
// every call returns after one branch, so ranges cost nothing measurable in a step.
#pragma once

#include <cstddef>
#include <cstdint>

#if SCALESCOPE_WITH_NVTX && !defined(NVTX_DISABLE)
#define SCALESCOPE_NVTX_ENABLED 1
#include <nvtx3/nvtx3.hpp>
#else
#define SCALESCOPE_NVTX_ENABLED 0
#endif

namespace scalescope::nvtx {

// The phases of a step, in step order. Values are the NVTX category ids.
enum class Phase : uint32_t {
  kInput = 1,
  kH2D = 2,
  kForward = 3,
  kBackward = 4,
  kAllReduce = 5,
  kOptimizer = 6,
  kStep = 7,
};

inline constexpr const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kInput:
      return "input";
    case Phase::kH2D:
      return "h2d";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kAllReduce:
      return "allreduce";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kStep:
      return "step";
  }
  return "?";
}

#if SCALESCOPE_NVTX_ENABLED

struct Domain {
  static constexpr const char* name{"scalescope"};
};

namespace detail {

// Registered once per process (first use), so a range carries a handle, not a string.
const nvtx3::registered_string_in<Domain>& message(Phase phase);
const nvtx3::named_category_in<Domain>& category(Phase phase);
// One colour per phase, stable across runs so that timelines can be compared by eye.
nvtx3::color color(Phase phase);

}  // namespace detail

// A scoped range of one phase of step `step`. Cannot be copied or heap-allocated.
class Range {
 public:
  Range(Phase phase, int64_t step)
      : range_(nvtx3::event_attributes{detail::message(phase), detail::category(phase),
                                       detail::color(phase), nvtx3::payload{step}}) {}
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  void* operator new(std::size_t) = delete;

 private:
  nvtx3::scoped_range_in<Domain> range_;
};

#else

class Range {
 public:
  Range(Phase, int64_t) {}
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  void* operator new(std::size_t) = delete;
};

#endif

// Initialises NVTX (once; thread-safe). Call before threads start making ranges: NVTX's own
// lazy initialisation is not synchronised.
void initialize();
// Names the calling OS thread in the timeline ("scalescope replica 0"). Initialises first.
void name_current_thread(const char* name);

}  // namespace scalescope::nvtx
