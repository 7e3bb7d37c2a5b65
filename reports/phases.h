// The report side of the phase table (core/phases.h): a time per phase, a step's phases, and
// their JSON. Every report writer and reader, chart, trace, comparison and analysis rule
// iterates the table instead of naming phases.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/phases.h"
#include "reports/json_reader.h"

namespace scalescope {

// Whether a report may lack the phase's time (its row's Earlier column): phases whose work
// runs before them did not do.
constexpr bool absent_means_zero(Phase phase) {
  return phase_def(phase).earlier.was == Earlier::Was::kNotDone;
}
// The phase whose time a report lacking `phase` gives it, if any.
constexpr std::optional<Phase> absent_means_same_as(Phase phase) {
  const Earlier& e = phase_def(phase).earlier;
  if (e.was == Earlier::Was::kSameAs) return e.same_as;
  return std::nullopt;
}

// One time per phase, indexed by Phase.
class PhaseValues {
 public:
  double& operator[](Phase p) { return ms_[index_of(p)]; }
  double operator[](Phase p) const { return ms_[index_of(p)]; }
  // The exposed phases added up.
  double exposed_sum_ms() const;
  // The exposed phases of one kind added up: kInput the input wait (input + h2d), kCompute
  // the compute (forward + backward + optimizer), kCommunication the exposed all-reduce.
  double exposed_ms(PhaseKind kind) const;

 private:
  std::array<double, kPhaseCount> ms_{};
};

// One replica's phases of one step.
struct PhaseTimes : PhaseValues {
  double step_ms = 0.0;  // exposed_sum_ms() within 2% (DESIGN.md's measurement rules)
  // When the step began on the device, in ms since the run began on the host's steady clock
  // (device event times are put on that clock once per run). Timelines use it.
  double start_ms = 0.0;
  // Each bucket's all-reduce on the communication thread (or inline): start, on the same
  // clock, and duration. For timelines and results that cross processes; reports leave them
  // out.
  struct Interval {
    double start_ms = 0.0;
    double ms = 0.0;
  };
  std::vector<Interval> buckets{};
  Interval copy{};  // the batch's host-to-device copy on the copy stream (none: ms 0)
};

// Named records with the keys the run report uses ("input_ms", ..., "step_ms", "start_ms"),
// for results that cross processes. with_buckets adds "buckets": [[start_ms, ms], ...] and
// "copy": [start_ms, ms].
nlohmann::json to_json(const PhaseTimes& p, bool with_buckets);
// Strict: throws Error naming a key that is missing or not a finite number; reads "buckets"
// and "copy" when present.
PhaseTimes phase_times_from_json(const JsonReader& r);

// The replica that set the step's time: the largest step_ms, the first of equals.
// REQUIRES: replicas non-empty.
const PhaseTimes& slowest_replica(std::span<const PhaseTimes> replicas);

}  // namespace scalescope
