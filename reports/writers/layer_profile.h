// The table `train --profile-layers` prints: the layers that took longest, as
// torch.profiler's key_averages().table() lists operators, but per layer of the model.
#pragma once

#include <cstddef>
#include <string>

#include "reports/run_report.h"
#include "reports/sweep_report.h"

namespace scalescope {

// The `top` layers by forward + backward time, the rest summed in one row, and what the
// layers add up to beside the forward and backward phases they ran in. "" without a profile.
std::string format_layer_profile(const RunReport& report, size_t top = 15);

// A sweep's: one line per point with a profile, its `top` slowest layers. "" without any.
std::string format_point_layers(const SweepReport& report, size_t top = 3);

}  // namespace scalescope
