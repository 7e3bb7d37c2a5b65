// The subcommands of the scalescope executable. Each registers its options on the app and
// returns the action to run once parsing succeeded (so every value is checked before any
// work starts).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace scalescope::cli {

using Action = std::function<int()>;

// The program's arguments as given (for reports and for parsing a command's flags over a
// config file's values); set by main before parsing.
void set_arguments(int argc, const char* const* argv);
const std::vector<std::string>& arguments();
// The arguments after the program's and the command's names.
std::vector<std::string> command_arguments();
// The command line, quoted so that a shell would give the same arguments.
std::string command_line();

// The exit status for an error (bad input, a fault of ours or of a library): 1, unless the
// selected command gave another when parsing selected it (compare, where 1 means
// "regression").
int error_status();
void set_error_status(int status);

// Reads every SCALESCOPE_* setting before a command runs (settings_check.cpp): a bad value is
// an Error naming it whether or not the run reaches what reads it, and a variable set a few
// letters from a setting's name (which nothing would read) is named in a warning with the
// setting meant.
void check_settings();

// Set by `scalescope profile` for the sweep it runs under nsys, whose settings it has checked:
// the sweep warns about none again.
inline constexpr const char* kSettingsWarned = "SCALESCOPE_SETTINGS_WARNED";

// `action` is set when the subcommand is selected.
void add_train_command(CLI::App& app, Action& action);
void add_sweep_command(CLI::App& app, Action& action);
void add_report_command(CLI::App& app, Action& action);
void add_profile_command(CLI::App& app, Action& action);
void add_models_command(CLI::App& app, Action& action);
void add_pipeline_bench_command(CLI::App& app, Action& action);
void add_collectives_command(CLI::App& app, Action& action);
void add_compare_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);
void add_devices_command(CLI::App& app, Action& action);
void add_analyze_command(CLI::App& app, Action& action);

}  // namespace scalescope::cli
