// The input-pipeline options shared by the commands that read data.
#pragma once

#include <CLI/CLI.hpp>

#include "harness/trainer/data.h"

namespace scalescope::cli {

// `with_workers`: false for commands that take their own list of worker counts.
void add_data_options(CLI::App& cmd, DataOptions& options, bool with_workers = true);

}  // namespace scalescope::cli
