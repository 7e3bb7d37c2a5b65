// Layer normalization over the last dimension D of a [rows, D] tensor (PyTorch's
// nn.LayerNorm(D); a sequence [N, S, D] is N·S rows): the per-element math of the CPU and CUDA
// kernels and the order in which they add up their sums, the same on both, so that they agree
// to the bit whatever the thread count or launch shape.
//
// Forward, per row: mean = Σx / D; var = Σ(x - mean)² / D (biased; two passes, so that a large
// mean does not cancel the variance's digits); rstd = 1 / sqrt(var + eps);
// y = ((x - mean)·rstd)·w + b. The mean and rstd of each row are kept for backward.
// Backward, with x̂ = (x - mean)·rstd and g = dy·w:
//   dx = ((g - Σg / D) - x̂·(Σg·x̂ / D))·rstd per row;
//   dw = Σdy·x̂ and db = Σdy per column, over the rows.
//
// Row sums: lane l of kLayerNormLanes (a GPU warp) adds the terms l, l + 32, ... in order, then
// the lanes' sums are added pairwise, lane i with lane i + 16, then i + 8, ..., i + 1 (the GPU's
// butterfly of warp shuffles). Column sums follow bias_math.h's order (parts of the rows, each
// among kBiasTileRows row-threads; thread sums, then part sums, added in order).
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/host_device.h"
#include "models/kernel_math/norm_math.h"

namespace scalescope::kernel_math {

constexpr int kLayerNormLanes = 32;

SS_HOST_DEVICE inline float layer_norm_mean(float sum, int64_t d) {
  return sum / static_cast<float>(d);
}

SS_HOST_DEVICE inline float layer_norm_rstd(float squared_deviations, int64_t d, float eps) {
  return 1.0f / sqrtf(squared_deviations / static_cast<float>(d) + eps);
}

SS_HOST_DEVICE inline float layer_norm_xhat(float x, float mean, float rstd) {
  return (x - mean) * rstd;
}

SS_HOST_DEVICE inline float layer_norm_forward_element(float x, float mean, float rstd, float w,
                                                       float b) {
  return layer_norm_xhat(x, mean, rstd) * w + b;
}

// dx from g = dy·w, x̂, and the row's Σg / D and Σg·x̂ / D.
SS_HOST_DEVICE inline float layer_norm_backward_element(float g, float xhat, float mean_g,
                                                        float mean_gxhat, float rstd) {
  return ((g - mean_g) - xhat * mean_gxhat) * rstd;
}

// Stores dx's value, or with `add` adds it to what dx holds (the gradient a later reader of the
// input wrote): old + new, as accumulate_into adds a gradient written elsewhere.
SS_HOST_DEVICE inline void layer_norm_store_dx(float* dx, float value, bool add) {
  *dx = add ? *dx + value : value;
}

// The terms of the row sums, for element i of a row.
struct RowValueTerm {  // x
  const float* x;
  SS_HOST_DEVICE float operator()(int64_t i) const { return x[i]; }
};
struct RowSquaredDeviationTerm {  // (x - mean)²
  const float* x;
  float mean;
  SS_HOST_DEVICE float operator()(int64_t i) const {
    const float d = x[i] - mean;
    return d * d;
  }
};
struct RowGradTerm {  // g = dy·w
  const float* dy;
  const float* w;
  SS_HOST_DEVICE float operator()(int64_t i) const { return dy[i] * w[i]; }
};
// X: how backward's input x is read, fp32 (`const float*`) or the model's saved bf16 copy
// (HalfValuesIn<HalfFormat::kBf16>), whose values widen exactly: the same bits either way.
template <class X = const float*>
struct RowGradXhatTerm {  // g·x̂
  X x;
  const float* dy;
  const float* w;
  float mean, rstd;
  SS_HOST_DEVICE float operator()(int64_t i) const {
    return (dy[i] * w[i]) * layer_norm_xhat(x[i], mean, rstd);
  }
};
template <class X>
RowGradXhatTerm(X, const float*, const float*, float, float) -> RowGradXhatTerm<X>;

// Lane `lane`'s share of a row sum: term(lane) + term(lane + 32) + ... below d, in order.
template <class Term>
SS_HOST_DEVICE inline float layer_norm_lane_sum(const Term& term, int64_t lane, int64_t d) {
  float sum = 0.0f;
  for (int64_t i = lane; i < d; i += kLayerNormLanes) sum += term(i);
  return sum;
}

// The term of the column sums: {dy, dy·x̂} at row r, column c of [rows, d], from the row's
// mean and rstd.
template <class X = const float*>
struct ColumnGradTerm {
  X x;
  const float* dy;
  const float* mean;
  const float* rstd;
  int64_t d;
  SS_HOST_DEVICE SumPair operator()(int64_t r, int64_t c) const {
    const int64_t i = r * d + c;
    return {dy[i], dy[i] * layer_norm_xhat(x[i], mean[r], rstd[r])};
  }
};
template <class X>
ColumnGradTerm(X, const float*, const float*, const float*, int64_t) -> ColumnGradTerm<X>;

// ---- the kernels' order of additions on the host (the CPU kernel runs these)

// Σ term(i) over i < d in the row order above. Lane l's sum is formed block by block of
// kLayerNormLanes terms: layer_norm_lane_sum's additions in its order, in loops a compiler can
// vectorize.
template <class Term>
inline float layer_norm_row_sum_on_host(const Term& term, int64_t d) {
  float lanes[kLayerNormLanes] = {};
  int64_t i = 0;
  for (; i + kLayerNormLanes <= d; i += kLayerNormLanes) {
    for (int l = 0; l < kLayerNormLanes; ++l) lanes[l] += term(i + l);
  }
  for (int l = 0; i + l < d; ++l) lanes[l] += term(i + l);
  for (int offset = kLayerNormLanes / 2; offset > 0; offset /= 2) {
    for (int l = 0; l < offset; ++l) lanes[l] = lanes[l] + lanes[l + offset];
  }
  return lanes[0];
}

// One row's forward: y, and the row's mean and rstd.
inline void layer_norm_forward_row_on_host(const float* x, float* y, int64_t d, const float* w,
                                           const float* b, float eps, float* mean, float* rstd) {
  const float m = layer_norm_mean(layer_norm_row_sum_on_host(RowValueTerm{x}, d), d);
  const float s =
      layer_norm_rstd(layer_norm_row_sum_on_host(RowSquaredDeviationTerm{x, m}, d), d, eps);
  for (int64_t i = 0; i < d; ++i) y[i] = layer_norm_forward_element(x[i], m, s, w[i], b[i]);
  *mean = m;
  *rstd = s;
}

// One row's dx from the forward's mean and rstd (kAdd: added to dx, layer_norm_store_dx).
template <bool kAdd = false, class X = const float*>
inline void layer_norm_backward_row_on_host(X x, const float* dy, float* dx, int64_t d,
                                            const float* w, float mean, float rstd) {
  const float mean_g = layer_norm_mean(layer_norm_row_sum_on_host(RowGradTerm{dy, w}, d), d);
  const float mean_gxhat =
      layer_norm_mean(layer_norm_row_sum_on_host(RowGradXhatTerm{x, dy, w, mean, rstd}, d), d);
  for (int64_t i = 0; i < d; ++i) {
    layer_norm_store_dx(dx + i,
                        layer_norm_backward_element(dy[i] * w[i], layer_norm_xhat(x[i], mean, rstd),
                                                    mean_g, mean_gxhat, rstd),
                        kAdd);
  }
}

// The column sums [Σdy·x̂, Σdy] of `part` of the rows (bias_grad_plan(rows)) for the columns
// [c0, c1), into part_dw[c] and part_db[c] (c in [c0, c1)): the row-threads' sums added in
// thread order. `acc` holds 2·(c1 - c0) floats of scratch.
template <class X>
inline void layer_norm_part_sums_on_host(const ColumnGradTerm<X>& term, int64_t rows,
                                         const BiasGradPlan& plan, int64_t part, int64_t c0,
                                         int64_t c1, float* acc, float* part_dw, float* part_db) {
  const IndexRange range = bias_grad_part_rows(plan, rows, part);
  const int64_t width = c1 - c0;
  float* acc_db = acc;
  float* acc_dw = acc + width;
  for (int64_t c = c0; c < c1; ++c) part_dw[c] = part_db[c] = 0.0f;
  for (int64_t t = 0; t < kBiasTileRows; ++t) {
    for (int64_t j = 0; j < width; ++j) acc_db[j] = acc_dw[j] = 0.0f;
    for (int64_t r = range.begin + t; r < range.end; r += kBiasTileRows) {
      for (int64_t j = 0; j < width; ++j) {
        const SumPair s = term(r, c0 + j);
        acc_db[j] += s.a;
        acc_dw[j] += s.b;
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      part_db[c0 + j] += acc_db[j];
      part_dw[c0 + j] += acc_dw[j];
    }
  }
}

// The backward of `part` of the rows in one pass over them: each row's dx
// (layer_norm_backward_row_on_host) and its terms of the column sums over all d columns, into
// part_dw and part_db with layer_norm_part_sums_on_host's bits over [0, d). Row r's terms go to
// the sums of row-thread (r - the part's begin) mod kBiasTileRows, which `acc` holds side by side
// (2·kBiasTileRows·d floats: db's then dw's of each), added into the part's in thread order at
// the end. The terms are taken before dx is written: dx may be dy's buffer (not with kAdd, where
// dx is added to as layer_norm_backward_row_on_host's).
template <bool kAdd = false, class X = const float*>
inline void layer_norm_backward_part_on_host(const ColumnGradTerm<X>& term, float* dx,
                                             const float* w, int64_t rows, const BiasGradPlan& plan,
                                             int64_t part, float* acc, float* part_dw,
                                             float* part_db) {
  const IndexRange range = bias_grad_part_rows(plan, rows, part);
  const int64_t d = term.d;
  for (int64_t i = 0; i < 2 * kBiasTileRows * d; ++i) acc[i] = 0.0f;
  for (int64_t r = range.begin; r < range.end; ++r) {
    float* acc_db = acc + 2 * ((r - range.begin) % kBiasTileRows) * d;
    float* acc_dw = acc_db + d;
    for (int64_t c = 0; c < d; ++c) {
      const SumPair s = term(r, c);
      acc_db[c] += s.a;
      acc_dw[c] += s.b;
    }
    layer_norm_backward_row_on_host<kAdd>(term.x + r * d, term.dy + r * d, dx + r * d, d, w,
                                          term.mean[r], term.rstd[r]);
  }
  for (int64_t c = 0; c < d; ++c) part_dw[c] = part_db[c] = 0.0f;
  for (int64_t t = 0; t < kBiasTileRows; ++t) {
    for (int64_t c = 0; c < d; ++c) {
      part_db[c] += acc[2 * t * d + c];
      part_dw[c] += acc[(2 * t + 1) * d + c];
    }
  }
}

// dw[c] and db[c] from the parts' sums, part p's at parts_dw[p·d + c]: with one part its sums
// themselves, else the parts' added in part order.
SS_HOST_DEVICE inline void layer_norm_finish_sums(const float* parts_dw, const float* parts_db,
                                                  int64_t parts, int64_t d, int64_t c, float* dw,
                                                  float* db) {
  dw[c] = parts == 1 ? parts_dw[c] : ordered_sum(parts_dw + c, parts, d);
  db[c] = parts == 1 ? parts_db[c] : ordered_sum(parts_db + c, parts, d);
}

}  // namespace scalescope::kernel_math
