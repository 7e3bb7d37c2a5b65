// The attention's fused forward under bf16 and fp16 (attention_ops.h): flash attention's scheme
// with the products on tensor cores (the WMMA API, 16 × 16 × 16 tiles of 16-bit operands with
// fp32 accumulators). Tiling, shared memory layout and per-row math are
// kernel_math/flash_attention_math.h's, which a host test replays; what is here maps them to
// threads: the block loads its query tile and each key tile's k and v into shared memory, each
// warp multiplies its 16 queries by the key tile into its scores, two lanes a row turn them into
// 16-bit probabilities and rescale the row's output, and the warp adds the probabilities times
// v into its output rows. The scores never reach global memory; the output (head-major fp32) and
// each row's SoftmaxRowStats do.
#include <cuda_runtime.h>

#include <cstdint>

#include "models/cuda/attention_ops.h"
#include "models/cuda/cuda_ops.h"
#include "models/cuda/flash_tiles.cuh"
#include "models/kernel_math/flash_attention_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;
using namespace flash;

struct FlashArgs {
  km::AttentionShape shape;
  const uint16_t* q;  // head-major [N·H, S, hd], 16-bit
  const uint16_t* k;
  const uint16_t* v;
  float scale;
  float* out;                  // head-major [N·H, S, hd], fp32
  km::SoftmaxRowStats* stats;  // [N·H, S]
};

// The warp's output rows [16][HD] (fp32 in shared memory, rescaled by take_tile) += its
// probabilities times the value tile.
template <class T, int HD>
__device__ void accumulate_output(const T* probs, const T* values, float* out) {
  using L = km::FlashLayout<HD>;
  Accumulator acc[HD / kTile];
#pragma unroll
  for (int n = 0; n < HD / kTile; ++n) {
    wmma::load_matrix_sync(acc[n], out + n * kTile, L::kLdOut, wmma::mem_row_major);
  }
  warp_accumulate_nn<T, HD>(probs, L::kLdProbs, values, L::kLdHeads, acc);
#pragma unroll
  for (int n = 0; n < HD / kTile; ++n) {
    wmma::store_matrix_sync(out + n * kTile, acc[n], L::kLdOut, wmma::mem_row_major);
  }
}

// One lane's part of a tile for its row: the row's new maximum and sum from the pair of lanes
// sharing it, the probabilities into the warp's 16-bit tile, the row's output rescaled.
template <km::HalfFormat F, int HD>
__device__ void take_tile(const float* scores, uint16_t* probs, float* out, int64_t visible,
                          float scale, km::SoftmaxRowStats& row) {
  const km::RowShare share = km::flash_lane_share(threadIdx.x % 32);
  const float share_max = km::flash_share_max(scores, visible, scale, share);
  const float new_max =
      fmaxf(row.max, fmaxf(share_max, __shfl_xor_sync(0xffffffffu, share_max, 1)));
  const float share_sum =
      km::flash_share_probabilities(scores, km::HalfRow{probs, F}, visible, scale, new_max, share);
  const float tile_sum = share_sum + __shfl_xor_sync(0xffffffffu, share_sum, 1);
  const float rescale = km::flash_take_tile(row, new_max, tile_sum);
  for (int64_t c = share.first; c < HD; c += share.step) out[c] *= rescale;
}

template <km::HalfFormat F, int HD>
__global__ void __launch_bounds__(km::FlashTiling::kThreads) flash_forward_kernel(FlashArgs a) {
  using T = typename WmmaType<F>::type;
  using L = km::FlashLayout<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t seq = a.shape.seq;
  const int64_t head = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * Tiling::kQueryRows;
  const km::FlashForwardTiles<HD> warp_tiles{smem, warp};
  float* scores = warp_tiles.scores();
  uint16_t* probs = warp_tiles.probs();
  float* out = warp_tiles.out();
  const int row = km::flash_lane_row(lane);
  const int64_t query = q0 + warp * Tiling::kWarpRows + row;
  for (int c = lane % 2; c < HD; c += 2) out[row * L::kLdOut + c] = 0.0f;
  load_head_tile<HD, L::kLdHeads>(a.q, head, q0, seq, warp_tiles.queries());
  km::SoftmaxRowStats state = km::flash_row_start();
  const int64_t tiles = km::flash_key_tiles(blockIdx.x, seq);
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t key0 = t * Tiling::kKeyTile;
    __syncthreads();  // the last tile's k and v read by every warp
    load_head_tile<HD, L::kLdHeads>(a.k, head, key0, seq, warp_tiles.keys());
    load_head_tile<HD, L::kLdHeads>(a.v, head, key0, seq, warp_tiles.values());
    __syncthreads();
    warp_product_nt<T, HD>(reinterpret_cast<const T*>(warp_tiles.warp_queries()), L::kLdHeads,
                           reinterpret_cast<const T*>(warp_tiles.keys()), L::kLdHeads, scores,
                           L::kLdScores);
    __syncwarp();
    take_tile<F, HD>(scores + row * L::kLdScores, probs + row * L::kLdProbs, out + row * L::kLdOut,
                     km::flash_visible(query, key0, seq), a.scale, state);
    __syncwarp();
    accumulate_output<T, HD>(reinterpret_cast<const T*>(probs),
                             reinterpret_cast<const T*>(warp_tiles.values()), out);
    __syncwarp();
  }
  if (query >= seq) return;
  float* dst = a.out + (head * seq + query) * HD;
  for (int c = lane % 2; c < HD; c += 2) dst[c] = out[row * L::kLdOut + c] / state.sum;
  if (lane % 2 == 0) a.stats[head * seq + query] = state;
}

}  // namespace

int64_t flash_attention_shared_bytes(int64_t head_dim) {
  int64_t bytes = 0;
  with_head_dim(head_dim, [&](auto hd) { bytes = km::FlashLayout<hd()>::kBytes; });
  return bytes;
}

void flash_attention_forward(const km::AttentionShape& s, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, km::HalfFormat format, float scale, float* out,
                             km::SoftmaxRowStats* stats, cudaStream_t stream) {
  if (s.head_elements() == 0) return;
  const FlashArgs a{s, q, k, v, scale, out, stats};
  const auto heads = static_cast<unsigned>(s.batch * s.heads);
  km::with_half_format(format, [&](auto f) {
    with_head_dim(s.head_dim, [&](auto hd) {
      launch_tiles(flash_forward_kernel<f(), hd()>, "flash_forward_kernel",
                   km::flash_query_tiles(s.seq), heads, km::FlashLayout<hd()>::kBytes, stream, a);
    });
  });
}

}  // namespace scalescope::cuda_ops
