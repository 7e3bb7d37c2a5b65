// Terminal tables of a sweep report: per model, devices × batch with throughput, speedup,
// efficiency and the top bottleneck; then the efficiency-loss breakdown, the
// communication model, the bucket caps and the gradient compression against none.
#pragma once

#include <string>

#include "reports/sweep_report.h"

namespace scalescope {

std::string format_sweep_tables(const SweepReport& report);

}  // namespace scalescope
