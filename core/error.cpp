#include "core/error.h"

#include <fmt/format.h>

namespace scalescope {
namespace {

thread_local int t_rank = -1;

std::string compose(const std::string& library, const std::string& expression,
                    const std::string& message, const std::source_location& where, int rank) {
  std::string text;
  if (rank >= 0) text += fmt::format("[rank {}] ", rank);
  if (library.empty()) {
    text += message;
  } else {
    text += fmt::format("{} error: {} (in `{}`)", library, message, expression);
  }
  const std::string_view file = where.file_name();
  text += fmt::format(" at {}:{}", file.substr(file.find_last_of('/') + 1), where.line());
  return text;
}

}  // namespace

Error::Error(std::string library, std::string expression, std::string message,
             std::source_location where)
    : std::runtime_error(compose(library, expression, message, where, t_rank)),
      library_(std::move(library)),
      expression_(std::move(expression)),
      message_(std::move(message)),
      file_(where.file_name()),
      line_(static_cast<int>(where.line())),
      rank_(t_rank) {}

void set_thread_rank(int rank) {
  t_rank = rank;
}
int thread_rank() {
  return t_rank;
}

void throw_error(std::string message, std::source_location where) {
  throw Error("", "", std::move(message), where);
}

}  // namespace scalescope
