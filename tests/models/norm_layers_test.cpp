// Batch and layer normalisation's CPU kernels beyond the reference checks of layers_test.cpp:
// batch norm's running statistics in training and evaluation, its refusal of a single value per
// channel, its fused ReLU and saved bf16 reads, and both kernels' independence of the thread
// count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "models/kernel_math/half_math.h"
#include "models/layer_spec.h"
#include "tests/models/bound_layer.h"
#include "tests/models/reference.h"

namespace scalescope {
namespace {

using namespace testing_util;  // NOLINT(google-build-using-namespace): the layer tests' kit

// Random values with a mean and a spread of their own per channel (c·0.5 − 1 and 1 + c/4),
// so that running statistics that ignore the batch's mean or variance show.
std::vector<float> offset_values(const Shape& in, uint64_t seed) {
  std::vector<float> x = random_values(in.numel(), seed);
  const int64_t channels = in[in.rank() - 1];
  for (size_t i = 0; i < x.size(); ++i) {
    const auto c = static_cast<double>(static_cast<int64_t>(i) % channels);
    x[i] = static_cast<float>(x[i] * (1.0 + c / 4.0) + c * 0.5 - 1.0);
  }
  return x;
}

// PyTorch's update of the running statistics by one training batch, in double.
void update_running_stats(const BatchNorm2DSpec& spec, const Shape& in, const std::vector<float>& x,
                          std::vector<double>& mean, std::vector<double>& var) {
  const int64_t channels = in[3];
  const int64_t count = in.numel() / channels;
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0, squares = 0.0;
    for (int64_t p = 0; p < count; ++p) sum += x[static_cast<size_t>(p * channels + c)];
    const double batch_mean = sum / static_cast<double>(count);
    for (int64_t p = 0; p < count; ++p) {
      const double d = x[static_cast<size_t>(p * channels + c)] - batch_mean;
      squares += d * d;
    }
    const double unbiased = squares / static_cast<double>(count - 1);
    const double m = spec.momentum;
    const auto ci = static_cast<size_t>(c);
    mean[ci] = (1.0 - m) * mean[ci] + m * batch_mean;
    var[ci] = (1.0 - m) * var[ci] + m * unbiased;
  }
}

TEST(LayerBatchNorm, TrainingMovesTheRunningStatisticsAsPyTorchDoes) {
  const BatchNorm2DSpec spec{1e-5f, 0.3f};
  const LayerCase c{"batch_norm", spec, Shape{3, 4, 5, 6}};
  BoundLayer layer(c);
  fill_random_params(layer, 8);
  std::vector<double> mean(6, 0.0), var(6, 1.0);
  for (uint64_t seed : {9, 10}) {
    const std::vector<float> x = offset_values(c.in, seed);
    layer.in.copy_from_host(x);
    layer.forward();
    update_running_stats(spec, c.in, x, mean, var);
  }
  expect_close(layer.buffers[0].to_host(), mean, 1e-6, 1e-6, "running_mean");
  expect_close(layer.buffers[1].to_host(), var, 1e-6, 1e-6, "running_var");
  EXPECT_EQ(layer.buffers[2].to_host(), std::vector<float>{2.0f}) << "num_batches_tracked";
}

// The training forward's statistics come from one read of x (each chunk's deviations from its
// first pixel, merged as moments): around a mean of a million, where Σx² − (Σx)²/n would lose
// the variance's digits even in double, they are the two-pass statistics of the same floats.
TEST(LayerBatchNorm, TrainingStatisticsKeepTheirDigitsFarFromZero) {
  const BatchNorm2DSpec spec{1e-5f, 1.0f};  // momentum 1: the running statistics are the batch's
  const LayerCase c{"batch_norm", spec, Shape{4, 8, 8, 3}};
  BoundLayer layer(c);
  fill_random_params(layer, 8);
  std::vector<float> x = offset_values(c.in, 12);
  for (float& v : x) v += 1e6f;
  layer.in.copy_from_host(x);
  layer.forward();
  std::vector<double> mean(3, 0.0), var(3, 1.0);
  update_running_stats(spec, c.in, x, mean, var);
  expect_close(layer.buffers[0].to_host(), mean, 0.0, 1e-7, "running_mean");  // a float's rounding
  expect_close(layer.buffers[1].to_host(), var, 0.0, 1e-6, "running_var");
}

TEST(LayerBatchNorm, EvaluationNormalizesWithTheRunningStatisticsAndKeepsThem) {
  const BatchNorm2DSpec spec{1e-3f, 0.1f};
  const LayerCase c{"batch_norm", spec, Shape{2, 3, 4, 5}};
  BoundLayer layer(c);
  fill_random_params(layer, 11);
  std::vector<float> running_var = random_values(5, 12);
  for (float& v : running_var) v = 0.75f + 0.5f * v;  // in [0.25, 1.25]
  layer.buffers[0].copy_from_host(random_values(5, 13));
  layer.buffers[1].copy_from_host(running_var);
  layer.buffers[2].copy_from_host(std::vector<float>{4.0f});
  std::vector<std::vector<float>> before;
  for (const Tensor& b : layer.buffers) before.push_back(b.to_host());
  const std::vector<float> x = offset_values(c.in, 14);
  layer.in.copy_from_host(x);
  layer.kernel->forward_eval(layer.in.data(), layer.out.data(), layer.device.default_stream());

  const std::vector<float> gamma = layer.params[0].to_host(), beta = layer.params[1].to_host();
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t ch = i % 5;
    expected[i] = gamma[ch] * (x[i] - before[0][ch]) /
                      std::sqrt(static_cast<double>(before[1][ch]) + spec.eps) +
                  beta[ch];
  }
  expect_close(layer.out.to_host(), expected, kForwardAbs, kForwardRel, "out");
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(layer.buffers[i].to_host(), before[i]) << i;
}

// PyTorch refuses a training batch with a single value per channel (its variance is
// undefined); evaluation normalizes it with the running statistics.
TEST(LayerBatchNorm, TrainingRejectsASingleValuePerChannel) {
  const LayerCase c{"batch_norm", BatchNorm2DSpec{}, Shape{1, 1, 1, 3}};
  BoundLayer layer(c);
  layer.in.copy_from_host(std::vector<float>{0.5f, -1.0f, 2.0f});
  fill_random_params(layer, 15);
  try {
    layer.forward();
    ADD_FAILURE() << "a training forward of one value per channel did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNorm2D"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("more than one value"), std::string::npos) << e.what();
  }
  EXPECT_EQ(layer.buffers[2].to_host(), std::vector<float>{0.0f}) << "num_batches_tracked";
  EXPECT_NO_THROW(
      layer.kernel->forward_eval(layer.in.data(), layer.out.data(), layer.device.default_stream()));
}

// Host values as the model saves them in bf16, in device memory, and restored to fp32.
struct SavedBf16 {
  SavedBf16(Device& device, const std::vector<float>& values)
      : copy(device, values.size() * sizeof(uint16_t)), restored(values.size()) {
    auto* bits = static_cast<uint16_t*>(copy.data());
    for (size_t i = 0; i < values.size(); ++i) {
      bits[i] = kernel_math::float_to_bf16(values[i]);
      restored[i] = kernel_math::bf16_to_float(bits[i]);
    }
  }
  const uint16_t* data() const { return static_cast<const uint16_t*>(copy.data()); }
  DeviceBuffer copy;
  std::vector<float> restored;
};

// A ReLU fused into batch norm (as before a ResNet's every first ReLU of a block) gives the two
// separate layers' bits in both passes; and under bf16 backward reads the model's saved copies
// of the input and of the ReLU's output as they are, giving the bits of backward on their
// restored fp32 values. 19 channels: the vector clones' tails too.
TEST(LayerBatchNorm, AFusedReluIsTheSeparateLayersAndBackwardReadsTheSavedBf16Copies) {
  const LayerCase c{"batch_norm", BatchNorm2DSpec{}, Shape{3, 5, 4, 19}};
  BoundLayer fused(c, nullptr, /*relu=*/true);
  BoundLayer plain(c);
  const std::vector<float> x = offset_values(c.in, 21);
  const std::vector<float> dy = random_values(c.in.numel(), 22);
  for (BoundLayer* layer : {&fused, &plain}) {
    fill_random_params(*layer, 21);
    layer->in.copy_from_host(x);
    layer->forward();
  }
  const std::vector<float> y = fused.out.to_host();
  const std::vector<float> z = plain.out.to_host();
  std::vector<float> masked(dy.size());
  size_t positive = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i], z[i] > 0.0f ? z[i] : 0.0f) << i;
    masked[i] = dy[i] * (y[i] > 0.0f ? 1.0f : 0.0f);  // oneDNN's ReLU backward
    positive += y[i] > 0.0f ? 1 : 0;
  }
  EXPECT_GT(positive, y.size() / 4);
  EXPECT_LT(positive, 3 * y.size() / 4);
  fused.dout.copy_from_host(dy);
  fused.backward(true);
  plain.dout.copy_from_host(masked);
  plain.backward(true);
  for (const int t : {0, 1}) EXPECT_EQ(fused.grads[t].to_host(), plain.grads[t].to_host()) << t;
  EXPECT_EQ(fused.din.to_host(), plain.din.to_host());

  EXPECT_TRUE(fused.kernel->reads_saved(kernel_math::HalfFormat::kBf16));
  EXPECT_FALSE(fused.kernel->reads_saved(kernel_math::HalfFormat::kFp16));
  const SavedBf16 saved_x(fused.device, x);
  const SavedBf16 saved_y(fused.device, y);
  for (BoundLayer* layer : {&fused, &plain}) {
    const bool relu = layer == &fused;
    SCOPED_TRACE(relu ? "fused" : "plain");
    layer->in.copy_from_host(saved_x.restored);
    if (relu) layer->out.copy_from_host(saved_y.restored);
    layer->backward(true);
    std::vector<std::vector<float>> restored;
    for (Tensor* t : {&layer->din, &layer->grads[0], &layer->grads[1]}) {
      restored.push_back(t->to_host());
      t->copy_from_host(std::vector<float>(static_cast<size_t>(t->numel()), 0.0f));
    }
    layer->kernel->backward_saved(saved_x.data(), relu ? saved_y.data() : nullptr,
                                  layer->dout.data(), layer->din.data(),
                                  layer->device.default_stream());
    EXPECT_EQ(layer->din.to_host(), restored[0]);
    EXPECT_EQ(layer->grads[0].to_host(), restored[1]);
    EXPECT_EQ(layer->grads[1].to_host(), restored[2]);
  }
}

// Under bf16 forward reads the model's saved copy of its input too (the values backward reads),
// and writes only its output's saved copy where the model asks: the bits of forward on the
// restored input, and of that output rounded as the model's save rounds it; with the fused ReLU
// and without. 19 channels: the vector clones' tails too.
TEST(LayerBatchNorm, UnderBf16ForwardReadsAndWritesTheSavedCopies) {
  const LayerCase c{"batch_norm", BatchNorm2DSpec{}, Shape{3, 5, 4, 19}};
  for (const bool relu : {true, false}) {
    SCOPED_TRACE(relu ? "fused" : "plain");
    BoundLayer layer(c, nullptr, relu);
    EXPECT_TRUE(layer.kernel->forwards_from_saved(kernel_math::HalfFormat::kBf16));
    EXPECT_FALSE(layer.kernel->forwards_from_saved(kernel_math::HalfFormat::kFp16));
    EXPECT_EQ(layer.kernel->forwards_into_saved(kernel_math::HalfFormat::kBf16),
              LayerKernel::SavedOutput::kFromSavedInput);
    EXPECT_EQ(layer.kernel->forwards_into_saved(kernel_math::HalfFormat::kFp16),
              LayerKernel::SavedOutput::kNo);
    fill_random_params(layer, 31);
    const SavedBf16 saved_x(layer.device, offset_values(c.in, 32));
    layer.in.copy_from_host(saved_x.restored);
    layer.forward();
    const std::vector<float> y = layer.out.to_host();
    const std::vector<float> running_var = layer.buffers[1].to_host();
    layer.out.copy_from_host(std::vector<float>(y.size(), NAN));
    layer.in.copy_from_host(std::vector<float>(y.size(), NAN));  // read by neither
    Stream& stream = layer.device.default_stream();
    layer.kernel->forward_saved(saved_x.data(), layer.out.data(), stream);
    EXPECT_EQ(layer.out.to_host(), y);
    const SavedBf16 rounded_y(layer.device, y);
    DeviceBuffer out(layer.device, y.size() * sizeof(uint16_t));
    layer.kernel->forward_into_saved(nullptr, saved_x.data(), static_cast<uint16_t*>(out.data()),
                                     kernel_math::HalfFormat::kBf16, stream);
    EXPECT_TRUE(std::equal(rounded_y.data(), rounded_y.data() + y.size(),
                           static_cast<const uint16_t*>(out.data())));
    EXPECT_NE(layer.buffers[1].to_host(), running_var);  // each training forward moved it
  }
}

// The kernel promises the same bits whatever the thread count (its sums run over chunks fixed
// by the shape): of the output, the running statistics and the gradients. Threads that shared
// a chunk's partial sums would show here.
TEST(LayerBatchNorm, ResultsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results[2];
  for (const int threads : {1, 3}) {
    const LayerCase c{"batch_norm", BatchNorm2DSpec{}, Shape{4, 6, 5, 16}, threads};
    BoundLayer layer(c);
    layer.device.make_current();
    layer.in.copy_from_host(offset_values(c.in, 16));
    layer.dout.copy_from_host(random_values(c.in.numel(), 17));
    fill_random_params(layer, 16);
    layer.forward();
    layer.backward(/*with_din=*/true);
    std::vector<std::vector<float>>& r = results[threads == 1 ? 0 : 1];
    for (const Tensor* t : {&layer.out, &layer.din, &layer.grads[0], &layer.grads[1],
                            &layer.buffers[0], &layer.buffers[1]}) {
      r.push_back(t->to_host());
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;
}

// As batch norm's: rows are independent and the parameter gradients' sums run over parts of the
// rows fixed by the shape (1100 rows: three parts), so threads change no bit.
TEST(LayerLayerNorm, ResultsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results[2];
  for (const int threads : {1, 3}) {
    const LayerCase c{"layer_norm", LayerNormSpec{}, Shape{2, 550, 300}, threads};
    BoundLayer layer(c);
    layer.in.copy_from_host(offset_values(c.in, 18));
    layer.dout.copy_from_host(random_values(c.in.numel(), 19));
    fill_random_params(layer, 18);
    layer.forward();
    layer.backward(/*with_din=*/true);
    for (const Tensor* t : {&layer.out, &layer.din, &layer.grads[0], &layer.grads[1]}) {
      results[threads == 1 ? 0 : 1].push_back(t->to_host());
    }
  }
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;
}

// A residual stream's layer norm adds its input's gradient to the one the stream's later
// reader wrote (LayerKernel::backward_adding): each value that one + backward's, to the bit, and
// the parameter gradients backward's. One thread takes the one-pass path (the parts share out
// evenly), two the pass over rows after the column sums (three parts for two threads).
TEST(LayerLayerNorm, BackwardAddingAddsBackwardsInputGradientToTheBit) {
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const LayerCase c{"layer_norm", LayerNormSpec{}, Shape{2, 550, 300}, threads};
    BoundLayer layer(c);
    ASSERT_TRUE(layer.kernel->adds_input_gradient());
    layer.in.copy_from_host(offset_values(c.in, 28));
    layer.dout.copy_from_host(random_values(c.in.numel(), 29));
    fill_random_params(layer, 28);
    layer.forward();
    layer.backward(/*with_din=*/true);
    const std::vector<float> din = layer.din.to_host();
    const std::vector<float> dw = layer.grads[0].to_host();
    const std::vector<float> db = layer.grads[1].to_host();
    const std::vector<float> before = random_values(c.in.numel(), 30);
    layer.din.copy_from_host(before);
    layer.kernel->backward_adding(layer.in.data(), layer.out.data(), layer.dout.data(),
                                  layer.din.data(), layer.device.default_stream());
    const std::vector<float> added = layer.din.to_host();
    for (size_t i = 0; i < added.size(); ++i) {
      ASSERT_EQ(added[i], before[i] + din[i]) << i;
    }
    EXPECT_EQ(layer.grads[0].to_host(), dw);
    EXPECT_EQ(layer.grads[1].to_host(), db);
    EXPECT_THROW(layer.kernel->backward_adding(layer.in.data(), layer.out.data(), layer.dout.data(),
                                               layer.dout.data(), layer.device.default_stream()),
                 Error);
  }
}

// Under bf16 backward reads the model's saved copy of the input as it is: the bits of backward
// on its restored fp32 values, adding to the input's gradient or not (the one-pass path on one
// thread, the rows' pass after the column sums on two, as above); fp16's copies it does not read.
TEST(LayerLayerNorm, BackwardFromTheSavedBf16CopyIsBackwardOfItsRestoredValues) {
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const LayerCase c{"layer_norm", LayerNormSpec{}, Shape{2, 550, 300}, threads};
    BoundLayer layer(c);
    ASSERT_TRUE(layer.kernel->reads_saved(kernel_math::HalfFormat::kBf16));
    ASSERT_TRUE(layer.kernel->adds_input_gradient_from_saved(kernel_math::HalfFormat::kBf16));
    EXPECT_FALSE(layer.kernel->reads_saved(kernel_math::HalfFormat::kFp16));
    const SavedBf16 saved(layer.device, offset_values(c.in, 31));
    layer.in.copy_from_host(saved.restored);
    layer.dout.copy_from_host(random_values(c.in.numel(), 32));
    fill_random_params(layer, 31);
    layer.forward();
    layer.backward(/*with_din=*/true);
    const std::vector<float> din = layer.din.to_host();
    const std::vector<float> dw = layer.grads[0].to_host();
    const std::vector<float> db = layer.grads[1].to_host();
    const auto clear = [&] {
      for (Tensor* t : {&layer.din, &layer.grads[0], &layer.grads[1]}) {
        t->copy_from_host(std::vector<float>(static_cast<size_t>(t->numel()), 0.0f));
      }
    };
    clear();
    Stream& stream = layer.device.default_stream();
    layer.kernel->backward_saved(saved.data(), nullptr, layer.dout.data(), layer.din.data(),
                                 stream);
    EXPECT_EQ(layer.din.to_host(), din);
    EXPECT_EQ(layer.grads[0].to_host(), dw);
    EXPECT_EQ(layer.grads[1].to_host(), db);
    clear();
    const std::vector<float> before = random_values(c.in.numel(), 33);
    layer.din.copy_from_host(before);
    layer.kernel->backward_saved_adding(saved.data(), nullptr, layer.dout.data(), layer.din.data(),
                                        stream);
    const std::vector<float> added = layer.din.to_host();
    for (size_t i = 0; i < added.size(); ++i) ASSERT_EQ(added[i], before[i] + din[i]) << i;
    EXPECT_EQ(layer.grads[0].to_host(), dw);
    EXPECT_EQ(layer.grads[1].to_host(), db);
  }
}

}  // namespace
}  // namespace scalescope
