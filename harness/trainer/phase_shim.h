// TEMPORARY until reports/phases.h lands (replaced then).
#pragma once
#include "core/nvtx.h"
#include "reports/run_report.h"
namespace scalescope {
enum class Phase { kInput, kH2D, kForward, kBackward, kAllReduce, kAllReduceExposed, kOptimizer };
struct PhaseDef {
  Phase phase;
  nvtx::Phase nvtx;
};
inline PhaseDef phase_def(Phase p) {
  constexpr nvtx::Phase n[] = {nvtx::Phase::kInput,     nvtx::Phase::kH2D,
                               nvtx::Phase::kForward,   nvtx::Phase::kBackward,
                               nvtx::Phase::kAllReduce, nvtx::Phase::kAllReduce,
                               nvtx::Phase::kOptimizer};
  return {p, n[static_cast<int>(p)]};
}
inline double& at(PhaseTimes& t, Phase p) {
  double PhaseTimes::*m[] = {&PhaseTimes::input_ms,     &PhaseTimes::h2d_ms,
                             &PhaseTimes::forward_ms,   &PhaseTimes::backward_ms,
                             &PhaseTimes::allreduce_ms, &PhaseTimes::allreduce_exposed_ms,
                             &PhaseTimes::optimizer_ms};
  return t.*m[static_cast<int>(p)];
}
}  // namespace scalescope
