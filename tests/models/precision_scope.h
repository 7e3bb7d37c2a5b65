// Sets the kernels' precision (models/kernels.h set_precision) for a scope and restores it
// after, so that no test leaks its setting into the next; and skips a bf16 test where the CPU's
// kernels compute no bf16.
#pragma once

#include <string>

#include "models/kernels.h"

namespace scalescope::testing_util {

using PrecisionScope = ScopedPrecision;

// Why this CPU's kernels (the `cpu` and `sim` devices') compute no bf16, or "" where they do.
inline std::string cpu_bf16_refusal() {
  return kernel_backend(DeviceKind::kCpu).precision_refusal(Precision::kBf16);
}

// Whether a test's run in `precision` on `cpu` or `sim` devices is one this CPU cannot make, for
// the tests that loop over precisions and go on with the others.
inline bool bf16_refused_here(Precision precision) {
  return precision == Precision::kBf16 && !cpu_bf16_refusal().empty();
}

}  // namespace scalescope::testing_util

// Skips the test where the CPU's kernels compute no bf16 (oneDNN 2.6 without AVX-512, where the
// tool refuses bf16 by name), so that the suite passes on every x86-64 CPU and says what it left
// out. A statement of its own: `if (c) SKIP_WITHOUT_CPU_BF16();` takes no else.
#define SKIP_WITHOUT_CPU_BF16()                                                    \
  if (const std::string skip_why = ::scalescope::testing_util::cpu_bf16_refusal(); \
      !skip_why.empty())                                                           \
  GTEST_SKIP() << "bf16 on this CPU: " << skip_why
