// Runs the scalescope executable (SCALESCOPE_BINARY) as a user would, for the end-to-end tests
// of its commands.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace scalescope::testing_util {

struct CliResult {
  int status = -1;
  std::string output;  // stdout and stderr
};

// `scalescope ARGS` through the shell, with its exit status (-1: it did not exit), and
// `environment` ("NAME=value ...") set for it alone.
inline CliResult run_cli(const std::string& args, const std::string& environment = "") {
  const std::string command = (environment.empty() ? "" : "env " + environment + " ") +
                              std::string(SCALESCOPE_BINARY) + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) r.output += buffer.data();
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace scalescope::testing_util
