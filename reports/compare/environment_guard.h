// The environment guard of `scalescope compare`: the facts of two reports' environments that
// change the numbers without the code changing, where they differ.
#pragma once

#include <string>
#include <vector>

#include "reports/environment.h"

namespace scalescope {

// A fact of the environments that differs between the reports, and both values.
struct EnvironmentDifference {
  std::string what;  // "CPU model", "NCCL", ...
  std::string baseline;
  std::string current;
};

// GPU model names, GPU count, CUDA driver and runtime, cuDNN, NCCL, oneDNN, Gloo, build type,
// CPU model, logical and usable cores: what changes the numbers without the code changing.
std::vector<EnvironmentDifference> compare_environments(const Environment& baseline,
                                                        const Environment& current);

}  // namespace scalescope
