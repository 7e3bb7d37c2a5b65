// models/cpu/cpu_attention.cpp beyond the layer cases' numbers (layers_test.cpp): what it keeps
// grows linearly with the sequence, and its bits do not depend on the thread count.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "models/layer_spec.h"

namespace scalescope {
namespace {

std::vector<float> values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(-2.0f, 2.0f);
  return v;
}

// One attention layer of `heads` heads of 8 channels over [batch, seq] on a CPU device of
// `threads` threads: its input, output and their gradients.
struct AttentionLayer {
  AttentionLayer(int64_t batch, int64_t seq, int64_t heads, int threads)
      : device(0, threads),
        in_shape{batch, seq, 3 * 8 * heads},
        out_shape{batch, seq, 8 * heads},
        in(device, in_shape),
        out(device, out_shape),
        dout(device, out_shape),
        din(device, in_shape) {
    device.make_current();
    before_kernel = device.memory_in_use();
    const LayerBinding binding{in_shape, out_shape, {}, {}, {}, {}, false, nullptr};
    kernel = kernel_backend(DeviceKind::kCpu)
                 .make_layer(CausalSelfAttentionSpec{heads}, binding, device);
  }
  // What the kernel holds of its own: from forward to backward, and its scratch.
  int64_t kernel_bytes() const { return device.memory_in_use() - before_kernel; }

  CpuDevice device;
  Shape in_shape, out_shape;
  Tensor in, out, dout, din;
  int64_t before_kernel = 0;
  std::unique_ptr<LayerKernel> kernel;
};

// Keeping the probabilities would hold N·H·S² floats: 32 MiB at S = 1024 here. The fused
// kernel's memory is affine in S (each doubling adds the same bytes per added position) and
// under an eighth of that.
TEST(CpuAttention, KeepsMemoryLinearInTheSequence) {
  std::vector<int64_t> bytes;
  for (const int64_t seq : {512, 1024, 2048}) {
    AttentionLayer layer(2, seq, 4, 2);
    bytes.push_back(layer.kernel_bytes());
    EXPECT_LT(layer.kernel_bytes(), 2 * 4 * seq * seq * static_cast<int64_t>(sizeof(float)) / 8)
        << "sequence " << seq;
  }
  EXPECT_EQ(bytes[2] - bytes[1], 2 * (bytes[1] - bytes[0]));
}

// Each task (a query tile forward, a sample and head backward) is one thread's in a fixed
// order: 1 and 3 threads give the same bits, over several tiles.
TEST(CpuAttention, ResultsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results[2];
  for (const int threads : {1, 3}) {
    AttentionLayer layer(3, 150, 2, threads);
    layer.in.copy_from_host(values(layer.in_shape.numel(), 5));
    layer.dout.copy_from_host(values(layer.out_shape.numel(), 6));
    Stream& stream = layer.device.default_stream();
    layer.kernel->forward(layer.in.data(), layer.out.data(), stream);
    layer.kernel->backward(layer.in.data(), layer.out.data(), layer.dout.data(), layer.din.data(),
                           stream);
    stream.synchronize();
    for (const Tensor* t : {&layer.out, &layer.din}) {
      results[threads == 1 ? 0 : 1].push_back(t->to_host());
    }
  }
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;
}

}  // namespace
}  // namespace scalescope
