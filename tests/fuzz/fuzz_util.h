// Helpers of the libFuzzer targets (tests/fuzz): each target feeds one input to a reader the
// way the command line does and lets only our Error out of it as the outcome of bad input.
// Any other exception escapes LLVMFuzzerTestOneInput, which libFuzzer reports as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "models/zoo.h"

namespace scalescope::fuzz {

// A directory private to this process (removed at exit), for readers that take a path.
const std::string& temp_dir();
// Writes `bytes` to temp_dir()/name, replacing the file; returns its path.
std::string write_temp(const std::string& name, std::string_view bytes);

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Two documents in one input, separated by the first "\n--\n" (which valid JSON cannot
// contain); without a separator, the input twice.
std::pair<std::string_view, std::string_view> split_two(std::string_view input);

// The small model whose checkpoints the safetensors targets read: Dense(4) on 3 inputs, a
// 4×3 weight and a 4-element bias (the seeds stay under 200 bytes).
ModelDef tiny_model();
inline constexpr int64_t kTinyInputs = 3;

// Runs `f`; an Error is the accepted outcome of bad input, anything else propagates.
template <class F>
void accept_errors(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error&) {
  }
}

}  // namespace scalescope::fuzz
