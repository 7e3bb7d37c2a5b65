// Batch norm's CUDA kernel (models/cuda/cuda_norm.cpp, norm_ops.cu): bit for bit against its
// host mirror (kernel_math/norm_math.h), its refusal of one value per channel in training, and
// its synchronized stages (--sync-batchnorm): a batch split among replicas, each running the
// stages with the sync values summed on the host between them, as the all-reduce would, gives
// the unsynchronized kernel's results on the whole batch.
//
// Without a usable GPU the GPU tests skip, saying why; the synchronized test runs on the CPU
// kernel everywhere too, which checks the test itself and the CPU kernel's stages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/device.h"
#include "core/tensor.h"
#include "models/kernel_math/norm_math.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/cuda_test_util.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;
using testing_util::error_of;

constexpr double kTolerance = 1e-5;  // batch norm never computes in TF32

// The batch-norm cases (cuda_kernels_test.cpp compares the first four with the CPU kernel).
std::vector<LayerCase> batch_norm_cases() {
  return {
      {"batch_norm", BatchNorm2DSpec{}, Shape{2, 5, 7, 3}},
      // N·H·W = 1024 rows: the per-channel sums split into parts; 40 channels: two tiles.
      {"batch_norm_parts", BatchNorm2DSpec{1e-3f, 0.2f}, Shape{4, 16, 16, 40}},
      {"batch_norm_relu", BatchNorm2DSpec{}, Shape{2, 5, 7, 3}, false, true},
      {"batch_norm_relu_parts", BatchNorm2DSpec{1e-3f, 0.2f}, Shape{4, 16, 16, 40}, false, true},
      // 6 rows: two of a part's 8 row-threads have none; 1250 rows: parts of 417, 417 and 416.
      {"batch_norm_few_rows", BatchNorm2DSpec{}, Shape{2, 1, 3, 3}},
      {"batch_norm_uneven_parts", BatchNorm2DSpec{}, Shape{2, 25, 25, 5}, false, true},
  };
}

// The GPU kernels against their own algorithm on the host (kernel_math/norm_math.h's mirror of
// their passes and order of additions), bit for bit: the host code here cannot fuse a multiply
// and an add (baseline x86-64 has no FMA instruction), nvcc is told not to (--fmad=false), and
// the GPU's square root and division are IEEE-rounded as the host's. Needs no CPU batch-norm
// kernel.
TEST_F(CudaKernelsTest, BatchNormMatchesItsHostMirrorBitForBit) {
  for (const LayerCase& c : batch_norm_cases()) {
    const auto& spec = std::get<BatchNorm2DSpec>(c.spec);
    SCOPED_TRACE(c.name);
    const Tf32Scope strict(false);
    const LayerInputs inputs = layer_inputs(c, 1234);
    const LayerResult got = run_layer(*gpu_, c, inputs);
    const int64_t channels = c.in[3];
    const int64_t rows = c.in.numel() / channels;
    std::vector<float> y(inputs.x.size());
    std::vector<float> dx(inputs.x.size());
    std::vector<std::vector<float>> buffers = inputs.buffers;
    std::vector<float> mean(static_cast<size_t>(channels));
    std::vector<float> invstd(mean.size());
    std::vector<float> dgamma(mean.size());
    std::vector<float> dbeta(mean.size());
    kernel_math::norm_forward_on_host(inputs.x.data(), rows, channels, inputs.params[0].data(),
                                      inputs.params[1].data(), spec.eps, spec.momentum, y.data(),
                                      buffers[0].data(), buffers[1].data(), buffers[2].data(),
                                      mean.data(), invstd.data(), c.fuse_relu);
    kernel_math::norm_backward_on_host(
        inputs.x.data(), inputs.dout.data(), rows, channels, inputs.params[0].data(), mean.data(),
        invstd.data(), dgamma.data(), dbeta.data(), dx.data(), c.fuse_relu ? y.data() : nullptr);
    EXPECT_EQ(got.out, y);
    EXPECT_EQ(got.buffers, buffers);
    ASSERT_EQ(got.grads.size(), 2u);
    EXPECT_EQ(got.grads[0], dgamma);
    EXPECT_EQ(got.grads[1], dbeta);
    EXPECT_EQ(got.din, dx);
  }
}

// Under bf16 and fp16 the training passes read the model's saved 16-bit copies of the input and
// of the fused ReLU's output as they are, and forward writes only its output's saved copy where
// the model asks, and backward its input's gradient only as the 16-bit copy a convolution reads:
// the bits of the fp32 passes on the restored values (and of those outputs rounded as the
// model's save and the convolution's copy round them), with no restore.
TEST_F(CudaKernelsTest, BatchNormPassesOnTheSavedCopiesAreThePassesOnTheRestoredValues) {
  using Saved = LayerKernel::SavedOutput;
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    const testing_util::PrecisionScope scope(precision);
    const kernel_math::HalfFormat format = *half_format(precision);
    const kernel_math::HalfFormat other = format == kernel_math::HalfFormat::kBf16
                                              ? kernel_math::HalfFormat::kFp16
                                              : kernel_math::HalfFormat::kBf16;
    for (const LayerCase& c : batch_norm_cases()) {
      SCOPED_TRACE(c.name + " in " + to_string(precision));
      const LayerInputs inputs = layer_inputs(c, 4321);
      BoundLayer b = bind_layer(*gpu_, c, inputs);
      EXPECT_TRUE(b.kernel->forwards_from_saved(format));
      EXPECT_TRUE(b.kernel->reads_saved(format));
      EXPECT_EQ(b.kernel->forwards_into_saved(format), Saved::kFromSavedInput);
      EXPECT_FALSE(b.kernel->reads_saved(other));
      EXPECT_EQ(b.kernel->forwards_into_saved(other), Saved::kNo);
      const SixteenBitCopy x(inputs.x, format);
      HalfTensor saved_x(*gpu_, x.saved);
      Stream& stream = gpu_->default_stream();
      b.in.copy_from_host(x.restored);
      b.kernel->forward(b.in.data(), b.out.data(), stream);
      const SixteenBitCopy y(b.out.to_host(), format);
      b.out.copy_from_host(std::vector<float>(y.restored.size(), NAN));
      b.kernel->forward_saved(saved_x.data(), b.out.data(), stream);
      EXPECT_EQ(b.out.to_host(), y.values);
      HalfTensor saved_y(*gpu_, std::vector<uint16_t>(y.saved.size(), 0x7fff));
      b.kernel->forward_into_saved(nullptr, saved_x.data(), saved_y.data(), format, stream);
      EXPECT_EQ(saved_y.to_host(), y.saved);
      // Backward from the mean and invstd those forwards saved (the same each time), the ReLU's
      // mask read from its output as restored.
      b.out.copy_from_host(y.restored);
      b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
      const std::vector<float> din = b.din.to_host();
      const std::vector<float> dgamma = b.grads[0].to_host();
      const std::vector<float> dbeta = b.grads[1].to_host();
      b.din.copy_from_host(std::vector<float>(din.size(), NAN));
      b.grads[0].copy_from_host(std::vector<float>(dgamma.size(), NAN));
      b.grads[1].copy_from_host(std::vector<float>(dbeta.size(), NAN));
      b.in.copy_from_host(std::vector<float>(din.size(), NAN));  // read by neither
      b.out.copy_from_host(std::vector<float>(y.restored.size(), NAN));
      b.kernel->backward_saved(saved_x.data(), c.fuse_relu ? saved_y.data() : nullptr,
                               b.dout.data(), b.din.data(), stream);
      EXPECT_EQ(b.din.to_host(), din);
      EXPECT_EQ(b.grads[0].to_host(), dgamma);
      EXPECT_EQ(b.grads[1].to_host(), dbeta);
      // And its input's gradient only as the 16-bit copy a convolution's backward reads.
      EXPECT_TRUE(b.kernel->writes_half_gradient(format));
      EXPECT_FALSE(b.kernel->writes_half_gradient(other));
      HalfTensor din_half(*gpu_, std::vector<uint16_t>(din.size(), 0x7fff));
      b.din.copy_from_host(std::vector<float>(din.size(), NAN));
      b.kernel->backward_into_half_gradient(saved_x.data(), c.fuse_relu ? saved_y.data() : nullptr,
                                            b.dout.data(), din_half.data(), stream);
      EXPECT_EQ(din_half.to_host(), SixteenBitCopy(din, format).saved);
      EXPECT_EQ(b.grads[0].to_host(), dgamma);
      EXPECT_EQ(b.grads[1].to_host(), dbeta);
    }
  }
}

// PyTorch refuses to train batch norm on one value per channel (the unbiased variance would
// divide by zero); evaluation takes it. The synchronized forward refuses it per replica too,
// as the CPU kernel does.
TEST_F(CudaKernelsTest, BatchNormRefusesOneValuePerChannelInTraining) {
  const LayerCase c{"batch_norm_one_value", BatchNorm2DSpec{}, Shape{1, 1, 1, 3}, false};
  BoundLayer b = bind_layer(*gpu_, c, layer_inputs(c, 6));
  Stream& stream = gpu_->default_stream();
  EXPECT_CONTAINS(error_of([&] { b.kernel->forward(b.in.data(), b.out.data(), stream); }),
                  describe(c.spec));
  EXPECT_CONTAINS(error_of([&] { b.kernel->forward_stage(0, b.in.data(), b.out.data(), stream); }),
                  describe(c.spec));
  EXPECT_NO_THROW(b.kernel->forward_eval(b.in.data(), b.out.data(), stream));
  stream.synchronize();
}

// ---- synchronized statistics

// Replica r's share of a whole batch's inputs: its images, the same parameters and buffers.
LayerInputs share(const LayerInputs& whole, int64_t r, int replicas) {
  LayerInputs part = whole;
  const auto slice = [&](const std::vector<float>& v) {
    const auto n = static_cast<int64_t>(v.size()) / replicas;
    return std::vector<float>(v.begin() + r * n, v.begin() + (r + 1) * n);
  };
  part.x = slice(whole.x);
  part.dout = slice(whole.dout);
  return part;
}

// What the model's all-reduce does between two stages, on the host: every replica's sync
// values become their sum, added in rank order.
void all_reduce(Device& device, const std::vector<BoundLayer>& layers, LayerKernel::Pass pass) {
  Stream& stream = device.default_stream();
  std::vector<std::vector<float>> values;
  for (const BoundLayer& b : layers) {
    const TensorView v = b.kernel->sync_values(pass);
    values.emplace_back(static_cast<size_t>(v.numel()));
    device.copy_to_host(values.back().data(), v.data, v.bytes(), stream);
  }
  stream.synchronize();
  std::vector<float> sum(values[0].size(), 0.0f);
  for (const std::vector<float>& v : values) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  for (const BoundLayer& b : layers) {
    const TensorView v = b.kernel->sync_values(pass);
    device.copy_to_device(v.data, sum.data(), v.bytes(), stream);
  }
  stream.synchronize();
}

// Every replica's layer through the training forward and two backwards (without the input's
// gradient, then with it), stage by stage as Model::run_forward and run_backward drive them.
std::vector<BoundLayer> run_synchronized(Device& device, const LayerCase& whole,
                                         const LayerInputs& inputs, int replicas) {
  LayerCase part = whole;
  part.in = Shape{whole.in[0] / replicas, whole.in[1], whole.in[2], whole.in[3]};
  std::vector<BoundLayer> layers;
  for (int r = 0; r < replicas; ++r) {
    layers.push_back(bind_layer(device, part, share(inputs, r, replicas), SyncGroup{replicas, r}));
  }
  Stream& stream = device.default_stream();
  using Pass = LayerKernel::Pass;
  const int forward_points = layers[0].kernel->sync_points(Pass::kForward);
  for (int stage = 0; stage <= forward_points; ++stage) {
    for (BoundLayer& b : layers) b.kernel->forward_stage(stage, b.in.data(), b.out.data(), stream);
    if (stage < forward_points) all_reduce(device, layers, Pass::kForward);
  }
  const int backward_points = layers[0].kernel->sync_points(Pass::kBackward);
  for (const bool with_din : {false, true}) {
    for (int stage = 0; stage <= backward_points; ++stage) {
      for (BoundLayer& b : layers) {
        b.kernel->backward_stage(stage, b.in.data(), b.out.data(), b.dout.data(),
                                 with_din ? b.din.data() : nullptr, stream);
      }
      if (stage < backward_points) all_reduce(device, layers, Pass::kBackward);
    }
  }
  stream.synchronize();
  return layers;
}

// The synchronized layers of 2 and 3 replicas against the unsynchronized layer on the whole
// batch: outputs and input gradients (concatenated), buffers (on every replica), parameter
// gradients (summed over the replicas: the gradient all-reduce adds them).
void expect_synchronized_is_whole_batch(Device& device) {
  for (const int replicas : {2, 3}) {
    for (LayerCase c : batch_norm_cases()) {
      c.in = Shape{c.in[0] * 3, c.in[1], c.in[2], c.in[3]};  // 6 or 12 images
      SCOPED_TRACE(c.name + ", " + std::to_string(replicas) + " replicas");
      const LayerInputs inputs = layer_inputs(c, 99);
      const LayerResult want = run_layer(device, c, inputs);
      const std::vector<BoundLayer> got = run_synchronized(device, c, inputs, replicas);
      ASSERT_EQ(got[0].kernel->sync_points(LayerKernel::Pass::kForward), 1);
      ASSERT_EQ(got[0].kernel->sync_points(LayerKernel::Pass::kBackward), 1);
      std::vector<float> out;
      std::vector<float> din;
      std::vector<std::vector<float>> grads(want.grads.size());
      for (const BoundLayer& b : got) {
        const std::vector<float> b_out = b.out.to_host();
        const std::vector<float> b_din = b.din.to_host();
        out.insert(out.end(), b_out.begin(), b_out.end());
        din.insert(din.end(), b_din.begin(), b_din.end());
        for (size_t i = 0; i < b.buffers.size(); ++i) {
          EXPECT_CLOSE(b.buffers[i].to_host(), want.buffers[i], kTolerance,
                       "buffer " + std::to_string(i));
          // Every replica merged the same gathered moments in the same order.
          EXPECT_EQ(b.buffers[i].to_host(), got[0].buffers[i].to_host()) << "buffer " << i;
        }
        for (size_t i = 0; i < grads.size(); ++i) {
          const std::vector<float> g = b.grads[i].to_host();
          grads[i].resize(g.size(), 0.0f);
          for (size_t j = 0; j < g.size(); ++j) grads[i][j] += g[j];
        }
      }
      EXPECT_CLOSE(out, want.out, kTolerance, "forward");
      EXPECT_CLOSE(din, want.din, kTolerance, "input gradient");
      for (size_t i = 0; i < grads.size(); ++i) {
        EXPECT_CLOSE(grads[i], want.grads[i], kTolerance, "gradient " + std::to_string(i));
      }
    }
  }
}

// One replica's stages against the unsynchronized passes: its moments gathered and merged alone
// are its moments, so the output, the running statistics and the parameter gradients are the
// same bits; dx too on the GPU, whose sums are floats either way, and on the CPU within float
// rounding (its backward's double sums travel as floats).
void expect_one_replica_is_unsynchronized(Device& device, double din_tolerance) {
  for (const LayerCase& c : batch_norm_cases()) {
    SCOPED_TRACE(c.name);
    const LayerInputs inputs = layer_inputs(c, 98);
    const LayerResult want = run_layer(device, c, inputs);
    const std::vector<BoundLayer> got = run_synchronized(device, c, inputs, 1);
    EXPECT_EQ(got[0].out.to_host(), want.out);
    for (size_t i = 0; i < want.buffers.size(); ++i) {
      EXPECT_EQ(got[0].buffers[i].to_host(), want.buffers[i]) << "buffer " << i;
    }
    for (size_t i = 0; i < want.grads.size(); ++i) {
      EXPECT_EQ(got[0].grads[i].to_host(), want.grads[i]) << "gradient " << i;
    }
    if (din_tolerance == 0.0) {
      EXPECT_EQ(got[0].din.to_host(), want.din);
    } else {
      EXPECT_CLOSE(got[0].din.to_host(), want.din, din_tolerance, "input gradient");
    }
  }
}

TEST_F(CudaKernelsTest, BatchNormSynchronizedOverReplicasIsTheWholeBatchs) {
  expect_synchronized_is_whole_batch(*gpu_);
}

// The GPU's synchronized stages over 2 and 3 replicas against their host mirror
// (norm_math.h's stage functions, the sync values summed in rank order between stages as
// run_synchronized does), bit for bit: outputs, running statistics, gradients and dx.
TEST_F(CudaKernelsTest, BatchNormSynchronizedStagesMatchTheirHostMirrorBitForBit) {
  namespace km = kernel_math;
  for (const int replicas : {2, 3}) {
    for (LayerCase c : batch_norm_cases()) {
      c.in = Shape{c.in[0] * 3, c.in[1], c.in[2], c.in[3]};
      SCOPED_TRACE(c.name + ", " + std::to_string(replicas) + " replicas");
      const auto& spec = std::get<BatchNorm2DSpec>(c.spec);
      const LayerInputs inputs = layer_inputs(c, 97);
      const std::vector<BoundLayer> got = run_synchronized(*gpu_, c, inputs, replicas);
      const int64_t cs = c.in[3];
      const int64_t rows = c.in.numel() / cs / replicas;
      const auto n = static_cast<size_t>(rows * cs);
      struct Mirror {
        std::vector<float> y, dx, mean, invstd, dgamma, dbeta, sync;
        std::vector<std::vector<float>> buffers;
      };
      std::vector<Mirror> m(static_cast<size_t>(replicas));
      const auto all_reduce = [&](int64_t count) {
        std::vector<float> sum(static_cast<size_t>(count), 0.0f);
        for (const Mirror& r : m) {
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += r.sync[i];
        }
        for (Mirror& r : m) std::copy(sum.begin(), sum.end(), r.sync.begin());
      };
      for (int r = 0; r < replicas; ++r) {
        Mirror& k = m[static_cast<size_t>(r)];
        k = {std::vector<float>(n),
             std::vector<float>(n),
             std::vector<float>(cs),
             std::vector<float>(cs),
             std::vector<float>(cs),
             std::vector<float>(cs),
             std::vector<float>(static_cast<size_t>(km::norm_forward_sync_floats(cs, replicas))),
             inputs.buffers};
        km::norm_forward_stage0_on_host(inputs.x.data() + r * n, rows, cs, r, replicas,
                                        k.sync.data());
      }
      all_reduce(km::norm_forward_sync_floats(cs, replicas));
      for (int r = 0; r < replicas; ++r) {
        Mirror& k = m[static_cast<size_t>(r)];
        const float* x = inputs.x.data() + r * n;
        km::norm_forward_stage1_on_host(
            x, rows, cs, replicas, inputs.params[0].data(), inputs.params[1].data(), spec.eps,
            spec.momentum, k.sync.data(), k.y.data(), k.buffers[0].data(), k.buffers[1].data(),
            k.buffers[2].data(), k.mean.data(), k.invstd.data(), c.fuse_relu);
        km::norm_backward_stage0_on_host(x, inputs.dout.data() + r * n, rows, cs, k.mean.data(),
                                         k.invstd.data(), k.dgamma.data(), k.dbeta.data(),
                                         k.sync.data(), c.fuse_relu ? k.y.data() : nullptr);
      }
      all_reduce(km::norm_backward_sync_floats(cs));
      for (int r = 0; r < replicas; ++r) {
        Mirror& k = m[static_cast<size_t>(r)];
        km::norm_backward_stage1_on_host(inputs.x.data() + r * n, inputs.dout.data() + r * n, rows,
                                         cs, replicas, inputs.params[0].data(), k.mean.data(),
                                         k.invstd.data(), k.sync.data(), k.dx.data(),
                                         c.fuse_relu ? k.y.data() : nullptr);
        const BoundLayer& b = got[static_cast<size_t>(r)];
        EXPECT_EQ(b.out.to_host(), k.y) << "replica " << r;
        for (size_t i = 0; i < k.buffers.size(); ++i) {
          EXPECT_EQ(b.buffers[i].to_host(), k.buffers[i]) << "replica " << r << ", buffer " << i;
        }
        EXPECT_EQ(b.grads[0].to_host(), k.dgamma) << "replica " << r;
        EXPECT_EQ(b.grads[1].to_host(), k.dbeta) << "replica " << r;
        EXPECT_EQ(b.din.to_host(), k.dx) << "replica " << r;
      }
    }
  }
}

TEST_F(CudaKernelsTest, BatchNormSynchronizedOverOneReplicaIsUnsynchronized) {
  expect_one_replica_is_unsynchronized(*gpu_, 0.0);
}

TEST(CpuBatchNorm, SynchronizedOverReplicasIsTheWholeBatchs) {
  CpuDevice device(0, 2);
  expect_synchronized_is_whole_batch(device);
}

TEST(CpuBatchNorm, SynchronizedOverOneReplicaIsUnsynchronized) {
  CpuDevice device(0, 2);
  expect_one_replica_is_unsynchronized(device, 1e-6);
}

}  // namespace
}  // namespace scalescope
