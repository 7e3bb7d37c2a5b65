// Settings read from SCALESCOPE_* environment variables: those a run needs without a flag of
// its own (the simulated devices' jitter and link, a kernel's tuning for a benchmark). The run
// report records every SCALESCOPE_* variable (harness/telemetry/environment.cpp), so a setting
// read here is never invisible in the results.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace scalescope {

// A whole number from 0 to `max` in the environment variable `name`, 0 when it is unset or
// empty. Throws Error naming the variable, its value, `unit` and the range otherwise.
int64_t whole_number_from_environment(const char* name, int64_t max, const char* unit);

// The index in `words` of the environment variable `name`'s value, 0 (the first word, the
// default) when it is unset or empty. Throws Error naming the variable, its value and the words
// otherwise.
int choice_from_environment(const char* name, std::initializer_list<std::string_view> words);

}  // namespace scalescope
