// NVTX ranges for Nsight Systems timelines: one domain "scalescope", a category per phase,
// registered strings, the step number as payload. Compiled out, to empty inline code that
// includes no NVTX header, when the NVTX3 headers are absent or turned off
// (SCALESCOPE_WITH_NVTX=0, the CMake option SCALESCOPE_NVTX=OFF) or NVTX_DISABLE is defined.
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
  // Around the steps a profiler should capture (--profile-steps): nsys's NVTX capture range.
  kProfile = 8,
  // The casts around a compressed all-reduce (to the 16-bit type and back).
  kGradCast = 9,
  // The all-reduces of batch norm's statistics inside forward and backward (--sync-batchnorm).
  kBatchNormSync = 10,
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
    case Phase::kProfile:
      return "profile";
    case Phase::kGradCast:
      return "grad_cast";
    case Phase::kBatchNormSync:
      return "batchnorm_sync";
  }
  return "?";
}

// One colour per phase (sRGB), stable across runs so that timelines can be compared by eye.
// Defined here, not with the NVTX ranges, so that the HTML report's charts use the same
// colours whether or not NVTX is compiled in: a phase looks the same in Nsight and the report.
struct PhaseColor {
  uint8_t red, green, blue;
};

inline constexpr PhaseColor phase_color(Phase phase) {
  switch (phase) {
    case Phase::kInput:
      return {230, 159, 0};  // orange
    case Phase::kH2D:
      return {86, 180, 233};  // sky blue
    case Phase::kForward:
      return {0, 158, 115};  // green
    case Phase::kBackward:
      return {0, 114, 178};  // blue
    case Phase::kAllReduce:
      return {213, 94, 0};  // vermillion
    case Phase::kOptimizer:
      return {204, 121, 167};  // pink
    case Phase::kStep:
      return {120, 120, 120};  // grey
    case Phase::kProfile:
      return {0, 0, 0};  // black
    case Phase::kGradCast:
      return {240, 228, 66};  // yellow
    case Phase::kBatchNormSync:
      return {170, 51, 119};  // purple
  }
  return {0, 0, 0};
}

// Each mode lives in its own inline namespace, so that a translation unit compiled with
// NVTX_DISABLE can share a program with enabled ones without two different definitions of
// Range (and of its inline constructor) under one name: the linker would keep either.
#if SCALESCOPE_NVTX_ENABLED
inline namespace enabled {

struct Domain {
  static constexpr const char* name{"scalescope"};
};

namespace detail {

// Registered once per process (first use), so a range carries a handle, not a string.
const nvtx3::registered_string_in<Domain>& message(Phase phase);
const nvtx3::named_category_in<Domain>& category(Phase phase);
// phase_color(phase) as NVTX takes it.
nvtx3::color color(Phase phase);

}  // namespace detail

// A scoped range of one phase of step `step`. Cannot be copied or heap-allocated.
class Range {
 public:
  Range(Phase phase, int64_t step)
      : range_(nvtx3::event_attributes{detail::message(phase), detail::category(phase),
                                       detail::color(phase), nvtx3::payload{step}}) {}
  // With its own text (e.g. "allreduce bucket 2: 1,048,576 B"): for ranges whose message
  // carries more than the phase. The text is copied by the tool when the range opens.
  Range(Phase phase, int64_t step, const char* text)
      : range_(nvtx3::event_attributes{nvtx3::message{text}, detail::category(phase),
                                       detail::color(phase), nvtx3::payload{step}}) {}
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  void* operator new(std::size_t) = delete;

 private:
  nvtx3::scoped_range_in<Domain> range_;
};

// Initialises NVTX (once; thread-safe). Call before threads start making ranges: NVTX's own
// lazy initialisation is not synchronised.
void initialize();
// Names the calling OS thread in the timeline ("scalescope replica 0"). Initialises first.
void name_current_thread(const char* name);

}  // namespace enabled
#else
inline namespace disabled {

// Empty: no state and no code (sizeof is C++'s minimum, 1).
class Range {
 public:
  constexpr Range(Phase, int64_t) noexcept {}
  constexpr Range(Phase, int64_t, const char*) noexcept {}
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  void* operator new(std::size_t) = delete;
};

inline void initialize() {}
inline void name_current_thread(const char*) {}

}  // namespace disabled
#endif

}  // namespace scalescope::nvtx
