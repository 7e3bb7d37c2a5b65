#include "core/error.h"

#include <fmt/format.h>

namespace scalescope {
namespace {

thread_local int t_rank = -1;

std::string brief_text(const std::string& library, const std::string& expression,
                       const std::string& message, int rank) {
  std::string text;
  if (rank >= 0) text += fmt::format("[rank {}] ", rank);
  if (library.empty()) {
    text += message;
  } else {
    text += fmt::format("{} error: {} (in `{}`)", library, message, expression);
  }
  return text;
}

std::string located(const std::string& brief, std::string_view file, int line) {
  return fmt::format("{} at {}:{}", brief, file.substr(file.find_last_of('/') + 1), line);
}

}  // namespace

Error::Error(std::string library, std::string expression, std::string message,
             std::source_location where)
    : Error(std::move(library), std::move(expression), std::move(message), where.file_name(),
            static_cast<int>(where.line()), t_rank) {}

Error::Error(const Error& cause, std::string message)
    : Error(cause.library_, cause.expression_, std::move(message), cause.file_, cause.line_,
            cause.rank_) {}

Error::Error(std::string library, std::string expression, std::string message, std::string file,
             int line, int rank)
    : std::runtime_error(located(brief_text(library, expression, message, rank), file, line)),
      brief_(brief_text(library, expression, message, rank)),
      library_(std::move(library)),
      expression_(std::move(expression)),
      message_(std::move(message)),
      file_(std::move(file)),
      line_(line),
      rank_(rank) {}

UsageError::UsageError(std::string message, std::source_location where)
    : Error("", "", std::move(message), where) {}

UsageError::UsageError(const Error& cause, std::string message)
    : Error(cause, message.empty() ? cause.message() : std::move(message)) {}

UsageError::UsageError(std::string library, std::string expression, std::string message,
                       std::source_location where)
    : Error(std::move(library), std::move(expression), std::move(message), where) {}

OutOfMemoryError::OutOfMemoryError(std::string message, std::string library, std::string expression,
                                   std::source_location where)
    : UsageError(std::move(library), std::move(expression), std::move(message), where) {}

OutOfMemoryError::OutOfMemoryError(const OutOfMemoryError& cause, std::string message)
    : UsageError(cause, std::move(message)) {}

void set_thread_rank(int rank) {
  t_rank = rank;
}
int thread_rank() {
  return t_rank;
}

void throw_error(std::string message, std::source_location where) {
  throw Error("", "", std::move(message), where);
}

void throw_usage_error(std::string message, std::source_location where) {
  throw UsageError(std::move(message), where);
}

std::string error_text(const Error& e, bool with_location) {
  const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
  return usage && !with_location ? e.brief() : std::string(e.what());
}

}  // namespace scalescope
