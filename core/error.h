// The one error type of scalescope and the context it carries.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace scalescope {

// Thrown by every library of ours. Carries the failed expression, where it failed, the
// underlying library's own message and, inside a replica, the replica's rank. what() ends
// with the source location ("at trainer.cpp:42"); brief() is the same text without it.
class Error : public std::runtime_error {
 public:
  Error(std::string library, std::string expression, std::string message,
        std::source_location where = std::source_location::current());

  const std::string& library() const { return library_; }
  const std::string& expression() const { return expression_; }
  const std::string& message() const { return message_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  // -1 outside a replica thread.
  int rank() const { return rank_; }
  const std::string& brief() const { return brief_; }
  // Raised alike on every process of a launch, where process 0 prints it: another process
  // that printed it too would only repeat the line (once per process under mpirun).
  bool printed_by_process_zero() const { return printed_by_process_zero_; }
  void set_printed_by_process_zero() { printed_by_process_zero_ = true; }

 protected:
  // Another error's library, expression, location and rank with `message`, for a subclass
  // that classifies it.
  Error(const Error& cause, std::string message);

 private:
  Error(std::string library, std::string expression, std::string message, std::string file,
        int line, int rank);

  std::string brief_;
  std::string library_;
  std::string expression_;
  std::string message_;
  std::string file_;
  int line_;
  int rank_;
  bool printed_by_process_zero_ = false;
};

// Bad input from the user (an option's value, a combination of options, a path to write):
// what it says is all the user needs, so main prints it without the source location, which
// stays in what() for --verbose and the logs.
class UsageError : public Error {
 public:
  explicit UsageError(std::string message,
                      std::source_location where = std::source_location::current());
  // The cause's message (replaced by `message` when given), location and rank.
  explicit UsageError(const Error& cause, std::string message = "");

 protected:
  UsageError(std::string library, std::string expression, std::string message,
             std::source_location where);
};

// Device memory ran out: an allocation past what the device has or past the run's memory
// limit. Which model and batch fit is the user's to choose (a sweep's largest batch failing so
// is a finding, not a fault), so it reads as bad input does, without our source location.
class OutOfMemoryError : public UsageError {
 public:
  explicit OutOfMemoryError(std::string message, std::string library = "",
                            std::string expression = "",
                            std::source_location where = std::source_location::current());
  // The cause's location and rank with `message`.
  OutOfMemoryError(const OutOfMemoryError& cause, std::string message);
};

// The rank recorded in errors thrown from the calling thread (a replica sets its own).
void set_thread_rank(int rank);
int thread_rank();

// Throws an Error for a plain condition of ours (bad input, broken invariant).
[[noreturn]] void throw_error(std::string message,
                              std::source_location where = std::source_location::current());
[[noreturn]] void throw_usage_error(std::string message,
                                    std::source_location where = std::source_location::current());

// How an error reads to whoever ran the program: a usage error's brief() unless
// `with_location`; every other error with where it was raised, which a developer needs.
std::string error_text(const Error& e, bool with_location);

}  // namespace scalescope
