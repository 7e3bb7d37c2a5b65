// Our kernels for batch normalization and the option-A shortcut of CIFAR ResNets. Their math is
// in models/kernel_math/norm_math.h and shortcut_math.h (tested on CPU); the kernels here map
// threads to elements and channels.
//
// Batch normalization's per-channel reductions take two launches each: a block of
// kBiasTileChannels × kBiasTileRows threads reduces one part of the rows of kBiasTileChannels
// channels into scratch, and one thread per channel adds (or merges) the parts in order and
// finishes the channel's statistics. The training forward reads x once for its statistics (its
// moments, norm_math.h) and once to normalize; backward once for its sums and once for dx.
// cuDNN's batch norm would do in fewer launches, but its reduction order is not documented
// (nor promised to be fixed), where ours is norm_math.h's and checked on the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/cuda_ops.h"
#include "models/cuda/launch_shape.cuh"
#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/norm_math.h"
#include "models/kernel_math/shortcut_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

constexpr int kTileC = km::kBiasTileChannels;
constexpr int kTileR = km::kBiasTileRows;

// The scratch (batch_norm_scratch floats): each channel's backward factors first (16 bytes
// each, aligned as the allocation is), then a reduction's part sums or moments, two arrays of
// parts·channels floats.
static_assert(sizeof(km::NormBackwardCoefficients) == 4 * sizeof(float));
__host__ __device__ km::NormBackwardCoefficients* backward_coefficients(const BatchNormTensors& t) {
  return reinterpret_cast<km::NormBackwardCoefficients*>(t.scratch);
}
__host__ __device__ float* partials(const BatchNormTensors& t, int64_t channels) {
  return t.scratch + 4 * channels;
}

// ---- per-channel sums in norm_math.h's order

// Part blockIdx.y of the rows of kTileC channels: partial_a[part, c] (and partial_b unless
// null) = the part's sum of term(r, c).a (.b).
template <class Term>
__global__ void channel_sums_kernel(Term term, int64_t rows, int64_t channels,
                                    km::BiasGradPlan plan, float* partial_a, float* partial_b) {
  __shared__ float sums_a[kTileR][kTileC + 1];  // one padding column avoids bank conflicts
  __shared__ float sums_b[kTileR][kTileC + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileC + threadIdx.x;
  const km::IndexRange part = km::bias_grad_part_rows(plan, rows, blockIdx.y);
  const km::SumPair s =
      c < channels ? km::strided_pair_sum(term, c, part.begin + threadIdx.y, part.end, kTileR)
                   : km::SumPair{};
  sums_a[threadIdx.y][threadIdx.x] = s.a;
  sums_b[threadIdx.y][threadIdx.x] = s.b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  const int64_t at = static_cast<int64_t>(blockIdx.y) * channels + c;
  partial_a[at] = km::ordered_sum(&sums_a[0][threadIdx.x], kTileR, kTileC + 1);
  if (partial_b != nullptr)
    partial_b[at] = km::ordered_sum(&sums_b[0][threadIdx.x], kTileR, kTileC + 1);
}

template <class Term>
void launch_channel_sums(const Term& term, int64_t rows, int64_t channels, float* partial_a,
                         float* partial_b, cudaStream_t stream) {
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  const dim3 grid(static_cast<unsigned>((channels + kTileC - 1) / kTileC),
                  static_cast<unsigned>(plan.parts));
  const dim3 block(kTileC, kTileR);
  channel_sums_kernel<<<grid, block, 0, stream>>>(term, rows, channels, plan, partial_a, partial_b);
  check_launch("channel_sums_kernel");
}

// Part blockIdx.y of the rows of kTileC channels: part_mean[part, c] and part_m2[part, c], the
// part's moments (norm_math.h), its row-threads' merged in thread order.
template <class X>
__global__ void channel_moments_kernel(X x, int64_t rows, int64_t channels, km::BiasGradPlan plan,
                                       float* part_mean, float* part_m2) {
  __shared__ float means[kTileR][kTileC + 1];  // one padding column avoids bank conflicts
  __shared__ float m2s[kTileR][kTileC + 1];
  __shared__ int64_t counts[kTileR][kTileC + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileC + threadIdx.x;
  const km::IndexRange part = km::bias_grad_part_rows(plan, rows, blockIdx.y);
  const km::Moments m =
      c < channels ? km::strided_moments(x, channels, c, part.begin + threadIdx.y, part.end, kTileR)
                   : km::Moments{};
  means[threadIdx.y][threadIdx.x] = m.mean;
  m2s[threadIdx.y][threadIdx.x] = m.m2;
  counts[threadIdx.y][threadIdx.x] = m.count;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  km::Moments total;
  for (int t = 0; t < kTileR; ++t) {
    total = km::merge_moments(total,
                              {counts[t][threadIdx.x], means[t][threadIdx.x], m2s[t][threadIdx.x]});
  }
  const int64_t at = static_cast<int64_t>(blockIdx.y) * channels + c;
  part_mean[at] = total.mean;
  part_m2[at] = total.m2;
}

// ---- per-channel finishing: one thread per channel adds the parts in order.

// Channel c's invstd and running statistics from its mean (t.mean[c]) and Σ(x - mean)² over
// `rows` values.
__device__ void finish_statistics(int64_t c, float squared_deviations, int64_t rows, float eps,
                                  float momentum, const BatchNormTensors& t) {
  const km::NormVariance v = km::norm_variance(squared_deviations, rows, eps);
  t.invstd[c] = v.invstd;
  t.running_mean[c] = km::norm_running_update(t.running_mean[c], t.mean[c], momentum);
  t.running_var[c] = km::norm_running_update(t.running_var[c], v.unbiased, momentum);
  if (c == 0) *t.num_batches_tracked += 1.0f;
}

// The parts' moments (channel_moments_kernel's) merged in part order: the mean, invstd and
// running statistics.
__global__ void moments_finish_kernel(const float* part_mean, const float* part_m2,
                                      km::BiasGradPlan plan, int64_t rows, int64_t channels,
                                      float eps, float momentum, BatchNormTensors t) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    const km::Moments m = km::merge_part_moments(plan, rows, part_mean + c, part_m2 + c, channels);
    t.mean[c] = m.mean;
    finish_statistics(c, m.m2, rows, eps, momentum, t);
  }
}

// The same parts' moments gathered into replica `rank`'s slot of `sync` (norm_math.h): the
// synchronized forward's stage 0.
__global__ void gather_moments_kernel(const float* part_mean, const float* part_m2,
                                      km::BiasGradPlan plan, int64_t rows, int64_t channels,
                                      int rank, int replicas, float* sync) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    const km::Moments m = km::merge_part_moments(plan, rows, part_mean + c, part_m2 + c, channels);
    km::norm_gather_moments(m, rank, replicas, channels, c, sync);
  }
}

// Every replica's gathered moments (all-reduced `sync`) merged in rank order: the mean, invstd
// and running statistics of the batches of `replicas` replicas of `rows` rows each.
__global__ void gathered_moments_finish_kernel(const float* sync, int replicas, int64_t rows,
                                               int64_t channels, float eps, float momentum,
                                               BatchNormTensors t) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    const km::Moments m = km::norm_merge_gathered_moments(sync, replicas, rows, channels, c);
    t.mean[c] = m.mean;
    finish_statistics(c, m.m2, rows * replicas, eps, momentum, t);
  }
}

// dbeta and dgamma (the part sums of Σdy and Σdy·x̂) and then, unless `sync` is null, the same
// values into sync[0, channels) and sync[channels, 2·channels) (the sums the synchronized
// backward all-reduces while the gradients stay this replica's), else dx's factors over this
// batch's `rows` rows.
__global__ void backward_finish_kernel(const float* partial_a, const float* partial_b,
                                       int64_t parts, int64_t rows, int64_t channels, float* dbeta,
                                       float* dgamma, float* sync, BatchNormTensors t) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    dbeta[c] = km::ordered_sum(partial_a + c, parts, channels);
    dgamma[c] = km::ordered_sum(partial_b + c, parts, channels);
    if (sync != nullptr) {
      sync[c] = dbeta[c];
      sync[channels + c] = dgamma[c];
    } else {
      backward_coefficients(t)[c] = km::norm_backward_coefficients(
          t.mean[c], t.invstd[c], t.gamma[c], dbeta[c], dgamma[c], rows);
    }
  }
}

// dx's factors from the sums of every replica's batch (sync: Σdy, then Σdy·x̂) over `samples`
// rows: the synchronized backward's.
__global__ void synchronized_coefficients_kernel(int64_t samples, int64_t channels,
                                                 BatchNormTensors t) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    backward_coefficients(t)[c] = km::norm_backward_coefficients(
        t.mean[c], t.invstd[c], t.gamma[c], t.sync[c], t.sync[channels + c], samples);
  }
}

// ---- element-wise

// y from x with the batch's statistics (training: the mean and invstd it saved) or, with `eval`,
// the running ones (invstd from the running variance per element: a division and a square root
// more per element, and nothing to write per channel, so evaluation leaves the training's saved
// statistics alone). x read through X (norm_math.h's terms), y written through Y (FloatStore, or
// HalfStore into the model's saved 16-bit copy).
template <class Divider, class X, class Y>
__global__ void normalize_kernel(X x, Y y, int64_t count, Divider by_channels, bool relu, bool eval,
                                 float eps, BatchNormTensors t) {
  struct In {
    float x, mean, spread, gamma, beta;  // spread: invstd, or the running variance
  };
  const float* mean = eval ? t.running_mean : t.mean;
  const float* spread = eval ? t.running_var : t.invstd;
  for_each_element(
      count,
      [&](int64_t i) {
        const int64_t c = by_channels.remainder(i);
        return In{x[i], mean[c], spread[c], t.gamma[c], t.beta[c]};
      },
      [&](int64_t i, const In& in) {
        const float invstd = eval ? km::norm_invstd(in.spread, eps) : in.spread;
        y(i, km::norm_fused_output(
                 km::norm_forward_element(in.x, in.mean, invstd, in.gamma, in.beta), relu));
      });
}

template <class X, class Y>
void normalize(X x, Y y, int64_t count, int64_t channels, bool relu, bool eval, float eps,
               const BatchNormTensors& t, cudaStream_t stream) {
  with_divider(count, channels, [&](auto by_channels) {
    normalize_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(x, y, count, by_channels,
                                                                        relu, eval, eps, t);
  });
  check_launch("normalize_kernel");
}

// dx over `rows` rows from each channel's factors (backward_coefficients), dy through the fused
// ReLU whose output is relu_y where it has values; both read through X, dx written through DX
// (FloatStore, or HalfStore into the 16-bit gradient a convolution reads).
template <class Divider, class X, class DX>
__global__ void __launch_bounds__(kThreads, 4)
    norm_backward_data_kernel(X x, const float* dy, X relu_y, DX dx, int64_t count,
                              Divider by_channels, BatchNormTensors t) {
  struct In {
    float dy, relu_y, x;
    km::NormBackwardCoefficients k;
  };
  const bool relu = km::has_values(relu_y);
  const km::NormBackwardCoefficients* k = backward_coefficients(t);
  for_each_element(
      count,
      [&](int64_t i) {
        return In{dy[i], relu ? relu_y[i] : 0.0f, x[i], k[by_channels.remainder(i)]};
      },
      [&](int64_t i, const In& in) {
        const float g = km::norm_output_gradient(&in.dy, relu ? &in.relu_y : nullptr, 0);
        dx(i, km::norm_backward_element(g, in.x, in.k));
      });
}

template <class X, class DX>
void backward_data(X x, const float* dy, X relu_y, DX dx, int64_t rows, int64_t channels,
                   const BatchNormTensors& t, cudaStream_t stream) {
  const int64_t count = rows * channels;
  with_divider(count, channels, [&](auto by_channels) {
    norm_backward_data_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(
        x, dy, relu_y, dx, count, by_channels, t);
  });
  check_launch("norm_backward_data_kernel");
}

// The moments of this batch's parts (channel_moments_kernel) into the scratch; returns where.
struct PartMoments {
  km::BiasGradPlan plan;
  const float* mean;
  const float* m2;
};
template <class X>
PartMoments part_moments(X x, int64_t rows, int64_t channels, const BatchNormTensors& t,
                         cudaStream_t stream) {
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  float* part_mean = partials(t, channels);
  float* part_m2 = part_mean + plan.parts * channels;
  const dim3 grid(static_cast<unsigned>((channels + kTileC - 1) / kTileC),
                  static_cast<unsigned>(plan.parts));
  channel_moments_kernel<<<grid, dim3(kTileC, kTileR), 0, stream>>>(x, rows, channels, plan,
                                                                    part_mean, part_m2);
  check_launch("channel_moments_kernel");
  return {plan, part_mean, part_m2};
}

// The unsynchronized training passes, x (and relu_y) read through X, y written through Y: the
// statistics from one read of x (its moments), then y.
template <class X, class Y>
void forward_train(X x, Y y, int64_t rows, int64_t channels, float eps, float momentum, bool relu,
                   const BatchNormTensors& t, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const PartMoments m = part_moments(x, rows, channels, t, stream);
  moments_finish_kernel<<<grid_for(channels), kThreads, 0, stream>>>(m.mean, m.m2, m.plan, rows,
                                                                     channels, eps, momentum, t);
  check_launch("moments_finish_kernel");
  normalize(x, y, rows * channels, channels, relu, false, eps, t, stream);
}

// dx written through DX where `has_dx` (null: the first layer's).
template <class X, class DX>
void backward(X x, const float* dy, X relu_y, DX dx, bool has_dx, float* dgamma, float* dbeta,
              int64_t rows, int64_t channels, const BatchNormTensors& t, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const int64_t parts = km::bias_grad_plan(rows).parts;
  float* partial_a = partials(t, channels);
  float* partial_b = partial_a + parts * channels;
  launch_channel_sums(km::BackwardTermOf<X>{x, dy, t.mean, t.invstd, channels, relu_y}, rows,
                      channels, partial_a, partial_b, stream);
  backward_finish_kernel<<<grid_for(channels), kThreads, 0, stream>>>(
      partial_a, partial_b, parts, rows, channels, dbeta, dgamma, nullptr, t);
  check_launch("backward_finish_kernel");
  if (!has_dx) return;
  backward_data(x, dy, relu_y, dx, rows, channels, t, stream);
}

// Calls launch(dividers) with the kind of division the larger of the shortcut's tensors
// allows (with_divider).
template <class Launch>
void with_shortcut_dividers(const km::ShortcutShape& s, int64_t batch, const Launch& launch) {
  const int64_t larger =
      std::max(batch * s.in_h * s.in_w * s.in_c, batch * s.out_h * s.out_w * s.out_c);
  with_divider(larger, s.stride, [&](auto by) { launch(km::shortcut_dividers<decltype(by)>(s)); });
}

}  // namespace

int64_t batch_norm_scratch(int64_t rows, int64_t channels) {
  return (4 + 2 * km::bias_grad_plan(rows).parts) * channels;
}

void batch_norm_forward_train(const float* x, float* y, int64_t rows, int64_t channels, float eps,
                              float momentum, bool relu, const BatchNormTensors& t,
                              cudaStream_t stream) {
  forward_train(x, FloatStore{y}, rows, channels, eps, momentum, relu, t, stream);
}

void batch_norm_forward_train(const km::HalfValues& x, float* y, uint16_t* y_saved, int64_t rows,
                              int64_t channels, float eps, float momentum, bool relu,
                              const BatchNormTensors& t, cudaStream_t stream) {
  km::with_half_format(x.format, [&](auto format) {
    const km::HalfValuesIn<format()> from{x.at};
    if (y != nullptr) {
      forward_train(from, FloatStore{y}, rows, channels, eps, momentum, relu, t, stream);
    } else {
      forward_train(from, HalfStoreIn<format()>{y_saved}, rows, channels, eps, momentum, relu, t,
                    stream);
    }
  });
}

void batch_norm_forward_eval(const float* x, float* y, int64_t rows, int64_t channels, float eps,
                             bool relu, const BatchNormTensors& t, cudaStream_t stream) {
  const int64_t count = rows * channels;
  if (count == 0) return;
  normalize(x, FloatStore{y}, count, channels, relu, true, eps, t, stream);
}

void batch_norm_backward(const float* x, const float* dy, const float* relu_y, float* dx,
                         float* dgamma, float* dbeta, int64_t rows, int64_t channels,
                         const BatchNormTensors& t, cudaStream_t stream) {
  backward(x, dy, relu_y, FloatStore{dx}, dx != nullptr, dgamma, dbeta, rows, channels, t, stream);
}

void batch_norm_backward(const km::HalfValues& x, const float* dy, const km::HalfValues& relu_y,
                         float* dx, uint16_t* dx_half, float* dgamma, float* dbeta, int64_t rows,
                         int64_t channels, const BatchNormTensors& t, cudaStream_t stream) {
  // x and the fused ReLU's output are saved copies of one precision.
  km::with_half_format(x.format, [&](auto format) {
    const km::HalfValuesIn<format()> from{x.at}, relu_from{relu_y.at};
    if (dx_half != nullptr) {
      backward(from, dy, relu_from, HalfStoreIn<format()>{dx_half}, true, dgamma, dbeta, rows,
               channels, t, stream);
    } else {
      backward(from, dy, relu_from, FloatStore{dx}, dx != nullptr, dgamma, dbeta, rows, channels, t,
               stream);
    }
  });
}

// The synchronized passes reuse the kernels above. Forward's stages are the unsynchronized
// forward's with its moments gathered and merged in between: one replica's are its bits.
void batch_norm_forward_stage(int stage, int rank, int replicas, const float* x, float* y,
                              int64_t rows, int64_t channels, float eps, float momentum, bool relu,
                              const BatchNormTensors& t, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const unsigned grid = grid_for(channels);
  if (stage == 0) {
    const PartMoments m = part_moments(x, rows, channels, t, stream);
    gather_moments_kernel<<<grid, kThreads, 0, stream>>>(m.mean, m.m2, m.plan, rows, channels, rank,
                                                         replicas, t.sync);
    check_launch("gather_moments_kernel");
    return;
  }
  gathered_moments_finish_kernel<<<grid, kThreads, 0, stream>>>(t.sync, replicas, rows, channels,
                                                                eps, momentum, t);
  check_launch("gathered_moments_finish_kernel");
  normalize(x, FloatStore{y}, rows * channels, channels, relu, false, eps, t, stream);
}

void batch_norm_backward_stage(int stage, int replicas, const float* x, const float* dy,
                               const float* relu_y, float* dx, float* dgamma, float* dbeta,
                               int64_t rows, int64_t channels, const BatchNormTensors& t,
                               cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  if (stage == 0) {
    const int64_t parts = km::bias_grad_plan(rows).parts;
    float* partial_a = partials(t, channels);
    float* partial_b = partial_a + parts * channels;
    launch_channel_sums(km::BackwardTerm{x, dy, t.mean, t.invstd, channels, relu_y}, rows, channels,
                        partial_a, partial_b, stream);
    backward_finish_kernel<<<grid_for(channels), kThreads, 0, stream>>>(
        partial_a, partial_b, parts, rows, channels, dbeta, dgamma, t.sync, t);
    check_launch("backward_finish_kernel");
    return;
  }
  if (dx == nullptr) return;
  // Σdy·x̂ over every replica is what dgamma is over one: invstd is the same on every replica.
  synchronized_coefficients_kernel<<<grid_for(channels), kThreads, 0, stream>>>(rows * replicas,
                                                                                channels, t);
  check_launch("synchronized_coefficients_kernel");
  backward_data(x, dy, relu_y, FloatStore{dx}, rows, channels, t, stream);
}

void pad_shortcut_forward(const kernel_math::ShortcutShape& s, int64_t batch, const float* in,
                          float* out, cudaStream_t stream) {
  const int64_t count = batch * s.out_h * s.out_w * s.out_c;
  if (count == 0) return;
  with_shortcut_dividers(s, batch, [&](auto d) {
    using Divider = decltype(d.stride);
    using From =
        IndexFrom<km::ShortcutShape, km::StridedDividers<Divider>, km::shortcut_source<Divider>>;
    gather_or_zero(From{s, d}, count, in, out, stream);
  });
  check_launch("gather_or_zero_kernel (pad shortcut forward)");
}

void pad_shortcut_backward(const kernel_math::ShortcutShape& s, int64_t batch, const float* dout,
                           float* din, cudaStream_t stream) {
  const int64_t count = batch * s.in_h * s.in_w * s.in_c;
  if (count == 0) return;
  with_shortcut_dividers(s, batch, [&](auto d) {
    using Divider = decltype(d.stride);
    using From =
        IndexFrom<km::ShortcutShape, km::StridedDividers<Divider>, km::shortcut_reader<Divider>>;
    gather_or_zero(From{s, d}, count, dout, din, stream);
  });
  check_launch("gather_or_zero_kernel (pad shortcut backward)");
}

}  // namespace scalescope::cuda_ops
