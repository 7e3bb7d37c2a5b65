// scalescope: measures how data-parallel training scales, and why it falls short of linear.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/denormals.h"
#include "core/error.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "harness/cli/usage_errors.h"

namespace {

// --verbose belongs to the program, not to a command: it is taken off the line wherever it
// stands, as --verbose or --verbose=VALUE, before CLI11 and the commands (which parse their
// arguments again, with their own options only) see it.
struct Verbose {
  bool on = false;
  std::string error;  // of a value neither yes nor no
};

Verbose take_verbose(int& argc, char** argv) {
  constexpr std::string_view kFlag = "--verbose";
  Verbose verbose;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == kFlag) {
      verbose.on = true;
    } else if (arg.starts_with(kFlag) && arg[kFlag.size()] == '=') {
      const std::string value(arg.substr(kFlag.size() + 1));
      const std::string error = scalescope::cli::flag_value_error(value);
      if (error.empty()) verbose.on = CLI::detail::to_flag_value(value) > 0;
      if (verbose.error.empty() && !error.empty()) verbose.error = "--verbose: " + error;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  return verbose;
}

// Reads the settings (core/env.h) and sets what every thread inherits (core/denormals.h),
// before the command starts any thread; 0, or the command's status for bad input when a
// setting's value is bad.
int start_settings() {
  try {
    scalescope::cli::check_settings();
    scalescope::set_denormals(scalescope::denormals_from_environment());
    return 0;
  } catch (const scalescope::Error& e) {
    const bool debug = scalescope::log_level() <= scalescope::LogLevel::kDebug;
    fmt::print(stderr, "scalescope: error: {}\n", scalescope::error_text(e, debug));
    return scalescope::cli::error_status();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Verbose asked = take_verbose(argc, argv);
  if (!asked.error.empty()) {
    fmt::print(stderr, "scalescope: error: {}\n", asked.error);
    return 2;  // a usage error
  }
  const bool verbose = asked.on;
  scalescope::cli::set_arguments(argc, argv);
  CLI::App app{
      "scalescope: measures how data-parallel training scales across devices and "
      "explains why it falls short of linear."};
  app.set_version_flag("--version", std::string("scalescope ") + SCALESCOPE_VERSION);
  app.require_subcommand(1);
  bool verbose_flag = false;  // listed by --help; taken off the line by take_verbose
  app.add_flag("--verbose", verbose_flag,
               "Debug logging, and every error with the source line that raised it (as "
               "SCALESCOPE_LOG=debug); anywhere on the command line");
  scalescope::cli::Action action;
  scalescope::cli::add_train_command(app, action);
  scalescope::cli::add_sweep_command(app, action);
  scalescope::cli::add_report_command(app, action);
  scalescope::cli::add_profile_command(app, action);
  scalescope::cli::add_models_command(app, action);
  scalescope::cli::add_pipeline_bench_command(app, action);
  scalescope::cli::add_collectives_command(app, action);
  scalescope::cli::add_compare_command(app, action);
  scalescope::cli::add_export_command(app, action);
  scalescope::cli::add_devices_command(app, action);
  scalescope::cli::add_analyze_command(app, action);
  const std::vector<const CLI::App*> command = std::as_const(app).get_subcommands(
      [&](const CLI::App* sub) { return argc > 1 && sub->get_name() == argv[1]; });
  // CLI11 would only say that a subcommand is required; name the word it did not know.
  if (argc > 1 && argv[1][0] != '-' && command.empty()) {
    fmt::print(stderr, "scalescope: {}\n", scalescope::cli::unknown_command_message(app, argv[1]));
    return 2;
  }
  try {
    // The command's flags, or the program's (--version=x) where there is no command.
    const int first = command.empty() ? 1 : 2;
    scalescope::cli::check_flag_values(command.empty() ? app : *command[0],
                                       {argv + first, argv + argc});
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 says "Run with --help" and, of a mistyped option, lists it after its value.
    fmt::print(stderr, "scalescope: error: {}\n",
               scalescope::cli::parse_error_message(app, scalescope::cli::arguments(), e));
    return 2;  // a usage error, as every scalescope command reports bad input
  }
  scalescope::log_level();  // reads SCALESCOPE_LOG: a bad value is named whatever the command logs
  if (verbose) scalescope::set_log_level(scalescope::LogLevel::kDebug);
  // What a command printed before it failed comes first, also through a pipe.
  const auto flushed = [] {
    std::fflush(stdout);
    return stderr;
  };
  if (const int status = start_settings(); status != 0) return status;
  try {
    return action();
  } catch (const scalescope::Interrupted& e) {
    fmt::print(flushed(), "scalescope: {}\n", e.message());  // a stop, not a fault: no source line
    return e.exit_status();
  } catch (const scalescope::Error& e) {
    const bool debug = scalescope::log_level() <= scalescope::LogLevel::kDebug;
    if (!e.printed_by_process_zero() || debug)
      fmt::print(flushed(), "scalescope: error: {}\n", scalescope::error_text(e, debug));
  } catch (const std::exception& e) {
    fmt::print(flushed(), "scalescope: internal error: {}\n", e.what());
  }
  return scalescope::cli::error_status();
}
