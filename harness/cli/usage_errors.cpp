#include "harness/cli/usage_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "core/spelling.h"

namespace scalescope::cli {
namespace {

// A negative number is an option's value (--lr -1 is refused by the option, not here).
bool is_number(const std::string& word) {
  char* end = nullptr;
  std::strtod(word.c_str(), &end);
  return end != word.c_str() && *end == '\0';
}

// The first argument that names one of `app`'s commands, as CLI11 takes it.
const CLI::App* command_on_line(const CLI::App& app, const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == args[i]) return sub;
    }
  }
  return nullptr;
}

// Every spelling of `app`'s options as it is typed: --name and -x.
void add_spellings(const CLI::App& app, std::vector<std::string>& spellings) {
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) spellings.push_back("--" + name);
    for (const std::string& name : option->get_snames()) spellings.push_back("-" + name);
  }
}

// The commands' names, in the order --help lists them.
std::vector<std::string_view> command_names(const CLI::App& app) {
  std::vector<std::string_view> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// For a command line that CLI11 found arguments in it did not expect: each option (--name,
// --name=value, -x) that neither the program nor the command on the line declares, with the
// option it was most likely meant as; where every option is declared, the words nobody takes,
// in their order on the line (CLI11 names them last first, values of unknown options among
// them). Prefixed by the command's name; "" when CLI11 kept no such word.
std::string unexpected_arguments_message(const CLI::App& app,
                                         const std::vector<std::string>& args) {
  const CLI::App* command = command_on_line(app, args);
  std::vector<std::string> spellings;
  add_spellings(app, spellings);
  if (command != nullptr) add_spellings(*command, spellings);
  const std::vector<std::string_view> known(spellings.begin(), spellings.end());
  std::vector<std::string> unknown;
  bool unsuggested = false;  // an unknown option without a near one
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;  // the rest are words, whatever they start with
    if (arg.size() < 2 || arg[0] != '-' || is_number(arg)) continue;
    // -xVALUE and --name=VALUE: the option is what comes before its value.
    std::string typed = arg[1] == '-' ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
    if (typed == "--") typed = arg;  // "--=x" names no option: show what was typed
    if (std::ranges::find(known, typed) != known.end()) continue;
    const std::string meant = did_you_mean(typed, known);
    unsuggested = unsuggested || meant.empty();
    unknown.push_back(fmt::format("'{}'{}", typed, meant));
  }
  const std::string name = command != nullptr ? command->get_name() : "";
  const std::string help = fmt::format("scalescope {}--help", name.empty() ? "" : name + " ");
  const std::string where = name.empty() ? "" : name + ": ";
  if (unknown.empty()) {
    // Words neither the program nor the command takes, as CLI11 kept them.
    const std::vector<std::string> words = app.remaining(true);
    if (words.empty()) return "";
    return fmt::format("{}unexpected argument{} '{}' ({} lists what it takes)", where,
                       words.size() > 1 ? "s" : "", fmt::join(words, "' '"), help);
  }
  return fmt::format("{}unknown option{} {}{}", where, unknown.size() > 1 ? "s" : "",
                     fmt::join(unknown, ", "),
                     unsuggested ? fmt::format("; {} lists its options", help) : "");
}

// "--model was given 2 times ('a', 'b'); it takes one value": for the ArgumentMismatch
// CLI11 raises when an option of one value is given more than once; "" for any other.
std::string repeated_option_message(const CLI::App& app, const CLI::App* command) {
  for (const CLI::App* where : {command, &app}) {
    if (where == nullptr) continue;
    for (const CLI::Option* option : where->get_options()) {
      // A flag expects no item (0), a list many.
      if (option->get_items_expected_max() != 1 || option->count() < 2) continue;
      return fmt::format("{} was given {} times ('{}'); it takes one value", option->get_name(),
                         option->count(), fmt::join(option->results(), "', '"));
    }
  }
  return "";
}

}  // namespace

std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  const std::vector<std::string_view> names = command_names(app);
  return fmt::format("unknown command '{}'{} (commands: {}; see --help)", word,
                     did_you_mean(word, names), fmt::join(names, ", "));
}

std::string parse_error_message(const CLI::App& app, const std::vector<std::string>& args,
                                const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    std::string unexpected = unexpected_arguments_message(app, args);
    if (!unexpected.empty()) return unexpected;
  }
  const CLI::App* command = command_on_line(app, args);
  if (command == nullptr) {
    if (dynamic_cast<const CLI::RequiredError*>(&error) == nullptr) {
      return fmt::format("{} (see scalescope --help)", error.what());  // of the program's flags
    }
    // CLI11 asks for the command before it looks at the options: name one nobody declares.
    if (std::string unknown = unexpected_arguments_message(app, args);
        unknown.starts_with("unknown option")) {
      return unknown;
    }
    return fmt::format("a command is required (commands: {}; see scalescope --help)",
                       fmt::join(command_names(app), ", "));
  }
  std::string what = error.what();
  if (what.find("(did you mean") != std::string::npos) return what;  // the way out is named
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    if (std::string repeated = repeated_option_message(app, command); !repeated.empty()) {
      what = std::move(repeated);
    }
  }
  return fmt::format("{} (see scalescope {} --help)", what, command->get_name());
}

}  // namespace scalescope::cli
