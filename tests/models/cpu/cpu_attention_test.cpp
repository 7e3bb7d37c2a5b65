// models/cpu/cpu_attention.cpp and cpu_attention_bf16.cpp beyond the layer cases' numbers
// (layers_test.cpp): what they keep grows linearly with the sequence, their bits do not depend
// on the thread count, and under bf16 the products read what autocast's attention rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/cpu/cpu_device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernel_math/attention_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/precision_scope.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

std::vector<float> values(int64_t n, uint64_t seed) {
  return testing_util::uniform_values(n, seed, -2.0f, 2.0f);
}

// One attention layer of `heads` heads of `head_dim` channels over [batch, seq] on a CPU device
// of `threads` threads, computing in `precision`: its input, output and their gradients; with
// `pooled`, bound to a transient pool of its own as a model's layers are.
struct AttentionLayer {
  AttentionLayer(int64_t batch, int64_t seq, int64_t heads, int threads,
                 Precision precision = Precision::kFp32, int64_t head_dim = 8, bool pooled = false)
      : device(0, threads),
        in_shape{batch, seq, 3 * head_dim * heads},
        out_shape{batch, seq, head_dim * heads},
        in(device, in_shape),
        out(device, out_shape),
        dout(device, out_shape),
        din(device, in_shape),
        pool(pooled ? std::make_shared<TransientPool>() : nullptr) {
    device.make_current();
    before_kernel = device.memory_in_use();
    const LayerBinding binding{in_shape, out_shape, {}, {}, {}, {}, false, pool};
    const testing_util::PrecisionScope scope(precision);
    kernel = kernel_backend(DeviceKind::kCpu)
                 .make_layer(CausalSelfAttentionSpec{heads}, binding, device);
    made_kernel = device.memory_in_use();
    if (pool) pool->allocate(device);
  }
  // Forward and backward of `x` and `dy`: the output and the input's gradient.
  std::vector<std::vector<float>> run(const std::vector<float>& x, const std::vector<float>& dy) {
    in.copy_from_host(x);
    dout.copy_from_host(dy);
    Stream& stream = device.default_stream();
    kernel->forward(in.data(), out.data(), stream);
    kernel->backward(in.data(), out.data(), dout.data(), din.data(), stream);
    stream.synchronize();
    return {out.to_host(), din.to_host()};
  }
  // What the kernel holds of its own: from forward to backward, and its scratch.
  int64_t kernel_bytes() const { return made_kernel - before_kernel; }

  CpuDevice device;
  Shape in_shape, out_shape;
  Tensor in, out, dout, din;
  std::shared_ptr<TransientPool> pool;  // released before the device it allocated on
  int64_t before_kernel = 0, made_kernel = 0;
  std::unique_ptr<LayerKernel> kernel;
};

// Keeping the probabilities would hold N·H·S² floats: 32 MiB at S = 1024 here. The fused
// kernel's memory is affine in S (each doubling adds the same bytes per added position) and
// under an eighth of that in fp32, a fourth in bf16.
class CpuAttention : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    if (GetParam() == Precision::kBf16) SKIP_WITHOUT_CPU_BF16();
  }
};

TEST_P(CpuAttention, KeepsMemoryLinearInTheSequence) {
  std::vector<int64_t> bytes;
  for (const int64_t seq : {512, 1024, 2048}) {
    AttentionLayer layer(2, seq, 4, 2, GetParam());
    bytes.push_back(layer.kernel_bytes());
    // bf16's blocks of scores have bf16 copies, and oneDNN's products a scratchpad.
    const int64_t part = GetParam() == Precision::kFp32 ? 8 : 4;
    EXPECT_LT(layer.kernel_bytes(), 2 * 4 * seq * seq * static_cast<int64_t>(sizeof(float)) / part)
        << "sequence " << seq;
  }
  // bf16's scratch includes oneDNN's, which its largest product sets and which grows in steps
  // of the library's blocking, differently per instruction set: with AMX under 64 KiB a
  // thread; with AVX512-BF16 alone (brg:avx512_core_bf16, on an AMD EPYC) 197 KiB at 512 and
  // 1024 positions and 269 KiB at 2048. So bf16 gets a quarter of the first difference: a kept
  // S² term of even a fiftieth of a byte per (query, key) pair would still exceed it.
  const double first = static_cast<double>(bytes[1] - bytes[0]);
  const double slack = GetParam() == Precision::kFp32 ? 0.0 : first / 4;
  EXPECT_NEAR(static_cast<double>(bytes[2] - bytes[1]), 2.0 * first, slack);
}

// Each task (a query tile forward, a sample and head backward) is one thread's in a fixed
// order: 1 and 3 threads give the same bits, over several tiles.
TEST_P(CpuAttention, ResultsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results[2];
  for (const int threads : {1, 3}) {
    AttentionLayer layer(3, 150, 2, threads, GetParam());
    results[threads == 1 ? 0 : 1] =
        layer.run(values(layer.in_shape.numel(), 5), values(layer.out_shape.numel(), 6));
  }
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;
}

// In a model the threads' scratch lives in the model's transient pool, which its layers share
// (they run one at a time): the kernel keeps only the log-sum-exps, and computes the same bits.
TEST_P(CpuAttention, KeepsItsScratchInTheModelsTransientPool) {
  AttentionLayer pooled(3, 150, 2, 2, GetParam(), 8, true);
  AttentionLayer owning(3, 150, 2, 2, GetParam(), 8);
  EXPECT_EQ(pooled.kernel_bytes(), 3 * 2 * 150 * static_cast<int64_t>(sizeof(float)));
  EXPECT_GT(owning.kernel_bytes(), pooled.kernel_bytes());
  EXPECT_NE(pooled.pool->data(), nullptr);
  const std::vector<float> x = values(pooled.in_shape.numel(), 7);
  const std::vector<float> dy = values(pooled.out_shape.numel(), 8);
  EXPECT_EQ(pooled.run(x, dy), owning.run(x, dy));
}

INSTANTIATE_TEST_SUITE_P(Precisions, CpuAttention,
                         ::testing::Values(Precision::kFp32, Precision::kBf16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return to_string(info.param);
                         });

// ---- bf16: the products on bf16 copies of their operands

namespace km = kernel_math;

double maybe_bf16(double v, bool round) {
  return round ? km::bf16_to_float(km::float_to_bf16(static_cast<float>(v))) : v;
}

// One attention layer's output and input gradient in float64 (nanoGPT's attention and its
// gradient written out), with the bf16 kernel's roundings where `round`: q, k, v and dout as
// the products read them, the probabilities for P·V (before the division by their sum), and
// in backward the probabilities and the scores' gradient for their products. Each row's
// delta = Σ dout·out reads unrounded values, as the kernel does.
std::vector<std::vector<double>> emulated(const km::AttentionShape& s, const std::vector<float>& x,
                                          const std::vector<float>& dy, bool round) {
  const int64_t d = s.model_dim(), hd = s.head_dim, seq = s.seq;
  const double scale = km::attention_scale(hd);
  const auto in_at = [&](int64_t n, int64_t t, int64_t part, int64_t h, int64_t c) {
    return static_cast<size_t>((n * seq + t) * 3 * d + part * d + h * hd + c);
  };
  const auto out_at = [&](int64_t n, int64_t t, int64_t h, int64_t c) {
    return static_cast<size_t>((n * seq + t) * d + h * hd + c);
  };
  std::vector<double> out(dy.size(), 0.0), din(x.size(), 0.0);
  std::vector<double> p(static_cast<size_t>(seq * seq)), ds(p.size());
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const auto xr = [&](int64_t t, int64_t part, int64_t c) {
        return maybe_bf16(x[in_at(n, t, part, h, c)], round);
      };
      const auto pij = [&](int64_t i, int64_t j) -> double& {
        return p[static_cast<size_t>(i * seq + j)];
      };
      for (int64_t i = 0; i < seq; ++i) {
        double max = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < hd; ++c) dot += xr(i, 0, c) * xr(j, 1, c);
          pij(i, j) = dot * scale;
          max = std::max(max, pij(i, j));
        }
        for (int64_t j = 0; j <= i; ++j) sum += pij(i, j) = std::exp(pij(i, j) - max);
        for (int64_t c = 0; c < hd; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += maybe_bf16(pij(i, j), round) * xr(j, 2, c);
          out[out_at(n, i, h, c)] = acc / sum;
        }
        for (int64_t j = 0; j <= i; ++j) pij(i, j) /= sum;
      }
      for (int64_t i = 0; i < seq; ++i) {
        double delta = 0.0;
        for (int64_t c = 0; c < hd; ++c) delta += dy[out_at(n, i, h, c)] * out[out_at(n, i, h, c)];
        for (int64_t j = 0; j <= i; ++j) {
          double dp = 0.0;
          for (int64_t c = 0; c < hd; ++c) {
            dp += maybe_bf16(dy[out_at(n, i, h, c)], round) * xr(j, 2, c);
          }
          ds[static_cast<size_t>(i * seq + j)] = pij(i, j) * (dp - delta) * scale;
        }
      }
      for (int64_t i = 0; i < seq; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          const double pr = maybe_bf16(pij(i, j), round);
          const double dsr = maybe_bf16(ds[static_cast<size_t>(i * seq + j)], round);
          for (int64_t c = 0; c < hd; ++c) {
            din[in_at(n, j, 2, h, c)] += pr * maybe_bf16(dy[out_at(n, i, h, c)], round);
            din[in_at(n, j, 1, h, c)] += dsr * xr(i, 0, c);
            din[in_at(n, i, 0, h, c)] += dsr * xr(j, 1, c);
          }
        }
      }
    }
  }
  return {out, din};
}

double mean_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(a[i] - b[i]);
  return sum / static_cast<double>(a.size());
}

// Under bf16 the kernel's results are float64's on the rounded operands (to fp32's accuracy),
// not float64's on the operands themselves: its differences from the first are a small fraction
// of its differences from the second, which are bf16's. The fp32 kernel's are fp32's. Two query
// tiles, the second ragged, and a head size of 16.
TEST(CpuAttentionBf16, ComputesOnTheCopiesAutocastsAttentionRounds) {
  SKIP_WITHOUT_CPU_BF16();
  const km::AttentionShape s{2, 70, 2, 16};
  AttentionLayer bf16(s.batch, s.seq, s.heads, 2, Precision::kBf16, s.head_dim);
  AttentionLayer fp32(s.batch, s.seq, s.heads, 2, Precision::kFp32, s.head_dim);
  const std::vector<float> x = values(bf16.in_shape.numel(), 21);
  const std::vector<float> dy = values(bf16.out_shape.numel(), 22);
  const auto got = bf16.run(x, dy);
  const auto fp32_got = fp32.run(x, dy);
  const auto rounded = emulated(s, x, dy, true);
  const auto exact = emulated(s, x, dy, false);
  for (size_t t = 0; t < 2; ++t) {
    SCOPED_TRACE(t == 0 ? "output" : "input gradient");
    const double from_rounded = mean_difference(got[t], rounded[t]);
    const double from_exact = mean_difference(got[t], exact[t]);
    const double fp32_from_exact = mean_difference(fp32_got[t], exact[t]);
    EXPECT_LT(from_rounded, 0.02 * from_exact) << from_rounded << " " << from_exact;
    EXPECT_LT(fp32_from_exact, 0.02 * from_exact) << fp32_from_exact << " " << from_exact;
    EXPECT_LT(from_exact, 8 * km::unit_roundoff(km::HalfFormat::kBf16)) << from_exact;
  }
  for (const KernelChoice& k : bf16.kernel->choices()) {
    EXPECT_EQ(k.math, "bf16") << k.pass;
    EXPECT_NE(k.algorithm.find("oneDNN matmul ("), std::string::npos) << k.algorithm;
  }
}

// The fp32 kernel's products in AVX-512 registers (the default where the CPU has AVX-512) and as
// oneDNN's sgemm (SCALESCOPE_ATTENTION_PRODUCTS=sgemm): both float64's results to fp32's
// accuracy, at gpt micro's head size over three query tiles (the last ragged), and the run
// report's kernels list says which ran.
TEST(CpuAttentionFp32, TileProductsAndSgemmComputeTheSameAttention) {
  const km::AttentionShape s{2, 150, 2, 32};
  AttentionLayer tiles(s.batch, s.seq, s.heads, 2, Precision::kFp32, s.head_dim);
  setenv("SCALESCOPE_ATTENTION_PRODUCTS", "sgemm", 1);
  AttentionLayer sgemm(s.batch, s.seq, s.heads, 2, Precision::kFp32, s.head_dim);
  unsetenv("SCALESCOPE_ATTENTION_PRODUCTS");
  const std::vector<float> x = values(tiles.in_shape.numel(), 41);
  const std::vector<float> dy = values(tiles.out_shape.numel(), 42);
  const auto exact = emulated(s, x, dy, false);
  const auto by_tiles = tiles.run(x, dy), by_sgemm = sgemm.run(x, dy);
  for (size_t t = 0; t < 2; ++t) {
    SCOPED_TRACE(t == 0 ? "output" : "input gradient");
    const double tiles_error = mean_difference(by_tiles[t], exact[t]);
    const double sgemm_error = mean_difference(by_sgemm[t], exact[t]);
    EXPECT_LT(tiles_error, 2e-7) << tiles_error;
    EXPECT_LT(sgemm_error, 2e-7) << sgemm_error;
  }
  const bool avx512 = __builtin_cpu_supports("avx512f");
  for (const KernelChoice& k : tiles.kernel->choices()) {
    EXPECT_NE(k.algorithm.find(avx512 ? "AVX-512 tile products" : "dnnl_sgemm"), std::string::npos)
        << k.algorithm;
  }
  for (const KernelChoice& k : sgemm.kernel->choices()) {
    EXPECT_NE(k.algorithm.find("dnnl_sgemm"), std::string::npos) << k.algorithm;
  }
}

// Forward on the model's saved bf16 copy of the input is forward on the input, and backward on
// the saved copies of the input and output is backward on the values they hold.
TEST(CpuAttentionBf16, PassesOnTheSavedCopiesAreThePassesOnTheirValues) {
  SKIP_WITHOUT_CPU_BF16();
  AttentionLayer layer(2, 70, 2, 2, Precision::kBf16, 16);
  EXPECT_TRUE(layer.kernel->forwards_from_saved(km::HalfFormat::kBf16));
  EXPECT_TRUE(layer.kernel->reads_saved(km::HalfFormat::kBf16));
  EXPECT_FALSE(layer.kernel->reads_saved(km::HalfFormat::kFp16));
  const std::vector<float> x = values(layer.in_shape.numel(), 31);
  const std::vector<float> dy = values(layer.out_shape.numel(), 32);
  const auto copy = [&](const std::vector<float>& v) {
    DeviceBuffer saved(layer.device, v.size() * sizeof(uint16_t));
    auto* to = static_cast<uint16_t*>(saved.data());
    for (size_t i = 0; i < v.size(); ++i) to[i] = km::float_to_bf16(v[i]);
    return saved;
  };
  const auto restored = [](const std::vector<float>& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = km::bf16_to_float(km::float_to_bf16(v[i]));
    return r;
  };
  Stream& stream = layer.device.default_stream();
  const auto passes = layer.run(x, dy);
  const DeviceBuffer x16 = copy(x), y16 = copy(passes[0]);
  layer.out.copy_from_host(std::vector<float>(passes[0].size(), NAN));
  layer.kernel->forward_saved(static_cast<const uint16_t*>(x16.data()), layer.out.data(), stream);
  EXPECT_EQ(layer.out.to_host(), passes[0]);
  layer.in.copy_from_host(restored(x));
  layer.out.copy_from_host(restored(passes[0]));
  layer.kernel->backward(layer.in.data(), layer.out.data(), layer.dout.data(), layer.din.data(),
                         stream);
  const std::vector<float> din = layer.din.to_host();
  layer.din.copy_from_host(std::vector<float>(din.size(), NAN));
  layer.kernel->backward_saved(static_cast<const uint16_t*>(x16.data()),
                               static_cast<const uint16_t*>(y16.data()), layer.dout.data(),
                               layer.din.data(), stream);
  EXPECT_EQ(layer.din.to_host(), din);
  // And into the bf16 copy of the gradient that c_attn's backward reads: the same gradient,
  // rounded as that copy would be.
  ASSERT_TRUE(layer.kernel->writes_half_gradient(km::HalfFormat::kBf16));
  DeviceBuffer din16(layer.device, din.size() * sizeof(uint16_t));
  auto* got = static_cast<uint16_t*>(din16.data());
  std::fill(got, got + din.size(), uint16_t{0x7fc0});  // NaN: every value must be written
  layer.kernel->backward_into_half_gradient(static_cast<const uint16_t*>(x16.data()),
                                            static_cast<const uint16_t*>(y16.data()),
                                            layer.dout.data(), got, stream);
  for (size_t i = 0; i < din.size(); ++i) {
    ASSERT_EQ(got[i], km::float_to_bf16(din[i])) << i;
  }
}

}  // namespace
}  // namespace scalescope
