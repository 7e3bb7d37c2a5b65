// What the CUDA kernel tests (cuda_kernels_test.cpp, cuda_norm_test.cpp) share: the fixture
// that skips without a GPU, the TF32 switch's scope, the relative error of a tensor, and layer
// kernels bound to fresh random inputs and run through forward, backward and forward_eval.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/cpu/cpu_device.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/precision_scope.h"
#include "tests/test_util.h"

namespace scalescope::cuda_test {

// Why the GPU tests cannot run here, or "" when they can.
inline std::string gpu_unavailable() {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  if (cuda == nullptr) return missing_backend_message(DeviceKind::kCuda);
  if (cuda->device_count() > 0) return "";
  return "no usable GPU (" + cuda->unavailable_reason() + ")";
}

// The relative error (relative_error below) a GPU kernel may show against the CPU kernel in
// strict fp32 and with TF32 allowed.
constexpr double kStrictTolerance = 1e-5;
constexpr double kTf32Tolerance = 5e-3;

// Allows TF32 (or strict fp32) for a scope and restores the precision after.
class Tf32Scope : public ScopedPrecision {
 public:
  explicit Tf32Scope(bool allow) : ScopedPrecision(allow ? Precision::kTf32 : Precision::kFp32) {}
};

inline std::vector<float> random_values(int64_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  return testing_util::uniform_values(n, seed, lo, hi);
}

// max |got - want| / max |want|; infinite when the sizes differ or a NaN appears on one side
// only.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) return std::numeric_limits<double>::infinity();
    if (std::isnan(want[i])) continue;
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

#define EXPECT_CLOSE(got, want, tol, what)               \
  do {                                                   \
    EXPECT_EQ((got).size(), (want).size()) << (what);    \
    EXPECT_LE(relative_error((got), (want)), (tol))      \
        << (what) << " (" << (got).size() << " values)"; \
  } while (0)

// A GPU and a CPU device for one test; skips the test when there is no GPU.
class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = gpu_unavailable();
    if (!why.empty()) GTEST_SKIP() << "CUDA kernels not tested: " << why;
    gpu_ = backend(DeviceKind::kCuda).open(0, BackendOptions{});
    cpu_ = std::make_unique<CpuDevice>(0, 2);
  }

  std::unique_ptr<Device> gpu_;
  std::unique_ptr<CpuDevice> cpu_;
};

struct LayerCase {
  std::string name;
  LayerSpec spec;
  Shape in;  // batch included; images NHWC
  // Inputs drawn from a few values only, so that max pooling meets ties.
  bool coarse = false;
  // The ReLU after the layer runs inside it both ways (LayerBinding::activation and
  // relu_backward), where the backend fuses it.
  bool fuse_relu = false;
};

struct LayerInputs {
  std::vector<float> x;
  std::vector<float> dout;
  std::vector<std::vector<float>> params;
  std::vector<std::vector<float>> buffers;
};

struct LayerResult {
  std::vector<float> out;
  std::vector<float> din;
  std::vector<std::vector<float>> grads;
  std::vector<std::vector<float>> buffers;  // after the training forward
  std::vector<float> eval_out;              // forward_eval's, after that
};

inline LayerInputs layer_inputs(const LayerCase& c, uint64_t seed) {
  const Shape out = output_shape(c.spec, c.in.without_batch()).with_batch(c.in[0]);
  LayerInputs inputs{
      random_values(c.in.numel(), seed), random_values(out.numel(), seed + 1), {}, {}};
  if (c.coarse) {
    for (float& v : inputs.x) v = std::round(v * 2.0f) / 2.0f;  // -1, -0.5, 0, 0.5, 1
  }
  if (const auto* e = std::get_if<EmbeddingSpec>(&c.spec)) {  // token ids
    for (float& v : inputs.x) v = std::floor((v + 1.0f) * 0.5f * static_cast<float>(e->vocab - 1));
  }
  uint64_t s = seed + 2;
  for (const ParamSpec& p : param_specs(c.spec, c.in.without_batch())) {
    inputs.params.push_back(random_values(p.shape.numel(), s++));
  }
  // Positive, as a running variance must be (num_batches_tracked takes any value).
  for (const ParamSpec& p : buffer_specs(c.spec, c.in.without_batch())) {
    inputs.buffers.push_back(random_values(p.shape.numel(), s++, 0.5f, 1.5f));
  }
  return inputs;
}

// A layer kernel on `device` with its tensors, holding the case's inputs and parameters.
struct BoundLayer {
  Tensor in, out, dout, din;
  std::vector<Tensor> params, grads, buffers;
  std::unique_ptr<LayerKernel> kernel;
};

// `sync`: the replicas whose statistics the kernel's staged passes synchronize.
inline BoundLayer bind_layer(Device& device, const LayerCase& c, const LayerInputs& inputs,
                             SyncGroup sync = {}) {
  device.make_current();
  const Shape out_shape = output_shape(c.spec, c.in.without_batch()).with_batch(c.in[0]);
  BoundLayer b{Tensor(device, c.in),
               Tensor(device, out_shape),
               Tensor(device, out_shape),
               Tensor(device, c.in),
               {},
               {},
               {},
               nullptr};
  b.in.copy_from_host(inputs.x);
  b.dout.copy_from_host(inputs.dout);
  LayerBinding binding{c.in, out_shape, {}, {}, {}, {}, false, nullptr};
  binding.sync = sync;
  if (c.fuse_relu) {
    binding.activation = Activation::kRelu;
    binding.relu_backward = true;
  }
  const std::vector<ParamSpec> specs = param_specs(c.spec, c.in.without_batch());
  b.params.reserve(specs.size());
  b.grads.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    b.params.emplace_back(device, specs[i].shape);
    b.params.back().copy_from_host(inputs.params[i]);
    b.grads.emplace_back(device, specs[i].shape);
    binding.params.push_back(b.params.back().view());
    binding.grads.push_back(b.grads.back().view());
  }
  const std::vector<ParamSpec> buffers = buffer_specs(c.spec, c.in.without_batch());
  b.buffers.reserve(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    b.buffers.emplace_back(device, buffers[i].shape);
    b.buffers.back().copy_from_host(inputs.buffers[i]);
    binding.buffers.push_back(b.buffers.back().view());
  }
  b.kernel = kernel_backend(device.id().kind).make_layer(c.spec, binding, device);
  return b;
}

// Forward, then backward three times: without the input's gradient, then twice with it (the
// second time after the first has overwritten whatever the kernel keeps from forward, such as
// the extended input of asymmetric padding). The last results are returned, with the buffers
// the training forward updated and then forward_eval's output (which reads them).
inline LayerResult run_layer(Device& device, const LayerCase& c, const LayerInputs& inputs) {
  BoundLayer b = bind_layer(device, c, inputs);
  Stream& stream = device.default_stream();
  b.kernel->forward(b.in.data(), b.out.data(), stream);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), nullptr, stream);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  stream.synchronize();
  LayerResult result{b.out.to_host(), b.din.to_host(), {}, {}, {}};
  for (const Tensor& g : b.grads) result.grads.push_back(g.to_host());
  for (const Tensor& t : b.buffers) result.buffers.push_back(t.to_host());
  Tensor eval_out(device, b.out.shape());
  b.kernel->forward_eval(b.in.data(), eval_out.data(), stream);
  stream.synchronize();
  result.eval_out = eval_out.to_host();
  return result;
}

// Every result of the case's layer on the GPU against the CPU kernels' on the same inputs.
inline void expect_layer_matches_cpu(Device& gpu, Device& cpu, const LayerCase& c, double tol) {
  const LayerInputs inputs = layer_inputs(c, 1234);
  const LayerResult want = run_layer(cpu, c, inputs);
  const LayerResult got = run_layer(gpu, c, inputs);
  EXPECT_CLOSE(got.out, want.out, tol, "forward");
  EXPECT_CLOSE(got.din, want.din, tol, "input gradient");
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    EXPECT_CLOSE(got.grads[i], want.grads[i], tol, "gradient of parameter " + std::to_string(i));
  }
  ASSERT_EQ(got.buffers.size(), want.buffers.size());
  for (size_t i = 0; i < got.buffers.size(); ++i) {
    EXPECT_CLOSE(got.buffers[i], want.buffers[i], tol, "buffer " + std::to_string(i));
  }
  EXPECT_CLOSE(got.eval_out, want.eval_out, tol, "forward_eval");
}

// As run_layer, but before backward the forward values that backward_reads says backward does
// not read (the input, the output) are overwritten with NaN: what a graph model's backward
// finds there once another layer's forward reused that memory. Returns din and the gradients.
inline LayerResult run_layer_unread_poisoned(Device& device, const LayerCase& c,
                                             const LayerInputs& inputs) {
  BoundLayer b = bind_layer(device, c, inputs);
  Stream& stream = device.default_stream();
  b.kernel->forward(b.in.data(), b.out.data(), stream);
  stream.synchronize();
  const BackwardReads reads = backward_reads(c.spec);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (!reads.input) b.in.copy_from_host(std::vector<float>(static_cast<size_t>(b.in.numel()), nan));
  if (!reads.output) {
    b.out.copy_from_host(std::vector<float>(static_cast<size_t>(b.out.numel()), nan));
  }
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), nullptr, stream);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  stream.synchronize();
  LayerResult result{{}, b.din.to_host(), {}, {}, {}};
  for (const Tensor& g : b.grads) result.grads.push_back(g.to_host());
  return result;
}

// A device buffer of 16-bit values, two to a float of a tensor.
class HalfTensor {
 public:
  HalfTensor(Device& device, const std::vector<uint16_t>& values)
      : count_(values.size()), t_(device, Shape{static_cast<int64_t>((values.size() + 1) / 2)}) {
    std::vector<float> packed(static_cast<size_t>(t_.numel()), 0.0f);
    std::memcpy(packed.data(), values.data(), values.size() * sizeof(uint16_t));
    t_.copy_from_host(packed);
  }
  uint16_t* data() { return reinterpret_cast<uint16_t*>(t_.data()); }
  std::vector<uint16_t> to_host() const {
    const std::vector<float> packed = t_.to_host();
    std::vector<uint16_t> values(count_);
    std::memcpy(values.data(), packed.data(), count_ * sizeof(uint16_t));
    return values;
  }

 private:
  size_t count_;
  Tensor t_;
};

// Values, their 16-bit copy in `format` as the model's save rounds them, and that copy restored.
struct SixteenBitCopy {
  SixteenBitCopy(std::vector<float> v, kernel_math::HalfFormat format) : values(std::move(v)) {
    for (const float x : values) {
      saved.push_back(kernel_math::to_half(x, format));
      restored.push_back(kernel_math::from_half(saved.back(), format));
    }
  }
  std::vector<float> values;
  std::vector<uint16_t> saved;
  std::vector<float> restored;
};

}  // namespace scalescope::cuda_test
