// The subcommands of the scalescope executable. Each registers its options on the app and
// returns the action to run once parsing succeeded (so every value is checked before any
// work starts).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace scalescope::cli {

using Action = std::function<int()>;

// `action` is set when the subcommand is selected.
void add_train_command(CLI::App& app, Action& action);
void add_models_command(CLI::App& app, Action& action);
void add_pipeline_bench_command(CLI::App& app, Action& action);

}  // namespace scalescope::cli
