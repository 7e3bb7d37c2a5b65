// Sets the kernels' precision (models/kernels.h set_precision) for a scope and restores it
// after, so that no test leaks its setting into the next.
#pragma once

#include "models/kernels.h"

namespace scalescope::testing_util {

class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : saved_(precision()) { set_precision(p); }
  ~PrecisionScope() { set_precision(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

}  // namespace scalescope::testing_util
