// Settings read from SCALESCOPE_* environment variables: those a run needs without a flag of
// its own (the simulated devices' jitter and link, a kernel's tuning for a benchmark). The run
// report records every SCALESCOPE_* variable (harness/telemetry/environment.cpp), so a setting
// read here is never invisible in the results.
#pragma once

#include <cstdint>

namespace scalescope {

// A whole number from 0 to `max` in the environment variable `name`, 0 when it is unset or
// empty. Throws Error naming the variable, its value, `unit` and the range otherwise.
int64_t whole_number_from_environment(const char* name, int64_t max, const char* unit);

}  // namespace scalescope
