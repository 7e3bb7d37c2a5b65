#include "core/denormals.h"

#include "core/check.h"
#include "core/env.h"

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace scalescope {
namespace {

#if defined(__SSE2__)
constexpr unsigned kFlushToZero = 0x8000;       // MXCSR.FTZ: results that would be denormal are 0
constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR.DAZ: denormal operands read as 0
constexpr unsigned kBoth = kFlushToZero | kDenormalsAreZero;
#endif

}  // namespace

Denormals denormals_from_environment() {
  return choice_from_environment("SCALESCOPE_DENORMALS", {"keep", "flush"}) == 1 ? Denormals::kFlush
                                                                                 : Denormals::kKeep;
}

void set_denormals(Denormals denormals) {
#if defined(__SSE2__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(denormals == Denormals::kFlush ? csr | kBoth : csr & ~kBoth);
#else
  SS_CHECK(denormals == Denormals::kKeep,
           "SCALESCOPE_DENORMALS=flush: this CPU has no flush-to-zero mode scalescope can set");
#endif
}

bool denormals_flushed() {
#if defined(__SSE2__)
  return (_mm_getcsr() & kBoth) == kBoth;
#else
  return false;
#endif
}

}  // namespace scalescope
