// Batch normalization over the channels of NHWC images, read as [rows, channels] with
// rows = N·H·W (PyTorch's BatchNorm2d): the per-element and per-channel math of the CUDA
// kernels, and the order in which they add up each channel's sums.
//
// Training forward, per channel over its `rows` values:
//   mean = Σx / rows; var = Σ(x - mean)² / rows (biased; from one read of x by merging
//   moments, with --sync-batchnorm every replica's moments merged in rank order: a mean far
//   from zero costs the variance few of its digits);
//   invstd = 1 / sqrt(var + eps);
//   y = gamma·((x - mean)·invstd) + beta;
//   running_mean = (1 - m)·running_mean + m·mean;
//   running_var = (1 - m)·running_var + m·Σ(x - mean)² / (rows - 1) (unbiased).
// Backward, from the mean and invstd of that forward, with x̂ = (x - mean)·invstd:
//   dbeta = Σdy; dgamma = Σdy·x̂; dx = (gamma·invstd)·((dy - dbeta/rows) - (x̂·dgamma)/rows).
// A ReLU after the batch norm may run inside it (LayerBinding::activation and relu_backward):
// forward writes the ReLU's output, and backward's dy is the ReLU's backward of the gradient it
// is given (the ReLU layer's functions, so the same bits as the two layers unfused).
//
// Every sum (and the moments) is added in bias_math.h's order (the rows split into parts, each part
// among kBiasTileRows row-threads, then thread sums and part sums added in order), fixed by the
// shape alone, so the result is the same run after run; norm_forward_on_host and
// norm_backward_on_host follow that order on the host, so that CPU tests check the GPU's
// algorithm to the bit, and the *_on_host functions of the synchronized stages
// (--sync-batchnorm) follow those stages.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "models/kernel_math/activation_math.h"
#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

// Two sums a kernel thread carries along one channel (the backward pass needs both of its
// sums from one read of x and dy; the forward passes leave `b` at zero).
struct SumPair {
  float a = 0.0f;
  float b = 0.0f;
};

// How many of a channel's terms strided_pair_sum computes before it adds them. nvcc unrolls a
// plain fp32 sum and keeps 10 or more loads in flight on its own (sm_90 SASS), but the backward
// term reading a 16-bit x and a fused ReLU's output it unrolled twice: six loads in flight
// where a batch of 8 terms gives 24.
constexpr int kTermsAhead = 8;

// term(first, c) + term(first + step, c) + ... over the rows below `end`, in that order.
template <class Term>
SS_HOST_DEVICE inline SumPair strided_pair_sum(const Term& term, int64_t c, int64_t first,
                                               int64_t end, int64_t step) {
  SumPair sum;
  int64_t r = first;
  for (; r + (kTermsAhead - 1) * step < end; r += kTermsAhead * step) {
    SumPair t[kTermsAhead];
    SS_UNROLL
    for (int u = 0; u < kTermsAhead; ++u) t[u] = term(r + u * step, c);
    SS_UNROLL
    for (int u = 0; u < kTermsAhead; ++u) {
      sum.a += t[u].a;
      sum.b += t[u].b;
    }
  }
  for (; r < end; r += step) {
    const SumPair t = term(r, c);
    sum.a += t.a;
    sum.b += t.b;
  }
  return sum;
}

SS_HOST_DEVICE inline float norm_xhat(float x, float mean, float invstd) {
  return (x - mean) * invstd;
}

// Backward's dy at element i: the gradient it is given, or with a fused ReLU (relu_y its output,
// else without values) that gradient through the ReLU's backward.
template <class Y>
SS_HOST_DEVICE inline float norm_output_gradient(const float* dy, const Y& relu_y, int64_t i) {
  return has_values(relu_y) ? relu_gradient(relu_y[i], dy[i]) : dy[i];
}

// Forward's output from y = norm_forward_element(...): y, or with a fused ReLU its output.
SS_HOST_DEVICE inline float norm_fused_output(float y, bool relu) {
  return relu ? activation_forward(Activation::kRelu, y) : y;
}

// The terms of backward's reductions. `x` and `dy` are [rows, channels], x (and a fused ReLU's
// output) read through `X`: fp32 memory (const float*), or the model's saved 16-bit copy
// (HalfValues), the values a restore of it would give.
template <class X>
struct BackwardTermOf {  // Σdy and Σdy·x̂
  X x;
  const float* dy;
  const float* mean;
  const float* invstd;
  int64_t channels;
  X relu_y = {};  // a fused ReLU's output (norm_output_gradient)
  SS_HOST_DEVICE SumPair operator()(int64_t r, int64_t c) const {
    const int64_t i = r * channels + c;
    const float g = norm_output_gradient(dy, relu_y, i);
    return {g, g * norm_xhat(x[i], mean[c], invstd[c])};
  }
};

using BackwardTerm = BackwardTermOf<const float*>;

SS_HOST_DEVICE inline float norm_mean(float sum, int64_t rows) {
  return sum / static_cast<float>(rows);
}

SS_HOST_DEVICE inline float norm_invstd(float var, float eps) {
  return 1.0f / sqrtf(var + eps);
}

// A channel's statistics from Σ(x - mean)² over `rows` >= 2 values.
struct NormVariance {
  float biased;    // normalizes this batch
  float unbiased;  // moves the running variance
  float invstd;
};
SS_HOST_DEVICE inline NormVariance norm_variance(float squared_deviations, int64_t rows,
                                                 float eps) {
  const float biased = squared_deviations / static_cast<float>(rows);
  return {biased, squared_deviations / static_cast<float>(rows - 1), norm_invstd(biased, eps)};
}

// (1 - momentum)·running + momentum·batch, PyTorch's update of either running statistic.
SS_HOST_DEVICE inline float norm_running_update(float running, float batch, float momentum) {
  return (1.0f - momentum) * running + momentum * batch;
}

SS_HOST_DEVICE inline float norm_forward_element(float x, float mean, float invstd, float gamma,
                                                 float beta) {
  return gamma * norm_xhat(x, mean, invstd) + beta;
}

// dx = (gamma·invstd)·((dy - dbeta/rows) - (x - mean)·(invstd·dgamma/rows)): each channel's
// four factors computed once, so that an element costs a load of 16 bytes and five operations
// (no division: on a GPU an element's two divisions and five loads of per-channel values had
// the backward's element-wise kernel at 150 to 168 registers a thread, a block an SM).
struct alignas(16) NormBackwardCoefficients {
  float mean;
  float scale;     // gamma·invstd
  float mean_dy;   // dbeta/rows
  float x_weight;  // invstd·dgamma/rows: what x − mean takes away
};
SS_HOST_DEVICE inline NormBackwardCoefficients norm_backward_coefficients(float mean, float invstd,
                                                                          float gamma, float dbeta,
                                                                          float dgamma,
                                                                          int64_t rows) {
  const float count = static_cast<float>(rows);
  return {mean, gamma * invstd, dbeta / count, invstd * (dgamma / count)};
}
SS_HOST_DEVICE inline float norm_backward_element(float dy, float x,
                                                  const NormBackwardCoefficients& k) {
  return k.scale * ((dy - k.mean_dy) - (x - k.mean) * k.x_weight);
}

// ---- the training forward's statistics in one read of x
//
// Each channel's count, mean and M2 = Σ(x - mean)², built up by Chan, Golub and LeVeque's
// pairwise update, so that the forward reads x once for its statistics where Σx and then
// Σ(x - mean)² read it twice. A mean κ standard deviations from zero costs the variance about
// log2 κ bits (the rounding of the means the merges subtract), where Σx² - (Σx)²/n would lose
// twice as many; two passes lose almost none, and for a batch norm's inputs (κ up to 100 or
// so) the difference stays near 1e-6. A row-thread takes its rows kTermsAhead at a time (the loads
// in flight together), merges each such batch's own mean and M2 into its running ones, and the
// threads' and then the parts' moments are merged in bias_math.h's order.
struct Moments {
  int64_t count = 0;
  float mean = 0.0f;
  float m2 = 0.0f;
};

// The moments of a's values and then b's.
SS_HOST_DEVICE inline Moments merge_moments(const Moments& a, const Moments& b) {
  if (b.count == 0) return a;
  if (a.count == 0) return b;
  const int64_t count = a.count + b.count;
  const float delta = b.mean - a.mean;
  const float b_share = static_cast<float>(b.count) / static_cast<float>(count);
  return {count, a.mean + delta * b_share,
          a.m2 + b.m2 + delta * delta * (static_cast<float>(a.count) * b_share)};
}

// The moments of v[0, count), count <= kTermsAhead (constant indices: no local memory on GPUs).
SS_HOST_DEVICE inline Moments batch_moments(const float (&v)[kTermsAhead], int count) {
  float sum = 0.0f;
  SS_UNROLL
  for (int u = 0; u < kTermsAhead; ++u) {
    if (u < count) sum += v[u];
  }
  // A full batch's division by a power of two is the multiplication's bits; a GPU divides slowly.
  const float mean =
      count == kTermsAhead ? sum * (1.0f / kTermsAhead) : sum / static_cast<float>(count);
  float m2 = 0.0f;
  SS_UNROLL
  for (int u = 0; u < kTermsAhead; ++u) {
    if (u < count) m2 += (v[u] - mean) * (v[u] - mean);
  }
  return {count, mean, m2};
}

// The moments of x[r·channels + c] over the rows first, first + step, ... below `end`; x read
// through X (BackwardTermOf's).
template <class X>
SS_HOST_DEVICE inline Moments strided_moments(const X& x, int64_t channels, int64_t c,
                                              int64_t first, int64_t end, int64_t step) {
  Moments m;
  for (int64_t r = first; r < end; r += kTermsAhead * step) {
    float v[kTermsAhead];
    int count = 0;
    SS_UNROLL
    for (int u = 0; u < kTermsAhead; ++u) {
      const int64_t row = r + u * step;
      v[u] = row < end ? static_cast<float>(x[row * channels + c]) : 0.0f;
      count += row < end ? 1 : 0;
    }
    m = merge_moments(m, batch_moments(v, count));
  }
  return m;
}

// A channel's moments from its parts' means and M2s (part_mean[p·stride], part_m2[p·stride]),
// merged in part order, each part as many values as its rows.
SS_HOST_DEVICE inline Moments merge_part_moments(const BiasGradPlan& plan, int64_t rows,
                                                 const float* part_mean, const float* part_m2,
                                                 int64_t stride) {
  Moments m;
  for (int64_t p = 0; p < plan.parts; ++p) {
    const IndexRange part = bias_grad_part_rows(plan, rows, p);
    m = merge_moments(m, {part.end - part.begin, part_mean[p * stride], part_m2[p * stride]});
  }
  return m;
}

// ---- the GPU's reduction order and passes on the host (for tests)

// Σ term over the rows of channel c, in the order of the CUDA reduction kernel: per part, the
// kBiasTileRows strided thread sums added in thread order; then the part sums in part order.
template <class Term>
SumPair norm_channel_sum_on_host(const Term& term, int64_t rows, int64_t c) {
  const BiasGradPlan plan = bias_grad_plan(rows);
  SumPair total;
  for (int64_t p = 0; p < plan.parts; ++p) {
    const IndexRange part = bias_grad_part_rows(plan, rows, p);
    SumPair part_sum;
    for (int64_t t = 0; t < kBiasTileRows; ++t) {
      const SumPair s = strided_pair_sum(term, c, part.begin + t, part.end, kBiasTileRows);
      part_sum.a += s.a;
      part_sum.b += s.b;
    }
    total.a += part_sum.a;
    total.b += part_sum.b;
  }
  return total;
}

// A channel's moments in the order of the CUDA kernels: per part, the kBiasTileRows row-threads'
// strided moments merged in thread order; then the parts' in part order.
template <class X>
Moments norm_channel_moments_on_host(const X& x, int64_t rows, int64_t channels, int64_t c) {
  const BiasGradPlan plan = bias_grad_plan(rows);
  std::vector<float> part_mean, part_m2;
  for (int64_t p = 0; p < plan.parts; ++p) {
    const IndexRange part = bias_grad_part_rows(plan, rows, p);
    Moments m;
    for (int64_t t = 0; t < kBiasTileRows; ++t)
      m = merge_moments(m,
                        strided_moments(x, channels, c, part.begin + t, part.end, kBiasTileRows));
    part_mean.push_back(m.mean);
    part_m2.push_back(m.m2);
  }
  return merge_part_moments(plan, rows, part_mean.data(), part_m2.data(), 1);
}

// The end of the training forward, from each channel's Σ(x - mean)² squares(c) over `samples`
// rows (this batch's, or every replica's): saves invstd, updates the running statistics and
// num_batches_tracked, and writes y (with `relu`, the fused ReLU's output) over this batch's
// `rows` rows.
template <class Squares, class X>
void norm_finish_forward_on_host(const Squares& squares, X x, int64_t rows, int64_t channels,
                                 int64_t samples, const float* gamma, const float* beta, float eps,
                                 float momentum, float* y, float* running_mean, float* running_var,
                                 float* num_batches_tracked, const float* mean, float* invstd,
                                 bool relu = false) {
  for (int64_t c = 0; c < channels; ++c) {
    const NormVariance v = norm_variance(squares(c), samples, eps);
    invstd[c] = v.invstd;
    running_mean[c] = norm_running_update(running_mean[c], mean[c], momentum);
    running_var[c] = norm_running_update(running_var[c], v.unbiased, momentum);
  }
  *num_batches_tracked += 1.0f;
  for (int64_t i = 0; i < rows * channels; ++i) {
    const int64_t c = i % channels;
    y[i] =
        norm_fused_output(norm_forward_element(x[i], mean[c], invstd[c], gamma[c], beta[c]), relu);
  }
}

// The training forward on the host, as the CUDA kernels compute it: y, the updated running
// statistics and num_batches_tracked, and the saved mean and invstd (each [channels]); with
// `relu`, y is the fused ReLU's output. x read through X (BackwardTermOf's). REQUIRES: rows >= 2.
template <class X>
void norm_forward_on_host(X x, int64_t rows, int64_t channels, const float* gamma,
                          const float* beta, float eps, float momentum, float* y,
                          float* running_mean, float* running_var, float* num_batches_tracked,
                          float* mean, float* invstd, bool relu = false) {
  std::vector<float> m2(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const Moments m = norm_channel_moments_on_host(x, rows, channels, c);
    mean[c] = m.mean;
    m2[static_cast<size_t>(c)] = m.m2;
  }
  const auto squares = [&](int64_t c) { return m2[static_cast<size_t>(c)]; };
  norm_finish_forward_on_host(squares, x, rows, channels, rows, gamma, beta, eps, momentum, y,
                              running_mean, running_var, num_batches_tracked, mean, invstd, relu);
}

// dx over `rows` rows from the sums dbeta = Σdy and dgamma = Σdy·x̂ over `samples` rows (dy
// through the fused ReLU whose output is relu_y, where it has values; both read through X).
template <class X>
void norm_backward_data_on_host(X x, const float* dy, int64_t rows, int64_t channels,
                                int64_t samples, const float* gamma, const float* mean,
                                const float* invstd, const float* dgamma, const float* dbeta,
                                float* dx, std::type_identity_t<X> relu_y = {}) {
  std::vector<NormBackwardCoefficients> k;
  for (int64_t c = 0; c < channels; ++c)
    k.push_back(
        norm_backward_coefficients(mean[c], invstd[c], gamma[c], dbeta[c], dgamma[c], samples));
  for (int64_t i = 0; i < rows * channels; ++i) {
    dx[i] = norm_backward_element(norm_output_gradient(dy, relu_y, i), x[i],
                                  k[static_cast<size_t>(i % channels)]);
  }
}

// The backward on the host, as the CUDA kernels compute it, from the forward's mean and
// invstd (dy through the fused ReLU whose output is relu_y, where it has values; both read
// through X); dx may be null.
template <class X>
void norm_backward_on_host(X x, const float* dy, int64_t rows, int64_t channels, const float* gamma,
                           const float* mean, const float* invstd, float* dgamma, float* dbeta,
                           float* dx, std::type_identity_t<X> relu_y = {}) {
  for (int64_t c = 0; c < channels; ++c) {
    const SumPair s =
        norm_channel_sum_on_host(BackwardTermOf<X>{x, dy, mean, invstd, channels, relu_y}, rows, c);
    dbeta[c] = s.a;
    dgamma[c] = s.b;
  }
  if (dx == nullptr) return;
  norm_backward_data_on_host(x, dy, rows, channels, rows, gamma, mean, invstd, dgamma, dbeta, dx,
                             relu_y);
}

// ---- the synchronized passes (--sync-batchnorm)
//
// Forward has one sync point, as PyTorch's SyncBatchNorm (which all-gathers each replica's
// mean, variance and count): each replica writes its own moments into its slot of the sync
// values and zeros into every other replica's, so that the all-reduce's sum (x + 0 = x, in any
// order) gathers them; then every replica merges the slots in rank order, the same floats in the
// same order, so that all replicas normalize alike, and one replica's statistics are the
// unsynchronized forward's bits. Every replica has the same number of rows (the batch is split
// evenly). Backward sums [Σdy, Σdy·x̂] over the replicas at its one sync point.

// How many floats a sync point of each pass sums: the forward's slots of [mean, M2] per channel
// for each replica, the backward's [Σdy, Σdy·x̂].
SS_HOST_DEVICE inline int64_t norm_forward_sync_floats(int64_t channels, int replicas) {
  return 2 * channels * replicas;
}
SS_HOST_DEVICE inline int64_t norm_backward_sync_floats(int64_t channels) {
  return 2 * channels;
}
// The floats a kernel's sync values hold: the larger pass's.
SS_HOST_DEVICE inline int64_t norm_sync_buffer_floats(int64_t channels, int replicas) {
  const int64_t forward = norm_forward_sync_floats(channels, replicas);
  const int64_t backward = norm_backward_sync_floats(channels);
  return forward > backward ? forward : backward;
}

// Replica q's slot of the gathered moments: its channels' means, then their M2s.
SS_HOST_DEVICE inline float* norm_moments_slot(float* sync, int64_t channels, int q) {
  return sync + 2 * channels * q;
}
SS_HOST_DEVICE inline const float* norm_moments_slot(const float* sync, int64_t channels, int q) {
  return sync + 2 * channels * q;
}

// Channel c's moments into replica `rank`'s slot of `sync`, zeros into the others' slots.
SS_HOST_DEVICE inline void norm_gather_moments(const Moments& m, int rank, int replicas,
                                               int64_t channels, int64_t c, float* sync) {
  for (int q = 0; q < replicas; ++q) {
    float* slot = norm_moments_slot(sync, channels, q);
    slot[c] = q == rank ? m.mean : 0.0f;
    slot[channels + c] = q == rank ? m.m2 : 0.0f;
  }
}

// Channel c's moments over every replica's `rows` rows, from the gathered slots in rank order.
SS_HOST_DEVICE inline Moments norm_merge_gathered_moments(const float* sync, int replicas,
                                                          int64_t rows, int64_t channels,
                                                          int64_t c) {
  Moments m;
  for (int q = 0; q < replicas; ++q) {
    const float* slot = norm_moments_slot(sync, channels, q);
    m = merge_moments(m, {rows, slot[c], slot[channels + c]});
  }
  return m;
}

// ---- the synchronized passes on the host, as the CUDA stages compute them
//
// Each replica has `rows` rows. A stage writes this replica's values into `sync`; before the
// next stage the caller sums `sync` over the replicas, as the all-reduce does.

// Forward stage 0: this replica's moments (the unsynchronized forward's, norm_forward_on_host)
// gathered into its slot of sync (norm_forward_sync_floats).
template <class X>
void norm_forward_stage0_on_host(X x, int64_t rows, int64_t channels, int rank, int replicas,
                                 float* sync) {
  for (int64_t c = 0; c < channels; ++c) {
    norm_gather_moments(norm_channel_moments_on_host(x, rows, channels, c), rank, replicas,
                        channels, c, sync);
  }
}

// Forward stage 1: the statistics of every replica's batch from the gathered moments, then
// norm_finish_forward_on_host. REQUIRES: rows·replicas >= 2.
template <class X>
void norm_forward_stage1_on_host(X x, int64_t rows, int64_t channels, int replicas,
                                 const float* gamma, const float* beta, float eps, float momentum,
                                 const float* sync, float* y, float* running_mean,
                                 float* running_var, float* num_batches_tracked, float* mean,
                                 float* invstd, bool relu = false) {
  std::vector<float> m2(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const Moments m = norm_merge_gathered_moments(sync, replicas, rows, channels, c);
    mean[c] = m.mean;
    m2[static_cast<size_t>(c)] = m.m2;
  }
  const auto squares = [&](int64_t c) { return m2[static_cast<size_t>(c)]; };
  norm_finish_forward_on_host(squares, x, rows, channels, rows * replicas, gamma, beta, eps,
                              momentum, y, running_mean, running_var, num_batches_tracked, mean,
                              invstd, relu);
}

// Backward stage 0: this replica's dgamma and dbeta (norm_backward_on_host's; dy through the
// fused ReLU whose output is relu_y, unless null), and sync = [Σdy, Σdy·x̂] = [dbeta, dgamma]:
// summed over the replicas, Σdy·x̂ is the whole batch's, as every replica normalizes with the
// same invstd.
inline void norm_backward_stage0_on_host(const float* x, const float* dy, int64_t rows,
                                         int64_t channels, const float* mean, const float* invstd,
                                         float* dgamma, float* dbeta, float* sync,
                                         const float* relu_y = nullptr) {
  norm_backward_on_host(x, dy, rows, channels, nullptr, mean, invstd, dgamma, dbeta, nullptr,
                        relu_y);
  for (int64_t c = 0; c < channels; ++c) {
    sync[c] = dbeta[c];
    sync[channels + c] = dgamma[c];
  }
}

// Backward stage 1: dx from the summed [Σdy, Σdy·x̂] (and relu_y as stage 0's).
inline void norm_backward_stage1_on_host(const float* x, const float* dy, int64_t rows,
                                         int64_t channels, int replicas, const float* gamma,
                                         const float* mean, const float* invstd, const float* sync,
                                         float* dx, const float* relu_y = nullptr) {
  norm_backward_data_on_host(x, dy, rows, channels, rows * replicas, gamma, mean, invstd,
                             sync + channels, sync, dx, relu_y);
}

}  // namespace scalescope::kernel_math
