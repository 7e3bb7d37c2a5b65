// The tile operations the attention's fused kernels share (flash_attention.cu, forward;
// flash_attention_backward.cu): head tiles from global into shared memory, and a warp's
// products of 16-row tiles on tensor cores (the WMMA API: 16 × 16 × 16 tiles of 16-bit operands,
// fp32 accumulators). Every operand lives in shared memory, row-major with a padded leading
// dimension (kernel_math/flash_attention_math.h's layouts); the host test replays each of these
// as the API defines it (tests/models/kernel_math/host_wmma.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "models/cuda/cuda_ops.h"
#include "models/kernel_math/flash_attention_math.h"

namespace scalescope::cuda_ops::flash {

namespace km = kernel_math;
namespace wmma = nvcuda::wmma;
using Tiling = km::FlashTiling;

inline constexpr int kTile = 16;  // the tensor cores' m, n and k

template <km::HalfFormat F>
struct WmmaType {
  using type = __nv_bfloat16;
};
template <>
struct WmmaType<km::HalfFormat::kFp16> {
  using type = __half;
};

using Accumulator = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

// Rows [first, first + kQueryRows) of head `head` of a head-major buffer [N·H, S, HD] into a
// [rows][LD] tile, 16 bytes a thread a step, by the block's threads; rows past the sequence are
// zeros (their probabilities are 0, and 0 times a stale value could be NaN).
template <int HD, int LD>
__device__ void load_head_tile(const uint16_t* heads, int64_t head, int64_t first, int64_t seq,
                               uint16_t* tile) {
  constexpr int kVectorsPerRow = HD / 8;
  const uint16_t* base = heads + head * seq * HD;
  for (int i = threadIdx.x; i < Tiling::kQueryRows * kVectorsPerRow; i += Tiling::kThreads) {
    const int row = i / kVectorsPerRow;
    const int col = (i % kVectorsPerRow) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (first + row < seq) v = *reinterpret_cast<const uint4*>(base + (first + row) * HD + col);
    *reinterpret_cast<uint4*>(tile + row * LD + col) = v;
  }
}

// c[16][kKeyTile] (fp32, leading dimension ldc) = a[16][K] · b[kKeyTile][K]ᵀ: a's 16 rows
// against each of b's 64 rows (the scores q·kᵀ, or the probabilities' gradient dO·vᵀ).
template <class T, int K>
__device__ void warp_product_nt(const T* a, int lda, const T* b, int ldb, float* c, int ldc) {
  wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, wmma::row_major> fa[K / kTile];
#pragma unroll
  for (int kk = 0; kk < K / kTile; ++kk) wmma::load_matrix_sync(fa[kk], a + kk * kTile, lda);
#pragma unroll
  for (int n = 0; n < Tiling::kKeyTile / kTile; ++n) {
    Accumulator acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < K / kTile; ++kk) {
      // bᵀ as a column-major [K][64] operand: element (d, j) at b[j·ldb + d].
      wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fb, b + n * kTile * ldb + kk * kTile, ldb);
      wmma::mma_sync(acc, fa[kk], fb, acc);
    }
    wmma::store_matrix_sync(c + n * kTile, acc, ldc, wmma::mem_row_major);
  }
}

// acc[n] (16 × 16 columns [16n, 16n + 16) of a [16][HD] result) += a[16][kKeyTile] ·
// b[kKeyTile][HD]: probabilities or score gradients times a head tile.
template <class T, int HD>
__device__ void warp_accumulate_nn(const T* a, int lda, const T* b, int ldb,
                                   Accumulator (&acc)[HD / kTile]) {
#pragma unroll
  for (int kk = 0; kk < Tiling::kKeyTile / kTile; ++kk) {
    wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + kk * kTile, lda);
#pragma unroll
    for (int n = 0; n < HD / kTile; ++n) {
      wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, b + kk * kTile * ldb + n * kTile, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// Calls launch(hd) with hd an integral constant of head_dim (one flash_supports takes;
// 128 for any other).
template <class Launch>
void with_head_dim(int64_t head_dim, const Launch& launch) {
  switch (head_dim) {
    case 16:
      return launch(std::integral_constant<int, 16>{});
    case 32:
      return launch(std::integral_constant<int, 32>{});
    case 64:
      return launch(std::integral_constant<int, 64>{});
    default:
      return launch(std::integral_constant<int, 128>{});
  }
}

// Sets `kernel`'s dynamic shared memory to `bytes` (past 48 KiB a kernel must ask for it) and
// launches it with kThreads threads a block over tiles × heads blocks, checking both.
template <class Kernel, class... Args>
void launch_tiles(Kernel kernel, const char* name, int64_t tiles, unsigned heads, int64_t bytes,
                  cudaStream_t stream, const Args&... args) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(bytes));
  check_launch(name);
  const dim3 grid(static_cast<unsigned>(tiles), heads);
  kernel<<<grid, Tiling::kThreads, bytes, stream>>>(args...);
  check_launch(name);
}

}  // namespace scalescope::cuda_ops::flash
