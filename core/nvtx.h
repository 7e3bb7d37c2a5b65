// NVTX ranges for Nsight Systems timelines: one domain "scalescope", the categories of the
// phase table (core/phases.h) and two more, registered strings, the step number as payload.
// Compiled out, to empty inline code that includes no NVTX header, when the NVTX3 headers are
// absent or turned off (SCALESCOPE_WITH_NVTX=0, the CMake option SCALESCOPE_NVTX=OFF) or
// NVTX_DISABLE is defined.
//
// Without a tool attached (nsys, or an injection library named by NVTX_INJECTION64_PATH)
// every call returns after one branch, so ranges cost nothing measurable in a step.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/phases.h"

#if SCALESCOPE_WITH_NVTX && !defined(NVTX_DISABLE)
#define SCALESCOPE_NVTX_ENABLED 1
#include <nvtx3/nvtx3.hpp>
#else
#define SCALESCOPE_NVTX_ENABLED 0
#endif

namespace scalescope::nvtx {

// An NVTX category of the scalescope domain.
struct Category {
  uint32_t id;
  const char* name;  // also the message of a range without a text of its own
  Rgb color;
};

// The category of a phase's ranges: the phase's own, named by its key, or the one it shares
// (core/phases.h's NVTX column).
constexpr Category category(Phase phase) {
  const Phase owner = nvtx_phase(phase);
  return {static_cast<uint32_t>(index_of(owner)) + 1, phase_def(owner).key, phase_color(owner)};
}
// Ranges that are not phases: a whole step, and the steps a profiler should capture
// (--profile-steps: nsys's NVTX capture range).
inline constexpr Category kStep{kPhaseCount + 1, "step", {120, 120, 120}};  // grey
inline constexpr Category kProfile{kPhaseCount + 2, "profile", {0, 0, 0}};  // black

// Every category: the phases' own, then kStep and kProfile.
inline constexpr auto kCategories = [] {
  constexpr auto owns = [](const PhaseDef& d) { return !d.nvtx.of; };
  std::array<Category, std::count_if(kPhases.begin(), kPhases.end(), owns) + 2> out{};
  size_t i = 0;
  for (const PhaseDef& d : kPhases) {
    if (owns(d)) out[i++] = category(d.phase);
  }
  out[i++] = kStep;
  out[i] = kProfile;
  return out;
}();
static_assert(std::adjacent_find(kCategories.begin(), kCategories.end(),
                                 [](const Category& a, const Category& b) {
                                   return a.id >= b.id;
                                 }) == kCategories.end(),
              "kCategories: ids distinct, in increasing order");

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
// REQUIRES: `c` is one of kCategories.
const nvtx3::registered_string_in<Domain>& message(const Category& c);
const nvtx3::named_category_in<Domain>& named(const Category& c);
inline nvtx3::color color(const Category& c) {
  return nvtx3::rgb{c.color.red, c.color.green, c.color.blue};
}

}  // namespace detail

// A scoped range of category `c` (or of a phase's) in step `step`. Cannot be copied or
// heap-allocated.
class Range {
 public:
  Range(const Category& c, int64_t step)
      : range_(nvtx3::event_attributes{detail::message(c), detail::named(c), detail::color(c),
                                       nvtx3::payload{step}}) {}
  Range(Phase phase, int64_t step) : Range(category(phase), step) {}
  // With its own text (e.g. "allreduce bucket 2: 1,048,576 B"): for ranges whose message
  // carries more than the category. The text is copied by the tool when the range opens.
  Range(const Category& c, int64_t step, const char* text)
      : range_(nvtx3::event_attributes{nvtx3::message{text}, detail::named(c), detail::color(c),
                                       nvtx3::payload{step}}) {}
  Range(Phase phase, int64_t step, const char* text) : Range(category(phase), step, text) {}
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
  constexpr Range(const Category&, int64_t) noexcept {}
  constexpr Range(Phase, int64_t) noexcept {}
  constexpr Range(const Category&, int64_t, const char*) noexcept {}
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
