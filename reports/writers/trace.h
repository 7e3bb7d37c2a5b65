// Timelines for people without Nsight: a run's measured steps as a Chrome / Perfetto trace
// (Trace Event Format, JSON). One process per replica; one thread per Track — input (waiting
// for the batch), copy (host to device), compute (forward, backward, waiting for the
// all-reduce, optimizer) and communication (each bucket's all-reduce); each phase a complete
// event with its step and its NVTX category, and bucket bytes on the communication track.
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

// The thread id of a track within each replica's process: 1 input, 2 copy, 3 compute,
// 4 communication.
constexpr int trace_thread(Track track) {
  return static_cast<int>(track) + 1;
}

// The exposed phases (kPhases) run back to back from each step's start
// (PhaseTimes::start_ms), each on its phase's track and named by its label; the all-reduce
// that ran hidden or not is its buckets, on the communication track, and the batch's copy
// (which may have run during the step before) is on the copy track. With gradient
// accumulation the micro-batches' forward and backward passes are shown as one forward and
// one backward. Times are microseconds from the run's start on the host clock.
nlohmann::json chrome_trace(const std::vector<StepRecord>& steps, const TraceInfo& info);
// The trace as JSON text. Strings that are not valid UTF-8 (a label from the command line)
// have their bad bytes replaced by U+FFFD, so that the text is always valid JSON.
std::string chrome_trace_text(const std::vector<StepRecord>& steps, const TraceInfo& info);
// Atomic; throws Error naming the path.
void write_chrome_trace(const std::string& path, const std::vector<StepRecord>& steps,
                        const TraceInfo& info);

}  // namespace scalescope
