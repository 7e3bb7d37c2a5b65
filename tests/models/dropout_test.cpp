// Dropout: the share of elements dropped, the scaling of the survivors, backward applying the
// mask of the forward before it, a new mask every pass, the same masks for the same seed, the
// identity in evaluation, and the CPU kernel's mask being kernel_math's (which the GPU draws).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/tensor.h"
#include "models/kernel_math/dropout_math.h"
#include "models/kernels.h"

namespace scalescope {
namespace {

constexpr int64_t kCount = 100000;

struct DropoutLayer {
  explicit DropoutLayer(DropoutSpec spec, int threads = 2)
      : device(0, threads), in(device, Shape{4, kCount / 4}), out(device, in.shape()) {
    device.make_current();
    kernel =
        kernel_backend(DeviceKind::kCpu)
            .make_layer(spec, LayerBinding{in.shape(), in.shape(), {}, {}, {}, {}, false, nullptr},
                        device);
    in.copy_from_host(std::vector<float>(kCount, 3.0f));
  }
  std::vector<float> forward() {
    kernel->forward(in.data(), out.data(), device.default_stream());
    return out.to_host();
  }

  CpuDevice device;
  Tensor in, out;
  std::unique_ptr<LayerKernel> kernel;
};

TEST(Dropout, DropsTheRateAndScalesTheSurvivors) {
  DropoutLayer layer(DropoutSpec{0.25f, 7});
  const std::vector<float> y = layer.forward();
  int64_t dropped = 0;
  for (const float v : y) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      ASSERT_EQ(v, 3.0f * (1.0f / 0.75f));
    }
  }
  // 25,000 expected; a binomial's standard deviation here is 137.
  EXPECT_NEAR(static_cast<double>(dropped), 0.25 * kCount, 700.0);
}

TEST(Dropout, BackwardAppliesTheMaskOfTheForwardBeforeIt) {
  DropoutLayer layer(DropoutSpec{0.5f, 3});
  const std::vector<float> y = layer.forward();
  Tensor dout(layer.device, layer.in.shape());
  Tensor din(layer.device, layer.in.shape());
  dout.copy_from_host(std::vector<float>(kCount, 1.0f));
  layer.kernel->backward(layer.in.data(), layer.out.data(), dout.data(), din.data(),
                         layer.device.default_stream());
  const std::vector<float> g = din.to_host();
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(g[i], y[i] == 0.0f ? 0.0f : 2.0f) << i;
  }
}

TEST(Dropout, EveryPassDrawsANewMaskAndTheSameSeedTheSameMasks) {
  DropoutLayer a(DropoutSpec{0.1f, 11});
  DropoutLayer b(DropoutSpec{0.1f, 11}, 1);  // another thread count: the same masks
  DropoutLayer other(DropoutSpec{0.1f, 12});
  const std::vector<float> first = a.forward();
  const std::vector<float> second = a.forward();
  EXPECT_NE(first, second);
  EXPECT_EQ(b.forward(), first);
  EXPECT_EQ(b.forward(), second);
  EXPECT_NE(other.forward(), first);
}

TEST(Dropout, EvaluationAndARateOfZeroAreTheIdentity) {
  DropoutLayer layer(DropoutSpec{0.5f, 1});
  layer.kernel->forward_eval(layer.in.data(), layer.out.data(), layer.device.default_stream());
  EXPECT_EQ(layer.out.to_host(), std::vector<float>(kCount, 3.0f));
  DropoutLayer none(DropoutSpec{0.0f, 1});
  EXPECT_EQ(none.forward(), std::vector<float>(kCount, 3.0f));
}

// The GPU kernel runs these functions element by element: the CPU kernel's mask is theirs.
TEST(Dropout, TheMaskIsKernelMathsWhichTheGpuDraws) {
  DropoutLayer layer(DropoutSpec{0.3f, 5});
  layer.forward();
  const std::vector<float> y = layer.forward();  // pass 2
  for (int64_t i = 0; i < kCount; ++i) {
    const bool keep = kernel_math::dropout_keep(5, 2, static_cast<uint64_t>(i), 0.3f);
    ASSERT_EQ(y[i], kernel_math::dropout_apply(3.0f, keep, 1.0f / 0.7f)) << i;
  }
}

}  // namespace
}  // namespace scalescope
