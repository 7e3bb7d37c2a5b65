// What the checkpoint tests (checkpoint_test.cpp, torch_interop_test.cpp) share: a temporary
// directory per test and reproducible values to fill tensors with.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/random.h"

namespace scalescope::testing_util {

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        fmt::format("scalescope_ckpt_{}_{}_{}", ::getpid(), info->test_suite_name(), info->name());
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// `count` values uniform in [-1, 1), the same for the same seed.
inline std::vector<float> random_values(int64_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

}  // namespace scalescope::testing_util
