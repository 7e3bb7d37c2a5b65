// Where each step of one rank's trace went: every instant of the step counted once, by what
// occupied the timeline the step waits for (classify.h's precedence: compute, then
// communication, then copies, then the host's input), and the rest idle. In a trace without
// device activity that timeline is the training thread (the one the steps are on): its own
// work first, whatever it is; other threads' (Gloo's collectives) only while it waits. So the
// exclusive figures of a step add up to its time, and totals (communication, host-to-device copies)
// say how long that work ran whether or not something hid it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reports/trace_analysis/trace_model.h"

namespace scalescope::traces {

// A step: a range on the host (ProfilerStep#N, a range named by --step-range, scalescope's step
// event). Device work counts in the step whose range it ran in, whoever launched it.
struct StepWindow {
  int64_t number = 0;  // the number in its name ("ProfilerStep#12": 12), else its position
  double start_us = 0.0;
  double end_us = 0.0;
  int64_t lane = 0;  // the thread its range is on
};

// The ranges of the trace that are steps: those the rule table classifies as steps
// (ProfilerStep#N, scalescope's), or with `step_range` those it names (names_step_range).
// Steps are taken from one lane: the first lane, in time, that has one. Throws Error naming the
// trace's file when there is none, saying what was looked for.
std::vector<StepWindow> find_steps(const RankTrace& trace, const std::string& step_range);

struct StepBreakdown {
  int64_t step = 0;
  double start_us = 0.0;
  double step_ms = 0.0;
  // Exclusive: these add up to step_ms. Compute is split by the phase its launch (or, on a host
  // timeline, the op itself) was in; compute outside backward and the optimizer is forward.
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double optimizer_ms = 0.0;
  double communication_exposed_ms = 0.0;  // communication while no compute ran
  double h2d_exposed_ms = 0.0;            // host-to-device copies while neither ran
  double copy_exposed_ms = 0.0;           // other copies and memsets, likewise
  double input_ms = 0.0;                  // the host loading data while none of the above ran
  double idle_ms = 0.0;                   // nothing of the above
  // Totals, hidden or not.
  double communication_ms = 0.0;
  double h2d_ms = 0.0;

  double compute_ms() const { return forward_ms + backward_ms + optimizer_ms; }
  // The timeline was busy: compute, or work that nothing hid.
  double busy_ms() const {
    return compute_ms() + communication_exposed_ms + h2d_exposed_ms + copy_exposed_ms;
  }
  double exclusive_sum_ms() const { return busy_ms() + input_ms + idle_ms; }
};

// REQUIRES: steps sorted by start (find_steps returns them so).
std::vector<StepBreakdown> break_down(const RankTrace& trace, const std::vector<StepWindow>& steps);

}  // namespace scalescope::traces
