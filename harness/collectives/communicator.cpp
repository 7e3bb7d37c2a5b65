#include "harness/collectives/communicator.h"

#include "core/check.h"

namespace scalescope {

void Communicator::all_reduce_half(uint16_t* /*data*/, int64_t /*count*/,
                                   kernel_math::HalfFormat /*format*/, Stream& /*stream*/) {
  SS_CHECK(false, "{}: compressed (16-bit) all-reduce is not supported by this communicator",
           backend_name());
}

}  // namespace scalescope
