#include <string>
#include <vector>

#include "harness/cli/commands.h"

namespace scalescope::cli {
namespace {
std::vector<std::string> g_arguments;
int g_error_status = 1;
}  // namespace

void set_arguments(int argc, const char* const* argv) {
  g_arguments.assign(argv, argv + argc);
}

int error_status() {
  return g_error_status;
}
void set_error_status(int status) {
  g_error_status = status;
}

const std::vector<std::string>& arguments() {
  return g_arguments;
}

std::vector<std::string> command_arguments() {
  if (g_arguments.size() <= 2) return {};
  return {g_arguments.begin() + 2, g_arguments.end()};
}

std::string command_line() {
  std::string line = "scalescope";
  for (size_t i = 1; i < g_arguments.size(); ++i) {
    const std::string& a = g_arguments[i];
    // Quoted when the shell would split it, so the line can be pasted back.
    line += a.find_first_of(" \t'\"") == std::string::npos ? " " + a : " '" + a + "'";
  }
  return line;
}

}  // namespace scalescope::cli
