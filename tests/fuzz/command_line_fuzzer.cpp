// The command lines of `sweep` and `train`: the input's lines are the arguments, parsed by
// CLI11 into each command's option declarations, settled and checked as the commands do
// before anything runs (parse_with_config). CLI11 and the option declarations are where bad
// flags meet the program: its list splitting, number conversions and default texts. And what
// main says of CLI11's errors (usage_errors.h) on the same lines.
#include <string>
#include <vector>

#include "harness/cli/launch.h"
#include "harness/cli/option_app.h"
#include "harness/cli/usage_errors.h"
#include "harness/sweep/options.h"
#include "harness/trainer/options.h"
#include "reports/json_reader.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

namespace {

std::vector<std::string> arguments(std::string_view text) {
  std::vector<std::string> args;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    args.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return args;
}

// The arguments parsed into a command's options (`add` declares them) and its launch's.
template <class Options, class Add>
Options parse_as(const std::vector<std::string>& args, Add add) {
  Options options;
  cli::LaunchOptions launch;
  OptionList list;
  add(list, options);
  cli::add_launch_options(list, launch);
  cli::parse_with_config(list, args);
  return options;
}

// `scalescope train ARGS` parsed as main parses it, and main's message for CLI11's error.
void name_unexpected(const std::vector<std::string>& args) {
  CLI::App app;
  TrainOptions options;
  OptionList list;
  add_train_options(list, options);
  cli::add_options(*app.add_subcommand("train"), list);
  std::vector<std::string> line = {"scalescope", "train"};
  line.insert(line.end(), args.begin(), args.end());
  try {
    app.parse(std::vector<std::string>(line.rbegin(), line.rend() - 1));  // as CLI11 takes them
  } catch (const CLI::ParseError& e) {
    (void)cli::parse_error_message(app, line, e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = arguments(fuzz::as_text(data, size));
  fuzz::accept_errors([&] {
    const auto options = parse_as<SweepOptions>(args, add_sweep_options);
    (void)dump_json(sweep_config_json(options));
  });
  fuzz::accept_errors([&] { (void)parse_as<TrainOptions>(args, add_train_options); });
  fuzz::accept_errors([&] { name_unexpected(args); });
  return 0;
}
