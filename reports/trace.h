// Timelines for people without Nsight: a run's measured steps as a Chrome / Perfetto trace
// (Trace Event Format, JSON). One process per replica; one track per role — input (waiting
// for the batch), copy (host to device), compute (forward, backward, waiting for the
// all-reduce, optimizer) and communication (each bucket's all-reduce); each phase a complete
// event with its step, and bucket bytes on the communication track.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "reports/run_report.h"

namespace scalescope {

struct TraceInfo {
  std::string label;  // e.g. "cifar-cnn cpu:2 batch 64"
  std::vector<int64_t> bucket_bytes;
};

// Track (thread) ids within each replica's process.
inline constexpr int kTraceInputTrack = 1;
inline constexpr int kTraceCopyTrack = 2;
inline constexpr int kTraceComputeTrack = 3;
inline constexpr int kTraceCommTrack = 4;

// Phases run back to back from each step's start (PhaseTimes::start_ms): input, h2d, forward,
// backward, the exposed all-reduce wait, optimizer. With gradient accumulation the
// micro-batches' forward and backward passes are shown as one forward and one backward.
// Times are microseconds from the run's start on the host clock.
nlohmann::json chrome_trace(const std::vector<StepRecord>& steps, const TraceInfo& info);
// Atomic; throws Error naming the path.
void write_chrome_trace(const std::string& path, const std::vector<StepRecord>& steps,
                        const TraceInfo& info);

}  // namespace scalescope
