// Helpers shared by the test binaries.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks '" << (part) << "'"

namespace scalescope::testing_util {

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

}  // namespace scalescope::testing_util
