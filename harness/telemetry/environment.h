// Captures the environment a measurement runs in (see reports/environment.h).
#pragma once

#include <string>

#include "reports/environment.h"

namespace scalescope {

// Reads the host (/proc, /etc/os-release, uname), the GPUs and library versions, the build
// facts and the allowlisted environment variables. Never throws for a missing GPU or
// driver: Environment::gpu_error says why there are no GPUs. Creates no CUDA context.
Environment capture_environment(const std::string& command_line);

// Whether an environment variable of this name may go into a report: only names that
// describe the run (NCCL_*, OMP_*, CUDA_VISIBLE_DEVICES, ...), so that no secret leaks.
bool is_allowlisted_env_var(const std::string& name);

}  // namespace scalescope
