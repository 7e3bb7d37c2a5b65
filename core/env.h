// Settings read from SCALESCOPE_* environment variables: those a run needs without a flag of
// its own (the simulated devices' jitter and link, a kernel's tuning for a benchmark). The run
// report records every SCALESCOPE_* variable (harness/telemetry/environment.cpp), so a setting
// read here is never invisible in the results.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace scalescope {

// A whole number from 0 to `max` in the environment variable `name`, 0 when it is unset or
// empty. Throws Error naming the variable, its value, `unit` and the range otherwise.
int64_t whole_number_from_environment(const char* name, int64_t max, const char* unit);

// The index in `words` of the environment variable `name`'s value, 0 (the first word, the
// default) when it is unset or empty. Throws Error naming the variable, its value and the words
// otherwise.
int choice_from_environment(const char* name, std::initializer_list<std::string_view> words);

// The environment variable `name`'s value as it is, "" when unset: a setting of free text.
std::string text_from_environment(const char* name);

// The name of every setting asked for through the functions above so far in this process,
// sorted: once a command has read them all (harness/cli/settings_check.cpp), the settings
// scalescope knows, each named only where it is read.
std::vector<std::string> settings_asked();

// A variable set that scalescope does not read, and the setting it was most likely meant as.
struct MisspeltSetting {
  std::string set;
  std::string meant;
  bool operator==(const MisspeltSetting&) const = default;
};

// Of the `environment`'s entries (NAME=value), each SCALESCOPE_* name that is not one of
// `known` but a few edits from one of them (a letter left out, added, changed or two swapped;
// at most a third of the known name's letters after SCALESCOPE_, and at most 3): a setting
// mistyped, which nothing would read. Names farther from every setting (a script's own
// SCALESCOPE_* variables) are not listed.
std::vector<MisspeltSetting> misspelt_settings(const std::vector<std::string>& environment,
                                               const std::vector<std::string>& known);

}  // namespace scalescope
