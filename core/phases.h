// The phases of a training step, as one table: a row per phase, in step order, with its key,
// its label, its NVTX category and colour, whether the step waits for it, what kind of work it
// is, where it runs, how often the step timer ends it, and what runs from before it was
// measured had instead. NVTX's categories (core/nvtx.h), the trainer's timer, and every report
// writer and reader, chart, trace, comparison and analysis rule (reports/phases.h) iterate this
// table instead of naming phases, so a new phase is a new enumerator and a new row (plus its
// measurement, and its keys in the JSON Schema files).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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

// sRGB. Stable across runs so that timelines can be compared by eye, and shared by NVTX and
// the HTML report's charts: a phase looks the same in Nsight and in the report.
struct Rgb {
  uint8_t red = 0, green = 0, blue = 0;
};

// A phase's NVTX category: one of its own (named by its key, in its colour), or that of the
// phase whose work it is part of (the exposed all-reduce is a wait for the all-reduce).
struct NvtxColumn {
  std::optional<Phase> of;  // the phase whose category it shares; none: its own
  Rgb color{};              // its own category's colour
};
constexpr NvtxColumn own_category(Rgb color) {
  return {std::nullopt, color};
}
constexpr NvtxColumn category_of(Phase phase) {
  return {phase, {}};
}

// The phase ends the trainer's step timer records in a step (an event at each end).
enum class TimerEnds {
  kNone,           // measured apart: the copy's own events, the reducer's times
  kOncePerStep,    // a scope of its own once per step
  kPerMicroBatch,  // a scope of its own once per micro-batch
  // Inserted into another phase at each sync point (StepTimer::split): its own end and the
  // end of the part before it.
  kPerSyncPoint,
};

// What a phase's time was in runs made before the trainer measured it, so that their reports
// still read: always measured (a report without it is refused), its work not done then (0),
// or the same as another phase's time.
struct Earlier {
  enum class Was { kMeasured, kNotDone, kSameAs } was = Was::kMeasured;
  Phase same_as = Phase::kInput;  // kSameAs only
};
inline constexpr Earlier kAlwaysMeasured{};
inline constexpr Earlier kNotDoneBefore{Earlier::Was::kNotDone};
constexpr Earlier same_as(Phase phase) {
  return {Earlier::Was::kSameAs, phase};
}

struct PhaseDef {
  Phase phase;
  const char* key;    // JSON key stem ("forward": "forward_ms"); compare's metric name
  const char* label;  // for people: legends, trace events, explanations
  NvtxColumn nvtx;
  // The step waited for it: the exposed phases of a step add up to its wall time (apart from
  // the loss read that ends the step).
  bool exposed;
  PhaseKind kind;
  Track track;
  TimerEnds ends;
  Earlier earlier;

  // The key of its time in reports and in the results that cross processes.
  std::string json_key() const { return std::string(key) + "_ms"; }
};

// The table, in step order (row i describes Phase i). The colours are the Okabe-Ito palette's
// (batch-norm sync's is Paul Tol's purple), which colour-blind readers can tell apart.
inline constexpr auto kPhases = std::to_array<PhaseDef>({
    // phase, key, label,
    //   NVTX, exposed, kind, track, timer ends, in earlier runs
    {Phase::kInput, "input", "input",  //
     own_category({230, 159, 0}), true, PhaseKind::kInput, Track::kInput, TimerEnds::kOncePerStep,
     kAlwaysMeasured},
    {Phase::kH2D, "h2d", "exposed host-to-device copy",  //
     own_category({86, 180, 233}), true, PhaseKind::kInput, Track::kCompute,
     TimerEnds::kOncePerStep, kAlwaysMeasured},
    // Before sweep 1.13 and run 1.9 the copy never overlapped: its total was its exposed part.
    {Phase::kH2DTotal, "h2d_total", "host-to-device copy",  //
     category_of(Phase::kH2D), false, PhaseKind::kInput, Track::kCopy, TimerEnds::kNone,
     same_as(Phase::kH2D)},
    {Phase::kForward, "forward", "forward",  //
     own_category({0, 158, 115}), true, PhaseKind::kCompute, Track::kCompute,
     TimerEnds::kPerMicroBatch, kAlwaysMeasured},
    {Phase::kBackward, "backward", "backward",  //
     own_category({0, 114, 178}), true, PhaseKind::kCompute, Track::kCompute,
     TimerEnds::kPerMicroBatch, kAlwaysMeasured},
    {Phase::kAllReduce, "allreduce", "all-reduce",  //
     own_category({213, 94, 0}), false, PhaseKind::kCommunication, Track::kCommunication,
     TimerEnds::kNone, kAlwaysMeasured},
    {Phase::kAllReduceExposed, "allreduce_exposed", "exposed all-reduce",  //
     category_of(Phase::kAllReduce), true, PhaseKind::kCommunication, Track::kCompute,
     TimerEnds::kOncePerStep, kAlwaysMeasured},
    {Phase::kOptimizer, "optimizer", "optimizer",  //
     own_category({204, 121, 167}), true, PhaseKind::kCompute, Track::kCompute,
     TimerEnds::kOncePerStep, kAlwaysMeasured},
    // Since sweep 1.6 and run 1.5.
    {Phase::kGradCast, "grad_cast", "gradient cast",  //
     own_category({240, 228, 66}), false, PhaseKind::kCommunication, Track::kCommunication,
     TimerEnds::kNone, kNotDoneBefore},
    // Since sweep 1.9 and run 1.7.
    {Phase::kBatchNormSync, "batchnorm_sync", "batch-norm sync",  //
     own_category({170, 51, 119}), true, PhaseKind::kCommunication, Track::kCompute,
     TimerEnds::kPerSyncPoint, kNotDoneBefore},
});
inline constexpr size_t kPhaseCount = kPhases.size();

constexpr size_t index_of(Phase phase) {
  return static_cast<size_t>(phase);
}
constexpr const PhaseDef& phase_def(Phase phase) {
  return kPhases[index_of(phase)];
}
// The phase whose NVTX category `phase`'s ranges carry: itself, or the one it shares.
constexpr Phase nvtx_phase(Phase phase) {
  return phase_def(phase).nvtx.of.value_or(phase);
}
// Its colour in timelines and charts: its NVTX category's.
constexpr Rgb phase_color(Phase phase) {
  return phase_def(nvtx_phase(phase)).nvtx.color;
}

static_assert(
    [] {
      for (size_t i = 0; i < kPhaseCount; ++i) {
        if (index_of(kPhases[i].phase) != i) return false;
      }
      return true;
    }(),
    "kPhases: row i describes Phase i");
static_assert(std::all_of(kPhases.begin(), kPhases.end(),
                          [](const PhaseDef& d) {
                            return !d.nvtx.of || !phase_def(*d.nvtx.of).nvtx.of;
                          }),
              "kPhases: a shared NVTX category is a phase's own");

}  // namespace scalescope
