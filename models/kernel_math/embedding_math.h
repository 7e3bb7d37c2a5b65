// Token ids of an embedding: the inputs are floats (every tensor is), so a token is a whole
// number in [0, vocab). The CPU kernel refuses anything else; the GPU kernels, which cannot
// throw, read a bad id as token 0 rather than another row's memory.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

SS_HOST_DEVICE inline bool is_token(float id, int64_t vocab) {
  // `id == id` is false for NaN; floorf keeps fractions out.
  return id == id && id >= 0.0f && id < static_cast<float>(vocab) && floorf(id) == id;
}

SS_HOST_DEVICE inline int64_t token_row(float id, int64_t vocab) {
  return is_token(id, vocab) ? static_cast<int64_t>(id) : 0;
}

}  // namespace scalescope::kernel_math
