// oneDNN 2.6's bf16 kernels return without VZEROUPPER, and the SSE loops the compiler makes of
// our code for x86-64's baseline then run several times slower on that thread (each
// instruction merges the dirty upper halves). A kernel planned under bf16 clears them after
// each primitive (clear_vector_upper_halves). XGETBV with ECX = 1 reads which register state is
// in use (XINUSE): bit 2 the upper halves of YMM0-15, bit 6 the upper halves of ZMM0-15, which
// SSE instructions share and VZEROUPPER puts back in their initial state (bit 7, ZMM16-31, SSE
// never touches).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/tensor.h"
#include "models/model.h"
#include "models/zoo.h"
#include "tests/models/bound_layer.h"
#include "tests/models/precision_scope.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace scalescope {
namespace {

constexpr uint64_t kUpperHalves = (1u << 2) | (1u << 6);

// Whether this CPU and OS let us read XINUSE (CPUID leaf 0xD, sub-leaf 1, EAX bit 2; OSXSAVE).
bool xinuse_readable() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & bit_OSXSAVE) == 0) return false;
  if (__get_cpuid_max(0, nullptr) < 0xD) return false;
  __cpuid_count(0xD, 1, a, b, c, d);
  return (a & (1u << 2)) != 0;
#else
  return false;
#endif
}

uint64_t xinuse() {
  uint32_t low = 0, high = 0;
#if defined(__x86_64__)
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(1));
#endif
  return (static_cast<uint64_t>(high) << 32) | low;
}

// A training step of dense-100 in bf16 on one thread (the one that ran every primitive): its
// backward left them dirty before the fix (XINUSE 0xe7 against 0xa3 after forward).
TEST(VectorState, Bf16KernelsLeaveTheUpperHalvesOfTheVectorRegistersClean) {
  SKIP_WITHOUT_CPU_BF16();
  if (!xinuse_readable()) GTEST_SKIP() << "this CPU cannot say which register state is in use";
  const testing_util::PrecisionScope scope(Precision::kBf16);
  CpuDevice dev(0, 1);
  dev.make_current();
  Stream& s = dev.default_stream();
  const ModelDef def = make_model("dense-100");
  Model m(def, def.default_input, dev, 1);
  const int64_t n = 8;
  Tensor x(dev, m.input_shape().with_batch(n));
  x.copy_from_host(testing_util::random_values(x.numel(), 5));
  Tensor y(dev, label_shape(def.loss, m.output_shape()).with_batch(n));
  y.copy_from_host(std::vector<float>(static_cast<size_t>(y.numel()), 1.0f));
  Tensor loss(dev, Shape{1});
  m.forward(x.data(), n, s);
  EXPECT_EQ(xinuse() & kUpperHalves, 0u) << "after forward";
  m.loss_forward_backward(y.data(), 1.0f / static_cast<float>(n), loss.data(), s);
  m.backward(s);
  EXPECT_EQ(xinuse() & kUpperHalves, 0u) << "after backward";
}

}  // namespace
}  // namespace scalescope
