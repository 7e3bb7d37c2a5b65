// The element-wise ops a model runs itself between its layers, on a GPU against the CPU, bit
// for bit: a graph's add with and without the ReLU after it, that ReLU's gradient into the
// add's inputs from its fp32 output or from the saved 16-bit copy of it, and the 16-bit save and
// restore of activations (compress_gradients with one replica, decompress_gradients). Both
// backends run kernel_math's functions; on a GPU only the ResNet trainers had run them.
// Without a usable GPU the tests skip, saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/device.h"
#include "core/tensor.h"
#include "models/kernel_math/activation_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "tests/models/cuda_test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;
namespace km = kernel_math;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Random values, then the ones where rounding and masks meet their edges: signed zeros,
// infinities, NaN, fp16's overflow (65520) and underflow (2^-25 rounds to 0), a subnormal.
std::vector<float> edge_values(uint64_t seed) {
  std::vector<float> v = random_values(5003, seed, -2.0f, 2.0f);
  v.insert(v.end(), {0.0f, -0.0f, kInf, -kInf, kNan, 65520.0f, -65520.0f, 0x1p-25f, -0x1p-25f,
                     1e-40f, 3e38f, 1.0f + 0x1p-9f, 1.0f + 0x1p-12f});
  return v;
}

// "" when each pair is the same bits or two NaNs (a NaN's payload is the hardware's); else the
// first few differences.
std::string bit_differences(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return "sizes differ";
  std::string report;
  int shown = 0;
  for (size_t i = 0; i < got.size() && shown < 5; ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
    report += "[" + std::to_string(i) + "] " + std::to_string(got[i]) + " vs " +
              std::to_string(want[i]) + "\n";
    ++shown;
  }
  return report;
}

// The add's output and, given a format, the saved copy it writes of it in the same pass
// (restored to floats, so that NaNs compare as NaNs).
struct Added {
  std::vector<float> out, saved;
};
Added add(Device& device, const std::vector<float>& a, const std::vector<float>& b, bool relu,
          std::optional<km::HalfFormat> format = std::nullopt) {
  device.make_current();
  const auto n = static_cast<int64_t>(a.size());
  Tensor ta(device, Shape{n}), tb(device, Shape{n}), out(device, Shape{n});
  DeviceBuffer saved(device, static_cast<size_t>(n) * sizeof(uint16_t));
  ta.copy_from_host(a);
  tb.copy_from_host(b);
  km::HalfRow row;
  if (format) row = {static_cast<uint16_t*>(saved.data()), *format};
  add_into(out.data(), ta.data(), tb.data(), n, relu, device.default_stream(), row);
  std::vector<uint16_t> half(static_cast<size_t>(n));
  if (format) {
    device.copy_to_host(half.data(), saved.data(), saved.bytes(), device.default_stream());
  }
  device.default_stream().synchronize();
  Added r{out.to_host(), {}};
  if (format) {
    for (const uint16_t h : half) r.saved.push_back(km::from_half(h, *format));
  }
  return r;
}

TEST_F(CudaKernelsTest, AGraphsAddWithAndWithoutItsReluIsTheCpusBits) {
  const std::vector<float> a = edge_values(1);
  const std::vector<float> b = edge_values(2);
  for (const bool relu : {false, true}) {
    EXPECT_EQ(bit_differences(add(*gpu_, a, b, relu).out, add(*cpu_, a, b, relu).out), "") << relu;
    // And with the saved 16-bit copy written in the same pass.
    for (const auto format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
      const Added gpu = add(*gpu_, a, b, relu, format);
      const Added cpu = add(*cpu_, a, b, relu, format);
      EXPECT_EQ(bit_differences(gpu.out, cpu.out), "") << relu;
      EXPECT_EQ(bit_differences(gpu.saved, cpu.saved), "") << relu;
    }
  }
}

// The ReLU's output as the mask reads it: fp32 values, or a saved copy in `format`.
struct MaskSource {
  const char* name;
  bool saved;
  km::HalfFormat format;
};

std::vector<float> masked_gradient(Device& device, const std::vector<float>& acc0,
                                   const std::vector<float>& grads, const std::vector<float>& y,
                                   const MaskSource& source, bool first) {
  device.make_current();
  const auto n = static_cast<int64_t>(grads.size());
  Tensor acc(device, Shape{n}), g(device, Shape{n}), values(device, Shape{n});
  DeviceBuffer saved(device, static_cast<size_t>(n) * sizeof(uint16_t));
  acc.copy_from_host(acc0);
  g.copy_from_host(grads);
  values.copy_from_host(y);
  km::ReluOutput relu;
  std::vector<uint16_t> half(y.size());  // alive until the stream has copied it
  if (source.saved) {
    for (size_t i = 0; i < y.size(); ++i) half[i] = km::to_half(y[i], source.format);
    device.copy_to_device(saved.data(), half.data(), saved.bytes(), device.default_stream());
    relu.saved = static_cast<const uint16_t*>(saved.data());
    relu.format = source.format;
  } else {
    relu.values = values.data();
  }
  accumulate_relu_gradient_into(acc.data(), g.data(), relu, n, first, device.default_stream());
  device.default_stream().synchronize();
  return acc.to_host();
}

TEST_F(CudaKernelsTest, TheFusedRelusGradientIsTheCpusBitsFromFp32OrASavedCopy) {
  const std::vector<float> acc0 = edge_values(3);
  const std::vector<float> grads = edge_values(4);
  const std::vector<float> y = edge_values(5);  // a ReLU's output would be >= 0; the mask is not
  for (const MaskSource& source : {MaskSource{"fp32", false, km::HalfFormat::kBf16},
                                   MaskSource{"bf16", true, km::HalfFormat::kBf16},
                                   MaskSource{"fp16", true, km::HalfFormat::kFp16}}) {
    for (const bool first : {true, false}) {
      EXPECT_EQ(bit_differences(masked_gradient(*gpu_, acc0, grads, y, source, first),
                                masked_gradient(*cpu_, acc0, grads, y, source, first)),
                "")
          << source.name << (first ? ", first reader" : ", a later reader");
    }
  }
}

// The model's save of an activation and its restore: the copy's bits and the widened values.
struct SaveRestore {
  std::vector<uint16_t> half;
  std::vector<float> restored;
};

SaveRestore save_and_restore(Device& device, const std::vector<float>& x, km::HalfFormat format) {
  device.make_current();
  const auto n = static_cast<int64_t>(x.size());
  Tensor values(device, Shape{n}), restored(device, Shape{n});
  DeviceBuffer half(device, static_cast<size_t>(n) * sizeof(uint16_t));
  values.copy_from_host(x);
  compress_gradients(values.data(), static_cast<uint16_t*>(half.data()), n, 1, format,
                     device.default_stream());
  decompress_gradients(static_cast<const uint16_t*>(half.data()), restored.data(), n, format,
                       device.default_stream());
  device.default_stream().synchronize();
  SaveRestore r{std::vector<uint16_t>(x.size()), restored.to_host()};
  device.copy_to_host(r.half.data(), half.data(), half.bytes(), device.default_stream());
  device.default_stream().synchronize();
  return r;
}

// NaN's 16 bits may keep different payload bits on the two backends (F16C on the CPU):
// compared as "a NaN" there.
bool same_half(uint16_t a, uint16_t b, km::HalfFormat format) {
  const float fa = km::from_half(a, format), fb = km::from_half(b, format);
  return a == b || (std::isnan(fa) && std::isnan(fb));
}

TEST_F(CudaKernelsTest, TheSixteenBitSaveAndRestoreOfActivationsAreTheCpusBits) {
  const std::vector<float> x = edge_values(6);
  for (const km::HalfFormat format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
    const SaveRestore got = save_and_restore(*gpu_, x, format);
    const SaveRestore want = save_and_restore(*cpu_, x, format);
    int differ = 0;
    for (size_t i = 0; i < x.size(); ++i)
      differ += same_half(got.half[i], want.half[i], format) ? 0 : 1;
    EXPECT_EQ(differ, 0) << (format == km::HalfFormat::kBf16 ? "bf16" : "fp16");
    EXPECT_EQ(bit_differences(got.restored, want.restored), "");
  }
}

}  // namespace
}  // namespace scalescope
