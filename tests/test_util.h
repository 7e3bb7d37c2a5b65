// Helpers shared by the test binaries.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks '" << (part) << "'"

namespace scalescope::testing_util {

// `count` values drawn uniformly from [lo, hi) by Rng(seed): the same on every machine.
inline std::vector<float> uniform_values(int64_t count, uint64_t seed, float lo = -1.0f,
                                         float hi = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// The message of the scalescope::Error that `f` throws, or "<no error thrown>".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error thrown>";
}

// What `f` returns when run in a child process, for a test that changes what only a process
// can (its resource limits, a signal's disposition) without changing the test binary's.
inline std::string in_child_process(const std::function<std::string()>& f) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const std::string out = f();
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buffer[512];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, n);
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return out;
}

// How often `part` occurs in `text` (overlapping occurrences counted).
inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The lines of `text` that contain `part`.
inline std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(part) != std::string::npos) out.push_back(line);
  }
  return out;
}

}  // namespace scalescope::testing_util
