// The phases of a training step, as one table: a row per phase, in step order, with its JSON
// key, its label, its NVTX category (and so its colour), whether the step waits for it, what
// kind of work it is and where it runs. Every report writer and reader, chart, trace,
// comparison and analysis rule iterates this table instead of naming phases, so a new phase
// is a new enumerator and a new row (plus its measurement, and the JSON Schema files).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/nvtx.h"
#include "reports/json_reader.h"

namespace scalescope {

enum class Phase {
  kInput,
  kH2D,       // what the step waited for its batch's copy (all of it when not prefetched)
  kH2DTotal,  // how long the copy ran on the copy stream, hidden behind compute or not
  kForward,
  kBackward,
  kAllReduce,         // total: how long the buckets' all-reduces ran, hidden behind backward or not
  kAllReduceExposed,  // what the step waited for after backward
  kOptimizer,
  // Gradient compression: the casts to the 16-bit type and back around each bucket's
  // all-reduce, on the communication thread or stream (0 without compression). Like the
  // all-reduce, the step waits only for what is not hidden behind backward, which the exposed
  // all-reduce includes.
  kGradCast,
  // --sync-batchnorm: the all-reduces of batch norm's statistics, which forward and backward
  // wait for (communication on the compute's critical path); 0 without.
  kBatchNormSync,
};

// What a phase's time is spent on. The analysis adds the exposed phases up by kind: the input
// wait, the compute, the communication the step waited for.
enum class PhaseKind { kInput, kCompute, kCommunication };

// Where a phase's work runs: its track in a timeline.
enum class Track { kInput, kCopy, kCompute, kCommunication };

struct PhaseDef {
  Phase phase;
  const char* key;    // JSON key stem ("forward": "forward_ms"); compare's metric name
  const char* label;  // for people: legends, trace events, explanations
  nvtx::Phase nvtx;   // its NVTX category, and so its colour in Nsight and in the reports
  // The step waited for it: the exposed phases of a step add up to its wall time (apart from
  // the loss read that ends the step).
  bool exposed;
  PhaseKind kind;
  Track track;

  std::string json_key() const { return std::string(key) + "_ms"; }
  nvtx::PhaseColor color() const { return nvtx::phase_color(nvtx); }
};

// The table, in step order (row i describes Phase i). Columns: phase, key, label, NVTX
// category, exposed, kind, track.
inline constexpr auto kPhases = std::to_array<PhaseDef>({
    {Phase::kInput, "input", "input", nvtx::Phase::kInput, true, PhaseKind::kInput, Track::kInput},
    {Phase::kH2D, "h2d", "exposed host-to-device copy", nvtx::Phase::kH2D, true, PhaseKind::kInput,
     Track::kCompute},
    {Phase::kH2DTotal, "h2d_total", "host-to-device copy", nvtx::Phase::kH2D, false,
     PhaseKind::kInput, Track::kCopy},
    {Phase::kForward, "forward", "forward", nvtx::Phase::kForward, true, PhaseKind::kCompute,
     Track::kCompute},
    {Phase::kBackward, "backward", "backward", nvtx::Phase::kBackward, true, PhaseKind::kCompute,
     Track::kCompute},
    {Phase::kAllReduce, "allreduce", "all-reduce", nvtx::Phase::kAllReduce, false,
     PhaseKind::kCommunication, Track::kCommunication},
    {Phase::kAllReduceExposed, "allreduce_exposed", "exposed all-reduce", nvtx::Phase::kAllReduce,
     true, PhaseKind::kCommunication, Track::kCompute},
    {Phase::kOptimizer, "optimizer", "optimizer", nvtx::Phase::kOptimizer, true,
     PhaseKind::kCompute, Track::kCompute},
    {Phase::kGradCast, "grad_cast", "gradient cast", nvtx::Phase::kGradCast, false,
     PhaseKind::kCommunication, Track::kCommunication},
    {Phase::kBatchNormSync, "batchnorm_sync", "batch-norm sync", nvtx::Phase::kBatchNormSync, true,
     PhaseKind::kCommunication, Track::kCompute},
});
inline constexpr size_t kPhaseCount = kPhases.size();

// Whether a report may lack the phase's time: phases added after the reports' first schema
// version (the gradient cast, since sweep 1.6 and run 1.5; the batch-norm sync, since sweep
// 1.9 and run 1.7), whose work runs written before them did not do.
constexpr bool absent_means_zero(Phase phase) {
  return phase == Phase::kGradCast || phase == Phase::kBatchNormSync;
}
// The phase whose time a report lacking `phase` gives it, if any: the copy's total (since
// sweep 1.13 and run 1.9) is its exposed part in runs before, which never overlapped it.
constexpr std::optional<Phase> absent_means_same_as(Phase phase) {
  if (phase == Phase::kH2DTotal) return Phase::kH2D;
  return std::nullopt;
}

constexpr size_t index_of(Phase phase) {
  return static_cast<size_t>(phase);
}
constexpr const PhaseDef& phase_def(Phase phase) {
  return kPhases[index_of(phase)];
}
static_assert(
    [] {
      for (size_t i = 0; i < kPhaseCount; ++i) {
        if (index_of(kPhases[i].phase) != i) return false;
      }
      return true;
    }(),
    "kPhases: row i describes Phase i");

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
