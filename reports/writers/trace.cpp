#include "reports/writers/trace.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "core/fs.h"
#include "core/nvtx.h"

namespace scalescope {

using nlohmann::json;

namespace {

json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json complete(const std::string& name, const nvtx::Category& category, int pid, int tid,
              double start_ms, double ms, json args) {
  return {{"name", name}, {"cat", category.name}, {"ph", "X"},       {"pid", pid},
          {"tid", tid},   {"ts", start_ms * 1e3}, {"dur", ms * 1e3}, {"args", std::move(args)}};
}

constexpr std::array<std::pair<Track, const char*>, 4> kTrackNames = {{
    {Track::kInput, "input"},
    {Track::kCopy, "copy (h2d)"},
    {Track::kCompute, "compute"},
    {Track::kCommunication, "communication"},
}};

// One replica's step: the step itself enclosing its phases, then its buckets.
void add_step(json& events, int64_t step, int pid, const PhaseTimes& p, const TraceInfo& info) {
  const json args = {{"step", step}};
  events.push_back(complete(fmt::format("step {}", step), nvtx::kStep, pid,
                            trace_thread(Track::kCompute), p.start_ms, p.step_ms, args));
  double t = p.start_ms;
  for (const PhaseDef& d : kPhases) {
    if (!d.exposed) continue;
    events.push_back(complete(d.label, nvtx::category(d.phase), pid, trace_thread(d.track), t,
                              p[d.phase], args));
    t += p[d.phase];
  }
  if (p.copy.ms > 0.0) {
    const PhaseDef& copy = phase_def(Phase::kH2DTotal);
    events.push_back(complete(copy.label, nvtx::category(copy.phase), pid, trace_thread(copy.track),
                              p.copy.start_ms, p.copy.ms, args));
  }
  const PhaseDef& allreduce = phase_def(Phase::kAllReduce);
  for (size_t b = 0; b < p.buckets.size(); ++b) {
    const int64_t bytes = b < info.bucket_bytes.size() ? info.bucket_bytes[b] : 0;
    events.push_back(complete(fmt::format("allreduce bucket {}", b),
                              nvtx::category(allreduce.phase), pid, trace_thread(allreduce.track),
                              p.buckets[b].start_ms, p.buckets[b].ms,
                              {{"step", step}, {"bucket", b}, {"bytes", bytes}}));
  }
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
    for (const auto& [track, name] : kTrackNames) {
      events.push_back(metadata("thread_name", pid, trace_thread(track), name));
    }
  }
  for (const StepRecord& s : steps) {
    for (size_t r = 0; r < s.replicas.size(); ++r) {
      add_step(events, s.step, static_cast<int>(r), s.replicas[r], info);
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"generator", "scalescope"}, {"point", info.label}}}};
}

std::string chrome_trace_text(const std::vector<StepRecord>& steps, const TraceInfo& info) {
  return chrome_trace(steps, info).dump(-1, ' ', false, json::error_handler_t::replace);
}

void write_chrome_trace(const std::string& path, const std::vector<StepRecord>& steps,
                        const TraceInfo& info) {
  write_file_atomic(path, chrome_trace_text(steps, info) + "\n");
}

}  // namespace scalescope
