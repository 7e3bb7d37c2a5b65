#include "reports/trace.h"

#include <fmt/format.h>

#include "core/fs.h"
#include "core/nvtx.h"

namespace scalescope {

using nlohmann::json;

namespace {

json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json complete(const std::string& name, nvtx::Phase phase, int pid, int tid, double start_ms,
              double ms, json args) {
  return {{"name", name},    {"cat", nvtx::phase_name(phase)},
          {"ph", "X"},       {"pid", pid},
          {"tid", tid},      {"ts", start_ms * 1e3},
          {"dur", ms * 1e3}, {"args", std::move(args)}};
}

}  // namespace

json chrome_trace(const std::vector<StepRecord>& steps, const TraceInfo& info) {
  json events = json::array();
  const size_t replicas = steps.empty() ? 0 : steps.front().replicas.size();
  for (size_t r = 0; r < replicas; ++r) {
    const int pid = static_cast<int>(r);
    events.push_back(metadata("process_name", pid, 0, fmt::format("replica {}", r)));
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
    events.push_back(metadata("thread_name", pid, kTraceInputTrack, "input"));
    events.push_back(metadata("thread_name", pid, kTraceCopyTrack, "copy (h2d)"));
    events.push_back(metadata("thread_name", pid, kTraceComputeTrack, "compute"));
    events.push_back(metadata("thread_name", pid, kTraceCommTrack, "communication"));
  }
  for (const StepRecord& s : steps) {
    for (size_t r = 0; r < s.replicas.size(); ++r) {
      const PhaseTimes& p = s.replicas[r];
      const int pid = static_cast<int>(r);
      const json step = {{"step", s.step}};
      double t = p.start_ms;
      const auto phase = [&](const char* name, nvtx::Phase kind, int tid, double ms) {
        events.push_back(complete(name, kind, pid, tid, t, ms, step));
        t += ms;
      };
      // The step encloses its phases on the compute track.
      events.push_back(complete(fmt::format("step {}", s.step), nvtx::Phase::kStep, pid,
                                kTraceComputeTrack, p.start_ms, p.step_ms, step));
      phase("input", nvtx::Phase::kInput, kTraceInputTrack, p.input_ms);
      phase("h2d", nvtx::Phase::kH2D, kTraceCopyTrack, p.h2d_ms);
      phase("forward", nvtx::Phase::kForward, kTraceComputeTrack, p.forward_ms);
      phase("backward", nvtx::Phase::kBackward, kTraceComputeTrack, p.backward_ms);
      phase("allreduce wait", nvtx::Phase::kAllReduce, kTraceComputeTrack, p.allreduce_exposed_ms);
      phase("optimizer", nvtx::Phase::kOptimizer, kTraceComputeTrack, p.optimizer_ms);
      for (size_t b = 0; b < p.buckets.size(); ++b) {
        const int64_t bytes = b < info.bucket_bytes.size() ? info.bucket_bytes[b] : 0;
        events.push_back(complete(fmt::format("allreduce bucket {}", b), nvtx::Phase::kAllReduce,
                                  pid, kTraceCommTrack, p.buckets[b].start_ms, p.buckets[b].ms,
                                  {{"step", s.step}, {"bucket", b}, {"bytes", bytes}}));
      }
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"generator", "scalescope"}, {"point", info.label}}}};
}

void write_chrome_trace(const std::string& path, const std::vector<StepRecord>& steps,
                        const TraceInfo& info) {
  write_file_atomic(path, chrome_trace(steps, info).dump() + "\n");
}

}  // namespace scalescope
