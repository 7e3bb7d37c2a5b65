// The command line's side of the option schema (harness/options/option_schema.h): a command's
// declarations registered on its CLI11 App, config files read by CLI11 through a JSON
// formatter (CLI11 fills only the options the command line left empty: flags given override
// the file), and the values settled and checked once parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "harness/options/option_schema.h"

namespace scalescope::cli {

// A flag's value as typed after '=' (--flip=no): "" for CLI11's words for yes and no and whole
// numbers (counts), else what is wrong with it.
std::string flag_value_error(const std::string& value);
// Throws CLI::ValidationError naming the first flag of `app` given a value that
// flag_value_error refuses in `args` (the command line's words in order, up to "--"). CLI11
// inverts a negated flag's value (--no-fusion=2x) before any check sees it, making "2x" a count
// of 2, and its own flags (--version=x) have no check.
void check_flag_values(const CLI::App& app, const std::vector<std::string>& args);

// Registers every declaration of `list` on `app`: its names, help and the default --help
// shows. REQUIRES: `list` and the variables it binds outlive the parsing.
void add_options(CLI::App& app, OptionList& list);
// Whether add_options registered `option` (every option of every command is declared in the
// schema; tests hold it).
bool declared_in_schema(CLI::Option& option);

// What a config file gave: its name in messages and the keys it set (those the command line
// did not give).
struct ConfigRecord {
  std::string name;
  std::set<std::string, std::less<>> keys;
};

// A JSON config file for CLI11 (as CLI11's examples/json.cpp): an object whose keys are
// the declarations' keys. An unknown key, a value of the wrong type and a name that is not
// one of a choice's are errors naming the key and the file.
class JsonConfig : public CLI::Config {
 public:
  // `app`: the App the file fills (an option it already holds keeps its value); `name`: the
  // file in messages ("" = the value of `app`'s config option); `record`: what the file set.
  JsonConfig(const OptionList& list, const CLI::App& app, std::string name, ConfigRecord* record);

  // The values of `list` as a config file holds them (CLI11's config_to_str).
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  const OptionList& list_;
  const CLI::App& app_;
  std::string name_;
  ConfigRecord* record_;
};

// Adds --config FILE to `app`: CLI11's config option, read through JsonConfig. (CLI11 reads
// it when `app` is the top-level App: see parse_with_config.)
void add_config_option(CLI::App& app, const OptionList& list, ConfigRecord* record = nullptr);

// After `app` parsed: where each value came from (`record`: what a config file set), the
// values settled (OptionList::settle) and every declaration's check run. Throws Error naming a
// bad value as the user gave it.
OptionSources settle_options(const CLI::App& app, const OptionList& list,
                             const ConfigRecord& record = {});

// Parses a command's arguments (without the program's and the command's names) into `list`
// with a top-level App, so that CLI11 reads --config FILE; then, when given, `config` (a
// report's "config" block, named `config_name` in messages) as one more file under the same
// precedence. Settles and checks as settle_options; a usage error too is an Error.
OptionSources parse_with_config(OptionList& list, const std::vector<std::string>& args,
                                const nlohmann::json* config = nullptr,
                                const std::string& config_name = "");

}  // namespace scalescope::cli
