// A training job as its traces show it: per rank, the breakdown of every step (timeline.h);
// across ranks, the steps they share. And the job as a sweep point, so that the analysis, the
// verdicts, the efficiency-loss split, the waterfall and compare that scalescope's own sweeps
// use (reports/sweep_report.h) apply to it unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reports/sweep_report.h"
#include "reports/trace_analysis/timeline.h"
#include "reports/trace_analysis/trace_model.h"

namespace scalescope::traces {

struct RankSteps {
  int rank = 0;
  std::string file;
  TraceFormat format = TraceFormat::kKineto;
  bool device = false;  // its timeline is a device's (kernels, copies), not the host's
  std::vector<StepBreakdown> steps;
};

// One run of a job.
struct JobSteps {
  std::vector<RankSteps> ranks;  // ascending rank, at least one

  bool device() const;  // any rank's timeline is a device's
  // The step numbers every rank has, ascending: the group's steps.
  std::vector<int64_t> common_steps() const;
};

// The job of these traces (several files, or one holding several ranks). A trace that does not
// say its rank takes 0 when it is the only one. Throws Error naming the file(s): a trace whose
// rank is unknown among several, two traces of one rank, a trace without steps (find_steps),
// ranks that share no step number.
JobSteps job_of(std::vector<RankTrace> traces, const std::string& step_range);
// read_trace_file on each trace the paths name (trace_paths: a directory names those in it),
// then job_of.
JobSteps read_job(const std::vector<std::string>& files, const std::string& step_range);

// The job as a point of a sweep: model `name`, one device per rank ("cuda" when its timelines
// are a device's, "cpu" otherwise), weak scaling at `batch` per rank (1 when not known: then
// throughput counts steps), one repeat whose steps are the common steps. Each rank's phases:
// input wait -> input, host-to-device copies exposed and total -> the copy phases, forward,
// backward, optimizer, communication total and exposed -> all-reduce; copies other than
// host-to-device and idle time stay in the step and outside every phase (the loss split's
// "other"). Device timelines give the repeat's utilisation: the busy share of the steps.
SweepPoint sweep_point(const JobSteps& job, const std::string& name, int64_t batch);

}  // namespace scalescope::traces
