// The device side of dynamic loss scaling, checked the same way on every kind of device
// (optimizers_test.cpp: CPU and simulated; cuda_kernels_test.cpp: GPUs): unscale_gradients'
// results and flag, and an optimizer update that does nothing while the flag is set.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "tests/test_util.h"

namespace scalescope::testing_util {

// unscale_gradients on `device`: the gradients and the flag it wrote.
inline std::pair<std::vector<float>, float> unscaled(Device& device,
                                                     const std::vector<float>& grads,
                                                     float inv_scale) {
  device.make_current();
  const auto n = static_cast<int64_t>(grads.size());
  Tensor g(device, Shape{std::max<int64_t>(n, 1)});
  Tensor flag(device, Shape{1});
  if (n > 0) g.copy_from_host(grads);
  flag.copy_from_host(std::vector<float>{7.0f});  // anything: the pass writes it
  unscale_gradients(g.data(), n, inv_scale, flag.data(), device.default_stream());
  device.default_stream().synchronize();
  std::vector<float> out = g.to_host();
  out.resize(static_cast<size_t>(n));
  return {out, flag.to_host().front()};
}

inline void expect_unscale_flags_overflow(Device& device) {
  const float inf = std::numeric_limits<float>::infinity();
  // Large enough to run on several threads (and blocks).
  const std::vector<float> grads = uniform_values(100003, 4, -1e4f, 1e4f);
  const auto [clean, clean_flag] = unscaled(device, grads, 0.25f);
  EXPECT_EQ(clean_flag, 0.0f);
  for (size_t i = 0; i < grads.size(); ++i) ASSERT_EQ(clean[i], grads[i] * 0.25f) << i;
  for (const float bad : {inf, -inf, std::nanf("")}) {
    std::vector<float> planted = grads;
    planted[77777] = bad;
    EXPECT_EQ(unscaled(device, planted, 0.25f).second, 1.0f) << bad;
  }
  // Finite before, infinite after: a scale below 1 can overflow float.
  EXPECT_EQ(unscaled(device, {3e38f, 1.0f}, 4.0f).second, 1.0f);
  EXPECT_EQ(unscaled(device, {}, 4.0f).second, 0.0f);
}

// SGD with momentum and Adam: with the flag set when the update runs, weights and state stay
// as they were; with it clear, the update happens.
inline void expect_optimizers_skip_while_flagged(Device& device) {
  device.make_current();
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.lr = 0.05f;
  sgd.momentum = 0.9f;
  for (const OptimizerConfig& config : {sgd, OptimizerConfig{}}) {
    SCOPED_TRACE(to_string(config.kind));
    Stream& stream = device.default_stream();
    const int64_t n = 1000;
    auto kernel = kernel_backend(device.id().kind).make_optimizer(config, n, device);
    Tensor w(device, Shape{n});
    Tensor g(device, Shape{n});
    Tensor flag(device, Shape{1});
    const std::vector<float> w0 = uniform_values(n, 5, -1.0f, 1.0f);
    w.copy_from_host(w0);
    g.copy_from_host(uniform_values(n, 6, -1.0f, 1.0f));
    kernel->skip_when(flag.data());
    flag.copy_from_host(std::vector<float>{1.0f});
    kernel->update(w.data(), g.data(), 0.1f, 1, stream);
    stream.synchronize();
    EXPECT_EQ(w.to_host(), w0);
    for (const TensorView& s : kernel->state()) {
      std::vector<float> host(static_cast<size_t>(s.numel()));
      device.copy_to_host(host.data(), s.data, s.bytes(), stream);
      stream.synchronize();
      EXPECT_EQ(host, std::vector<float>(host.size(), 0.0f));
    }
    flag.copy_from_host(std::vector<float>{0.0f});
    kernel->update(w.data(), g.data(), 0.1f, 1, stream);
    stream.synchronize();
    EXPECT_NE(w.to_host(), w0);
  }
}

}  // namespace scalescope::testing_util
