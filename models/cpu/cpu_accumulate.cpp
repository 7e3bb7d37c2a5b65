// Passes over gradient buffers on CPU memory: accumulation over micro-batches, the casts
// around a compressed all-reduce, the squared norm the gradient noise scale needs, and the
// loss scaler's unscale. The element-wise passes give every element the same result whatever
// the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/cpu/cpu_half.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/in_shares.h"
#include "models/cpu/prefetch.h"
#include "models/cpu/vector_clones.h"

namespace scalescope {

using cpu_shares::in_shares;

void accumulate_into_cpu(float* acc, const float* grads, int64_t count, bool first) {
  // The team of the calling thread: a replica's device set its thread count (make_current).
  if (first) {
    // A copy rather than zeroing `acc` first: one pass over the memory instead of two.
    in_shares(count, [&](int64_t begin, int64_t end) {
      std::copy(grads + begin, grads + end, acc + begin);
    });
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) acc[i] += grads[i];
}

namespace {

// The ReLU's forward as oneDNN's x86 kernels compute it (max(v, 0): +0 for NaN and -0), and
// its backward's mask as their multiply (dy · 0 where y <= 0: -0 for a negative dy, NaN for a
// NaN one; a NaN y passes dy), written without branches so that both vectorize.
// out = a + b over n values on the calling thread, and with `relu` that ReLU's forward; each
// value also given to save(i, v). In vector clones (the baseline build's SSE2 ran the rounding
// a quarter as wide as the save's own pass). Not fetched ahead: its inputs were just written
// (fetching ahead made the residual adds of cifar-resnet-20 5-8% slower).
template <class Save>
[[gnu::always_inline]] inline void add_values(float* __restrict out, const float* __restrict a,
                                              const float* __restrict b, int64_t n, bool relu,
                                              const Save& save) {
  if (!relu) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = a[i] + b[i];
      save(i, out[i]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = a[i] + b[i];
    out[i] = v > 0.0f ? v : 0.0f;
    save(i, out[i]);
  }
}
SCALESCOPE_VECTOR_CLONES
void add_span(float* out, const float* a, const float* b, int64_t n, bool relu) {
  add_values(out, a, b, n, relu, [](int64_t, float) {});
}
// And rounded into `saved` in the same loop: the model's save's bits (kernel_math::float_to_bf16).
SCALESCOPE_VECTOR_CLONES
void add_span_bf16(float* out, uint16_t* saved, const float* a, const float* b, int64_t n,
                   bool relu) {
  add_values(out, a, b, n, relu,
             [saved](int64_t i, float v) { saved[i] = kernel_math::float_to_bf16(v); });
}

// Values an add writes before rounding them into an fp16 saved copy: 16 KiB of floats.
constexpr int64_t kSavedBlock = 4096;

}  // namespace

void add_into_cpu(float* out, const float* a, const float* b, int64_t count, bool relu,
                  const kernel_math::HalfRow& saved) {
  in_shares(count, [&](int64_t begin, int64_t end) {
    float* o = out + begin;
    const int64_t n = end - begin;
    if (saved.at == nullptr) {
      add_span(o, a + begin, b + begin, n, relu);
    } else if (saved.format == kernel_math::HalfFormat::kBf16) {
      add_span_bf16(o, saved.at + begin, a + begin, b + begin, n, relu);
    } else {
      // fp16 (simulated devices only): each block rounded while in cache, by the save's pass.
      for (int64_t i = 0; i < n; i += kSavedBlock) {
        const int64_t m = std::min(kSavedBlock, n - i);
        add_span(o + i, a + begin + i, b + begin + i, m, relu);
        compress_half_span(o + i, saved.at + begin + i, m, 1, saved.format);
      }
    }
  });
}

namespace {

// acc = g or acc += g over n values on the calling thread, g = grads · (y > 0, or NaN), y the
// ReLU's output read through load; grads and y fetched ahead (models/cpu/prefetch.h).
template <class T, class Load>
[[gnu::always_inline]] inline void masked_span(float* __restrict acc, const float* __restrict grads,
                                               const T* __restrict y, const Load& load, int64_t n,
                                               bool first) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        if (first) {
          for (int64_t i = begin; i < end; ++i) {
            acc[i] = grads[i] * static_cast<float>(!(load(y[i]) <= 0.0f));
          }
          return;
        }
        for (int64_t i = begin; i < end; ++i) {
          acc[i] += grads[i] * static_cast<float>(!(load(y[i]) <= 0.0f));
        }
      },
      grads, y);
}
SCALESCOPE_VECTOR_CLONES
void masked_span(float* acc, const float* grads, const float* y, int64_t n, bool first) {
  masked_span(
      acc, grads, y, [](float v) { return v; }, n, first);
}
SCALESCOPE_VECTOR_CLONES
void masked_span_bf16(float* acc, const float* grads, const uint16_t* y, int64_t n, bool first) {
  masked_span(
      acc, grads, y, [](uint16_t v) { return kernel_math::bf16_to_float(v); }, n, first);
}
SCALESCOPE_VECTOR_CLONES
void masked_span_fp16(float* acc, const float* grads, const uint16_t* y, int64_t n, bool first) {
  masked_span(
      acc, grads, y, [](uint16_t v) { return kernel_math::fp16_to_float(v); }, n, first);
}

}  // namespace

void accumulate_relu_gradient_cpu(float* acc, const float* grads,
                                  const kernel_math::ReluOutput& relu_output, int64_t count,
                                  bool first) {
  // One loop per source, each vectorized (fp16's conversion only where sim emulates fp16).
  in_shares(count, [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    if (const float* v = relu_output.values) {
      masked_span(acc + begin, grads + begin, v + begin, n, first);
    } else if (relu_output.format == kernel_math::HalfFormat::kBf16) {
      masked_span_bf16(acc + begin, grads + begin, relu_output.saved + begin, n, first);
    } else {
      masked_span_fp16(acc + begin, grads + begin, relu_output.saved + begin, n, first);
    }
  });
}

void compress_gradients_cpu(const float* grads, uint16_t* half, int64_t count, int replicas,
                            kernel_math::HalfFormat format) {
  in_shares(count, [&](int64_t begin, int64_t end) {
    compress_half_span(grads + begin, half + begin, end - begin, replicas, format);
  });
}

void decompress_gradients_cpu(const uint16_t* half, float* grads, int64_t count,
                              kernel_math::HalfFormat format) {
  in_shares(count, [&](int64_t begin, int64_t end) {
    decompress_half_span(half + begin, grads + begin, end - begin, format);
  });
}

double squared_norm_cpu(const float* values, int64_t count) {
  std::vector<double> shares(static_cast<size_t>(omp_get_max_threads()), 0.0);
  in_shares(count, [&](int64_t begin, int64_t end) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = begin; i < end; ++i) {
      const double v = values[i];
      sum += v * v;
    }
    shares[static_cast<size_t>(omp_get_thread_num())] = sum;
  });
  double total = 0.0;
  for (const double s : shares) total += s;
  return total;
}

void round_to_fp16_cpu(const float* in, float* out, int64_t count) {
  in_shares(count, [&](int64_t begin, int64_t end) {
    round_to_fp16_span(in + begin, out + begin, end - begin);
  });
}

void unscale_gradients_cpu(float* grads, int64_t count, float inv_scale, float* found_inf) {
  int overflowed = 0;
#pragma omp parallel for simd schedule(static) reduction(| : overflowed)
  for (int64_t i = 0; i < count; ++i) {
    const float g = grads[i] * inv_scale;
    grads[i] = g;
    overflowed |= static_cast<int>(!std::isfinite(g));
  }
  *found_inf = overflowed != 0 ? 1.0f : 0.0f;
}

}  // namespace scalescope
