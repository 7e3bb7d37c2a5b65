// The attention's fused backward under bf16 and fp16 (attention_ops.h): flash attention's
// backward with the products on tensor cores (flash_tiles.cuh), its math and shared memory layout
// kernel_math/flash_attention_math.h's, replayed by a host test. Three launches: each row's delta
// from the rows of dout and of the layer's output; one block per key tile for dK and dV, over the
// query tiles that see it; one block per query tile for dQ, over the key tiles it sees. Each
// recomputes its tiles' scores, and p and ds from them and the kept stats, in shared memory.
#include <cuda_runtime.h>

#include <cstdint>

#include "models/cuda/attention_ops.h"
#include "models/cuda/cuda_ops.h"
#include "models/cuda/flash_tiles.cuh"
#include "models/cuda/launch_shape.cuh"
#include "models/kernel_math/flash_attention_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;
using namespace flash;

struct BackwardArgs {
  km::AttentionShape shape;
  const uint16_t* q;  // head-major [N·H, S, hd], 16-bit
  const uint16_t* k;
  const uint16_t* v;
  const uint16_t* dout;
  const km::SoftmaxRowStats* stats;  // [N·H, S]
  const float* delta;                // [N·H, S]
  float scale;
  float* dq;  // head-major [N·H, S, hd], fp32
  float* dk;
  float* dv;
};

// fp32 rows read as row_delta_kernel's Out.
struct PlainRows {
  const float* at;
  __device__ float operator[](int64_t i) const { return at[i]; }
};

// delta of each score row (n, h, position) from the rows [N, S, D] of dout and of the output,
// read through Out (PlainRows or HalfValuesIn), their head's hd columns (head_major_to_rows).
template <class Out>
__global__ void row_delta_kernel(km::AttentionShape s, km::HeadDividers<km::PlainDivider> d,
                                 const float* dout, Out out, float* delta) {
  for (int64_t r = first_index(); r < s.score_rows(); r += grid_stride()) {
    const int64_t at = km::head_major_to_rows(s, d, r * s.head_dim, s.model_dim(), 0);
    delta[r] = km::attention_row_delta(dout + at, Out{out.at + at}, s.head_dim);
  }
}

// Each row's delta into t.delta, from the output in fp32 or its saved copy in format F.
template <km::HalfFormat F>
void row_deltas(const FlashBackwardTensors& t, cudaStream_t stream) {
  const unsigned grid = grid_for(t.shape.score_rows());
  const auto d = km::head_dividers<km::PlainDivider>(t.shape);
  if (t.out_rows != nullptr) {
    row_delta_kernel<<<grid, kThreads, 0, stream>>>(t.shape, d, t.dout_rows, PlainRows{t.out_rows},
                                                    t.delta);
  } else {
    row_delta_kernel<<<grid, kThreads, 0, stream>>>(t.shape, d, t.dout_rows,
                                                    km::HalfValuesIn<F>{t.out_rows_half}, t.delta);
  }
  check_launch("row_delta_kernel");
}

// The warp's [16][HD] accumulators into rows [first, first + 16) of head `head` of a head-major
// fp32 buffer, through its staging in shared memory: rows past the sequence are left out.
template <class T, int HD>
__device__ void store_rows(Accumulator (&acc)[HD / kTile], float* staging, float* heads,
                           int64_t head, int64_t first, int64_t seq) {
  constexpr int kLd = km::FlashBackwardLayout<HD>::kLdOut;
#pragma unroll
  for (int n = 0; n < HD / kTile; ++n) {
    wmma::store_matrix_sync(staging + n * kTile, acc[n], kLd, wmma::mem_row_major);
  }
  __syncwarp();
  for (int i = threadIdx.x % 32; i < Tiling::kWarpRows * HD; i += 32) {
    const int row = i / HD;
    const int c = i % HD;
    if (first + row < seq) heads[(head * seq + first + row) * HD + c] = staging[row * kLd + c];
  }
  __syncwarp();
}

template <class T, int HD>
__device__ void zero(Accumulator (&acc)[HD / kTile]) {
#pragma unroll
  for (int n = 0; n < HD / kTile; ++n) wmma::fill_fragment(acc[n], 0.0f);
}

// What both kernels' blocks work from: their tile (blockIdx.x) of one sequence and head
// (blockIdx.y), whose head tiles 0 and 1 they load first, 2 and 3 at each step; and a warp's
// view of shared memory.
template <class T, int HD>
struct BackwardBlock {
  using L = km::FlashBackwardLayout<HD>;
  km::FlashBackwardTiles<HD> w;
  int64_t seq;
  int64_t head;
  int64_t first;  // the block's tile's first row

  __device__ const T* tile(int i) const { return reinterpret_cast<const T*>(w.head_tile(i)); }
  __device__ int lane() const { return threadIdx.x % 32; }
  __device__ int row() const { return km::flash_lane_row(lane()); }
  // The position of this lane's row among the block's tile's.
  __device__ int64_t lane_position() const { return first + w.warp * Tiling::kWarpRows + row(); }
  __device__ void load(const uint16_t* heads, int64_t from, int i) const {
    load_head_tile<HD, L::kLdHeads>(heads, head, from, seq, w.head_tile(i));
  }
  // The warp's two products of a step: its rows of tile 0 against tile 2 into its scores, of
  // tile 1 against tile 3 into its dp.
  __device__ void products() const {
    const int64_t rows = w.warp * Tiling::kWarpRows * L::kLdHeads;
    warp_product_nt<T, HD>(tile(0) + rows, L::kLdHeads, tile(2), L::kLdHeads, w.scores(),
                           L::kLdScores);
    warp_product_nt<T, HD>(tile(1) + rows, L::kLdHeads, tile(3), L::kLdHeads, w.grads(),
                           L::kLdScores);
  }
  // p's and ds's copies of this lane's share of its row (flash_backward_share).
  template <km::HalfFormat F, class Column>
  __device__ void take_share(bool with_p, float scale, const Column& column) const {
    const int r = row();
    km::flash_backward_share(w.scores() + r * L::kLdScores, w.grads() + r * L::kLdScores,
                             km::HalfRow{with_p ? w.probs() + r * L::kLdProbs : nullptr, F},
                             km::HalfRow{w.grad_probs() + r * L::kLdProbs, F}, scale,
                             km::flash_lane_share(lane()), column);
  }
  // The warp's rows of a result into a head-major buffer (store_rows).
  __device__ void store(Accumulator (&acc)[HD / kTile], float* heads) const {
    store_rows<T, HD>(acc, w.scores(), heads, head, first + w.warp * Tiling::kWarpRows, seq);
  }
};

template <class T, int HD>
__device__ BackwardBlock<T, HD> backward_block(unsigned char* smem, const km::AttentionShape& s) {
  return {{smem, static_cast<int>(threadIdx.x / 32)},
          s.seq,
          blockIdx.y,
          static_cast<int64_t>(blockIdx.x) * Tiling::kKeyTile};
}

// The block's key tile: dK and dV over the query tiles from its own (the diagonal) to the last.
// Head tiles: 0 its keys, 1 its values, 2 a query tile's q, 3 its dO.
template <km::HalfFormat F, int HD>
__global__ void __launch_bounds__(km::FlashTiling::kThreads) key_gradients_kernel(BackwardArgs a) {
  using T = typename WmmaType<F>::type;
  using L = km::FlashBackwardLayout<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardBlock<T, HD> b = backward_block<T, HD>(smem, a.shape);
  b.load(a.k, b.first, 0);
  b.load(a.v, b.first, 1);
  Accumulator dk[HD / kTile], dv[HD / kTile];
  zero<T, HD>(dk);
  zero<T, HD>(dv);
  const int64_t key = b.lane_position();
  km::SoftmaxRowStats* column_stats = b.w.column_stats();
  float* column_delta = b.w.column_delta();
  for (int64_t t = km::flash_first_query_tile(blockIdx.x); t < km::flash_query_tiles(b.seq); ++t) {
    const int64_t q0 = t * Tiling::kQueryRows;
    __syncthreads();  // the last query tile read by every warp
    b.load(a.q, q0, 2);
    b.load(a.dout, q0, 3);
    for (int i = threadIdx.x; i < Tiling::kQueryRows; i += Tiling::kThreads) {
      const bool in = q0 + i < b.seq;
      const int64_t at = b.head * b.seq + q0 + i;
      column_stats[i] = in ? a.stats[at] : km::SoftmaxRowStats{0.0f, 1.0f};
      column_delta[i] = in ? a.delta[at] : 0.0f;
    }
    __syncthreads();
    b.products();  // sᵀ: the warp's keys against the tile's queries; dpᵀ = v·dOᵀ
    __syncwarp();
    b.template take_share<F>(true, a.scale, [&](int64_t j) {
      return km::FlashColumn{km::flash_sees(q0 + j, key, b.seq), column_stats[j], column_delta[j]};
    });
    __syncwarp();
    const auto* p = reinterpret_cast<const T*>(b.w.probs());
    const auto* ds = reinterpret_cast<const T*>(b.w.grad_probs());
    warp_accumulate_nn<T, HD>(p, L::kLdProbs, b.tile(3), L::kLdHeads, dv);   // dV += pᵀ·dO
    warp_accumulate_nn<T, HD>(ds, L::kLdProbs, b.tile(2), L::kLdHeads, dk);  // dK += dsᵀ·q
  }
  b.store(dk, a.dk);
  b.store(dv, a.dv);
}

// The block's query tile: dQ over the key tiles up to its last query. Head tiles: 0 its q, 1 its
// dO, 2 a key tile's keys, 3 its values.
template <km::HalfFormat F, int HD>
__global__ void __launch_bounds__(km::FlashTiling::kThreads)
    query_gradients_kernel(BackwardArgs a) {
  using T = typename WmmaType<F>::type;
  using L = km::FlashBackwardLayout<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardBlock<T, HD> b = backward_block<T, HD>(smem, a.shape);
  b.load(a.q, b.first, 0);
  b.load(a.dout, b.first, 1);
  const int64_t query = b.lane_position();
  const bool in = query < b.seq;
  const int64_t at = b.head * b.seq + query;
  const km::FlashColumn of_row{false, in ? a.stats[at] : km::SoftmaxRowStats{},
                               in ? a.delta[at] : 0.0f};
  Accumulator dq[HD / kTile];
  zero<T, HD>(dq);
  for (int64_t t = 0; t < km::flash_key_tiles(blockIdx.x, b.seq); ++t) {
    const int64_t key0 = t * Tiling::kKeyTile;
    __syncthreads();  // the last key tile read by every warp
    b.load(a.k, key0, 2);
    b.load(a.v, key0, 3);
    __syncthreads();
    b.products();  // s = q·kᵀ, dp = dO·vᵀ
    __syncwarp();
    b.template take_share<F>(false, a.scale, [&](int64_t j) {
      km::FlashColumn c = of_row;
      c.visible = km::flash_sees(query, key0 + j, b.seq);
      return c;
    });
    __syncwarp();
    warp_accumulate_nn<T, HD>(reinterpret_cast<const T*>(b.w.grad_probs()), L::kLdProbs, b.tile(2),
                              L::kLdHeads, dq);  // dQ += ds·k
  }
  b.store(dq, a.dq);
}

template <km::HalfFormat F, int HD>
void launch_backward(const BackwardArgs& a, cudaStream_t stream) {
  const int64_t tiles = km::flash_query_tiles(a.shape.seq);
  const int64_t bytes = km::FlashBackwardLayout<HD>::kBytes;
  const unsigned heads = static_cast<unsigned>(a.shape.batch * a.shape.heads);
  launch_tiles(key_gradients_kernel<F, HD>, "key_gradients_kernel", tiles, heads, bytes, stream, a);
  launch_tiles(query_gradients_kernel<F, HD>, "query_gradients_kernel", tiles, heads, bytes, stream,
               a);
}

}  // namespace

int64_t flash_attention_backward_shared_bytes(int64_t head_dim) {
  int64_t bytes = 0;
  with_head_dim(head_dim, [&](auto hd) { bytes = km::FlashBackwardLayout<hd()>::kBytes; });
  return bytes;
}

void flash_attention_backward(const FlashBackwardTensors& t, km::HalfFormat format, float scale,
                              cudaStream_t stream) {
  const km::AttentionShape& s = t.shape;
  if (s.head_elements() == 0) return;
  km::with_half_format(format, [&](auto f) {
    row_deltas<f()>(t, stream);
    const BackwardArgs a{s, t.q, t.k, t.v, t.dout, t.stats, t.delta, scale, t.dq, t.dk, t.dv};
    with_head_dim(s.head_dim, [&](auto hd) { launch_backward<f(), hd()>(a, stream); });
  });
}

}  // namespace scalescope::cuda_ops
