#include "reports/trace_analysis/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/check.h"
#include "reports/trace_analysis/readers.h"

namespace scalescope::traces {
namespace {

// Traces that do not say their rank: the only trace is rank 0; among several it is an error.
void number_ranks(std::vector<RankTrace>& traces) {
  for (RankTrace& t : traces) {
    if (t.rank >= 0) continue;
    SS_CHECK(traces.size() == 1,
             "{}: cannot tell its rank among {} traces: no distributedInfo.rank in it and no "
             "rank-N in its name (rename it, e.g. rank-1.json)",
             t.file, traces.size());
    t.rank = 0;
  }
  std::map<int, const RankTrace*> seen;
  for (const RankTrace& t : traces) {
    const auto [it, fresh] = seen.emplace(t.rank, &t);
    SS_CHECK(fresh, "{} and {}: both are traces of rank {}", it->second->file, t.file, t.rank);
  }
  std::sort(traces.begin(), traces.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
}

PhaseTimes phases_of(const StepBreakdown& s) {
  PhaseTimes p;
  for (const PhaseDef& d : kPhases) {
    double ms = 0.0;
    if (d.kind == PhaseKind::kInput) {
      ms = d.track == Track::kInput ? s.input_ms : d.exposed ? s.h2d_exposed_ms : s.h2d_ms;
    } else if (d.phase == Phase::kForward) {
      ms = s.forward_ms;
    } else if (d.phase == Phase::kBackward) {
      ms = s.backward_ms;
    } else if (d.phase == Phase::kOptimizer) {
      ms = s.optimizer_ms;
    } else if (d.phase == Phase::kAllReduce) {
      ms = s.communication_ms;
    } else if (d.phase == Phase::kAllReduceExposed) {
      ms = s.communication_exposed_ms;
    }
    p[d.phase] = ms;
  }
  p.step_ms = s.step_ms;
  p.start_ms = s.start_us / 1e3;
  return p;
}

const StepBreakdown* find_step(const RankSteps& r, int64_t step) {
  const auto it = std::find_if(r.steps.begin(), r.steps.end(),
                               [&](const StepBreakdown& s) { return s.step == step; });
  return it == r.steps.end() ? nullptr : &*it;
}

}  // namespace

bool JobSteps::device() const {
  return std::any_of(ranks.begin(), ranks.end(), [](const RankSteps& r) { return r.device; });
}

std::vector<int64_t> JobSteps::common_steps() const {
  std::vector<int64_t> out;
  if (ranks.empty()) return out;
  for (const StepBreakdown& s : ranks.front().steps) {
    const bool everywhere = std::all_of(ranks.begin(), ranks.end(), [&](const RankSteps& r) {
      return find_step(r, s.step) != nullptr;
    });
    if (everywhere) out.push_back(s.step);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

JobSteps job_of(std::vector<RankTrace> traces, const std::string& step_range) {
  SS_CHECK(!traces.empty(), "no traces to analyze");
  number_ranks(traces);
  JobSteps job;
  for (const RankTrace& t : traces) {
    RankSteps r;
    r.rank = t.rank;
    r.file = t.file;
    r.format = t.format;
    r.device = t.has_device();
    r.steps = break_down(t, find_steps(t, step_range));
    job.ranks.push_back(std::move(r));
  }
  if (job.ranks.size() > 1 && job.common_steps().empty()) {
    std::string list;
    for (const RankSteps& r : job.ranks) {
      list += fmt::format("{}rank {} ({}): steps {} to {}", list.empty() ? "" : "; ", r.rank,
                          r.file, r.steps.front().step, r.steps.back().step);
    }
    throw_error(
        fmt::format("the ranks share no step number, so no step can be compared across "
                    "them: {}",
                    list));
  }
  return job;
}

JobSteps read_job(const std::vector<std::string>& files, const std::string& step_range) {
  std::vector<RankTrace> traces;
  for (const std::string& path : files) {
    for (const std::string& f : trace_paths(path)) {
      for (RankTrace& t : read_trace_file(f)) traces.push_back(std::move(t));
    }
  }
  return job_of(std::move(traces), step_range);
}

SweepPoint sweep_point(const JobSteps& job, const std::string& name, int64_t batch) {
  SweepPoint p;
  p.model = name;
  p.device_kind = job.device() ? "cuda" : "cpu";
  p.devices = static_cast<int>(job.ranks.size());
  p.device_spec = fmt::format("{}:{}", p.device_kind, p.devices);
  p.batch = std::max<int64_t>(batch, 1);
  p.global_batch = p.batch * p.devices;
  RepeatRecord repeat;
  double busy = 0.0;
  double total = 0.0;
  for (const int64_t step : job.common_steps()) {
    StepRecord record;
    record.step = step;
    for (const RankSteps& r : job.ranks) {
      const StepBreakdown& s = *find_step(r, step);
      record.replicas.push_back(phases_of(s));
      busy += s.busy_ms();
      total += s.step_ms;
    }
    set_group_times(record);
    repeat.steps.push_back(std::move(record));
  }
  if (job.device() && total > 0.0) repeat.gpu_util_percent = 100.0 * busy / total;
  p.repeats.push_back(std::move(repeat));
  return p;
}

}  // namespace scalescope::traces
