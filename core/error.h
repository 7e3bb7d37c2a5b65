// The one error type of scalescope and the context it carries.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace scalescope {

// Thrown by every library of ours. Carries the failed expression, where it failed, the
// underlying library's own message and, inside a replica, the replica's rank.
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

 private:
  std::string library_;
  std::string expression_;
  std::string message_;
  std::string file_;
  int line_;
  int rank_;
};

// The rank recorded in errors thrown from the calling thread (a replica sets its own).
void set_thread_rank(int rank);
int thread_rank();

// Throws an Error for a plain condition of ours (bad input, broken invariant).
[[noreturn]] void throw_error(std::string message,
                              std::source_location where = std::source_location::current());

}  // namespace scalescope
