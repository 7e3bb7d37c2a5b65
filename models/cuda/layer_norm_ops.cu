// Layer normalization's kernels: a warp per row for the forward and the input gradient (each
// row's sums in kernel_math/layer_norm_math.h's lane order, combined by a butterfly of
// shuffles), and bias_grad's partition of the rows for the parameter gradients (per-part sums
// of each column, then a finishing kernel adding the parts in order): no atomics anywhere.
#include <cuda_runtime.h>

#include <cstdint>

#include "models/cuda/cuda_ops.h"
#include "models/cuda/launch_shape.cuh"
#include "models/cuda/layer_norm_ops.h"
#include "models/kernel_math/layer_norm_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

constexpr int kLanes = km::kLayerNormLanes;
static_assert(kLanes == kWarp, "a warp per row");

template <class Term>
__device__ float row_sum(const Term& term, int64_t d, int lane) {
  return WarpReduce{}.sum(km::layer_norm_lane_sum(term, lane, d));
}

// Writes its rows through `y`: fp32, or under bf16 and fp16 straight into the model's saved
// 16-bit copy (launch_shape.cuh's stores).
template <class Rows>
__global__ void layer_norm_forward_kernel(const float* x, Rows y, int64_t rows, int64_t d,
                                          float eps, LayerNormTensors t) {
  const int lane = cuda_ops::lane();
  for (int64_t r = first_warp(); r < rows; r += warp_stride()) {
    const float* xr = x + r * d;
    const float mean = km::layer_norm_mean(row_sum(km::RowValueTerm{xr}, d, lane), d);
    const float rstd =
        km::layer_norm_rstd(row_sum(km::RowSquaredDeviationTerm{xr, mean}, d, lane), d, eps);
    struct In {
      float x, weight, bias;
    };
    // Reads before writes (element_loop.h's reason: y may be x).
    km::for_each_element(
        lane, kLanes, d,
        [&](int64_t i) {
          return In{xr[i], t.weight[i], t.bias[i]};
        },
        [&](int64_t i, const In& in) {
          y(r * d + i, km::layer_norm_forward_element(in.x, mean, rstd, in.weight, in.bias));
        });
    if (lane == 0) {
      t.mean[r] = mean;
      t.rstd[r] = rstd;
    }
  }
}

template <class Rows>
void launch_layer_norm_forward(const float* x, Rows y, int64_t rows, int64_t d, float eps,
                               const LayerNormTensors& t, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  layer_norm_forward_kernel<<<grid_for(rows * kLanes), kThreads, 0, stream>>>(x, y, rows, d, eps,
                                                                              t);
  check_launch("layer_norm_forward_kernel");
}

__global__ void layer_norm_backward_data_kernel(const float* x, const float* dy, float* dx,
                                                int64_t rows, int64_t d, LayerNormTensors t,
                                                bool add_dx) {
  const int lane = cuda_ops::lane();
  for (int64_t r = first_warp(); r < rows; r += warp_stride()) {
    const float* xr = x + r * d;
    const float* dyr = dy + r * d;
    const float mean = t.mean[r];
    const float rstd = t.rstd[r];
    const float mean_g = km::layer_norm_mean(row_sum(km::RowGradTerm{dyr, t.weight}, d, lane), d);
    const float mean_gxhat = km::layer_norm_mean(
        row_sum(km::RowGradXhatTerm{xr, dyr, t.weight, mean, rstd}, d, lane), d);
    struct In {
      float dy, weight, x;
    };
    km::for_each_element(  // reads before writes, as forward's (dx may be dy)
        lane, kLanes, d,
        [&](int64_t i) {
          return In{dyr[i], t.weight[i], xr[i]};
        },
        [&](int64_t i, const In& in) {
          km::layer_norm_store_dx(dx + r * d + i,
                                  km::layer_norm_backward_element(
                                      in.dy * in.weight, km::layer_norm_xhat(in.x, mean, rstd),
                                      mean_g, mean_gxhat, rstd),
                                  add_dx);
        });
  }
}

// A block of kBiasTileChannels × kBiasTileRows threads owns kBiasTileChannels columns of one
// part (blockIdx.y) of the rows, as bias_grad_kernel; it writes the part's sums at
// [part·d + c] of out_dw and out_db.
constexpr int kTileC = km::kBiasTileChannels;
constexpr int kTileR = km::kBiasTileRows;

__global__ void layer_norm_param_grad_kernel(km::ColumnGradTerm<> term, int64_t rows,
                                             km::BiasGradPlan plan, float* out_dw, float* out_db) {
  __shared__ float sums_db[kTileR][kTileC + 1];  // one padding column avoids bank conflicts
  __shared__ float sums_dw[kTileR][kTileC + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileC + threadIdx.x;
  const km::IndexRange part = km::bias_grad_part_rows(plan, rows, blockIdx.y);
  km::SumPair s;
  if (c < term.d) s = km::strided_pair_sum(term, c, part.begin + threadIdx.y, part.end, kTileR);
  sums_db[threadIdx.y][threadIdx.x] = s.a;
  sums_dw[threadIdx.y][threadIdx.x] = s.b;
  __syncthreads();
  if (threadIdx.y == 0 && c < term.d) {
    const int64_t at = static_cast<int64_t>(blockIdx.y) * term.d + c;
    out_db[at] = km::ordered_sum(&sums_db[0][threadIdx.x], kTileR, kTileC + 1);
    out_dw[at] = km::ordered_sum(&sums_dw[0][threadIdx.x], kTileR, kTileC + 1);
  }
}

__global__ void layer_norm_param_grad_finish_kernel(const float* parts_dw, const float* parts_db,
                                                    int64_t parts, int64_t d, float* dw,
                                                    float* db) {
  for (int64_t c = first_index(); c < d; c += grid_stride()) {
    km::layer_norm_finish_sums(parts_dw, parts_db, parts, d, c, dw, db);
  }
}

}  // namespace

int64_t layer_norm_scratch(int64_t rows, int64_t d) {
  const int64_t parts = km::bias_grad_plan(rows).parts;
  return parts > 1 ? 2 * parts * d : 0;
}

void layer_norm_forward(const float* x, float* y, int64_t rows, int64_t d, float eps,
                        const LayerNormTensors& t, cudaStream_t stream) {
  launch_layer_norm_forward(x, FloatStore{y}, rows, d, eps, t, stream);
}

void layer_norm_forward_half(const float* x, uint16_t* y, kernel_math::HalfFormat format,
                             int64_t rows, int64_t d, float eps, const LayerNormTensors& t,
                             cudaStream_t stream) {
  launch_layer_norm_forward(x, HalfStore{y, format}, rows, d, eps, t, stream);
}

void layer_norm_backward(const float* x, const float* dy, float* dx, float* dw, float* db,
                         int64_t rows, int64_t d, const LayerNormTensors& t, bool add_dx,
                         cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  float* parts_dw = plan.parts > 1 ? t.scratch : dw;
  float* parts_db = plan.parts > 1 ? t.scratch + plan.parts * d : db;
  const dim3 grid(static_cast<unsigned>((d + kTileC - 1) / kTileC),
                  static_cast<unsigned>(plan.parts));
  const dim3 block(kTileC, kTileR);
  layer_norm_param_grad_kernel<<<grid, block, 0, stream>>>(
      km::ColumnGradTerm{x, dy, t.mean, t.rstd, d}, rows, plan, parts_dw, parts_db);
  check_launch("layer_norm_param_grad_kernel");
  if (plan.parts > 1) {
    layer_norm_param_grad_finish_kernel<<<grid_for(d), kThreads, 0, stream>>>(
        parts_dw, parts_db, plan.parts, d, dw, db);
    check_launch("layer_norm_param_grad_finish_kernel");
  }
  if (dx == nullptr) return;  // first layer: nobody needs the input's gradient
  layer_norm_backward_data_kernel<<<grid_for(rows * kLanes), kThreads, 0, stream>>>(x, dy, dx, rows,
                                                                                    d, t, add_dx);
  check_launch("layer_norm_backward_data_kernel");
}

}  // namespace scalescope::cuda_ops
