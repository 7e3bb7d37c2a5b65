// What CLI11 refuses without naming the way out (a command or an option it does not know),
// said with the word the user most likely meant.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace scalescope::cli {

// "unknown command 'WORD' (did you mean train?) (commands: ...; see --help)": `word` is not
// the name of one of `app`'s commands.
std::string unknown_command_message(const CLI::App& app, const std::string& word);

// For a command line (`args`, the program's name first) that CLI11 parsed into `app` and found
// arguments in it did not expect: each option (--name, --name=value, -x) that neither the
// program nor the command on the line declares, with the option it was most likely meant as;
// where every option is declared, the words nobody takes, in their order on the line (CLI11
// names them last first, values of unknown options among them). Prefixed by the command's
// name; "" when CLI11 kept no such word.
std::string unexpected_arguments_message(const CLI::App& app, const std::vector<std::string>& args);

// What main prints after "scalescope: error: " for any of CLI11's parse errors (`error`, from
// parsing `args` into `app`) but the calls for help and version: the unexpected arguments as
// above; "a command is required (commands: ...)" where the line names none; otherwise
// CLI11's own words with where to look ("(see scalescope train --help)").
std::string parse_error_message(const CLI::App& app, const std::vector<std::string>& args,
                                const CLI::ParseError& error);

}  // namespace scalescope::cli
