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

// What main prints after "scalescope: error: " for any of CLI11's parse errors (`error`, from
// parsing `args`, the program's name first, into `app`) but the calls for help and version:
// of arguments CLI11 did not expect, each option neither the program nor the command declares
// with the one most likely meant (`train: unknown option '--devicse' (did you mean
// --devices?)`), or else the words nobody takes in their order on the line; "a command is
// required (commands: ...)" where the line names none; an option of one value given more than
// once with its values ("--model was given 2 times ('a', 'b'); it takes one value"); otherwise
// CLI11's own words; the last two with where to look ("(see scalescope train --help)").
std::string parse_error_message(const CLI::App& app, const std::vector<std::string>& args,
                                const CLI::ParseError& error);

}  // namespace scalescope::cli
