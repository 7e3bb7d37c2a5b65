// Sets the kernels' precision (models/kernels.h set_precision) for a scope and restores it
// after, so that no test leaks its setting into the next.
#pragma once

#include "models/kernels.h"

namespace scalescope::testing_util {

using PrecisionScope = ScopedPrecision;

}  // namespace scalescope::testing_util
