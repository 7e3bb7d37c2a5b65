// GPT-2's causal self-attention on CPU, fused: no T × T matrix is ever kept. The products run
// on one thread each, on q, k and v where they lie in the input rows [N, S, 3D] (no per-head
// copies), in AVX-512 registers (tile_products.h: only the part the causal mask leaves) or
// as oneDNN's sgemm where the CPU has no AVX-512. Forward takes a tile of kTile queries at a time
// against every key it sees: one product for their scores (kTile × up to S floats, per thread),
// each row's softmax (kernel_math/attention_math.h's tile functions), one product into the output.
// What forward keeps for backward is one float per query row and head, the row's log-sum-exp:
// memory linear in the sequence, where keeping the probabilities would be quadratic. Backward
// recomputes the probabilities from it a key tile at a time, against every query that sees
// the tile, in the same kind of block. Keys after every query of a tile are never multiplied:
// causal attention does about half the products of full attention. (Flash attention takes the
// keys a tile at a time too, with an online softmax, which the tile functions support; on a
// CPU, whose caches hold a block of kTile × S scores, products as long as the sequence run
// faster.)
//
// Forward's tasks are (sample, head, query tile); backward's (sample, head), as the gradients
// of q accumulate over key tiles. Every task is one thread's, in a fixed order, so the
// results do not depend on the thread count.
#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/env.h"
#include "models/cpu/cpu_attention.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/tile_products.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/attention_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

using cpu_attention::kTile;
using cpu_attention::lane_width;
using cpu_attention::out_offset;
using cpu_attention::qkv_offset;
using cpu_attention::tile_count;
using cpu_attention::tile_size;
using cpu_attention::TileMask;

// A row-major matrix where it lies: `ld` floats from one row to the next.
struct Rows {
  const float* at;
  int64_t ld;
};
struct MutableRows {
  float* at;
  int64_t ld;
};

// One of the attention's products: C[m, n] = op(A)·op(B) + beta·C (beta 0 or 1), op(A) [m, k],
// op(B) [k, n], a transposed operand stored untransposed; `mask` and `diag` say which part the
// causal mask leaves (tile_products.h), which the tiles skip and sgemm computes anyway.
struct Product {
  bool transpose_a, transpose_b;
  int64_t m, n, k;
  Rows a, b;
  float beta;
  MutableRows c;
  cpu_attention::TileMask mask;
  int64_t diag;
};

// Runs `p` on the caller's thread: in AVX-512 registers where `tiles` (B read transposed is
// first laid out by rows in `pack`, k × round_up(n, 16) floats), else as oneDNN's sgemm, which
// inside our parallel loops starts no threads of its own. Never throws (it runs inside OpenMP
// loops): a failed sgemm is counted.
void run(const Product& p, bool tiles, float* pack, std::atomic<int>& failures) {
  if (!tiles) {
    const dnnl_status_t status =
        dnnl_sgemm(p.transpose_a ? 'T' : 'N', p.transpose_b ? 'T' : 'N', p.m, p.n, p.k, 1.0f,
                   p.a.at, p.a.ld, p.b.at, p.b.ld, p.beta, p.c.at, p.c.ld);
    if (status != dnnl_success) failures.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Rows b = p.b;
  if (p.transpose_b) {
    b = {pack, cpu_attention::pack_ld(p.n)};
    cpu_attention::transpose_rows(p.b.at, p.b.ld, p.n, p.k, pack, b.ld);
  }
  const cpu_attention::TileOperand a = p.transpose_a
                                           ? cpu_attention::TileOperand{p.a.at, 1, p.a.ld}
                                           : cpu_attention::TileOperand{p.a.at, p.a.ld, 1};
  cpu_attention::tile_product(
      {p.m, p.n, p.k, a, b.at, b.ld, p.c.at, p.c.ld, p.beta != 0.0f, p.mask, p.diag});
}

class AttentionKernel final : public LayerKernel, private cpu_attention::AttentionBase {
 public:
  AttentionKernel(const CausalSelfAttentionSpec& spec, const LayerBinding& b, Device& device)
      : AttentionBase(spec, b, device), tiles_(tiles_run()) {
    reserve_scratch(static_cast<size_t>(scratch_bytes()));
  }

  void forward(const float* in, float* out, Stream&) override {
    const int64_t tiles = tile_count(shape_);
    const int64_t tasks = shape_.batch * shape_.heads * tiles;
    std::atomic<int> failures{0};
    // Later query tiles see more keys: dynamic, so that the threads end together.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
    for (int64_t task = 0; task < tasks; ++task) {
      forward_tile(in, out, task / tiles, task % tiles, failures);
    }
    check(failures, "forward", "sgemm");
  }

  // Reads the forward's input and output (backward_reads: both) and the log-sum-exp that
  // forward kept.
  // REQUIRES (beyond LayerKernel's): no forward_eval since the last forward.
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream&) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    for_each_head("backward", "sgemm", [&](int64_t head_task, std::atomic<int>& failures) {
      backward_head(in, out, dout, din, head_task, failures);
    });
  }

  // oneDNN's gemm is deterministic for a fixed thread count (one, here), and so are the tiles
  // and our loops.
  std::vector<KernelChoice> choices() const override {
    const std::string name = fmt::format("fused causal attention, blocks of {} rows: {} + softmax",
                                         kTile, tiles_ ? "AVX-512 tile products" : "dnnl_sgemm");
    return {{"forward", name, "fp32", "NSC", true, scratch_bytes()},
            {"backward-data", name, "fp32", "NSC", true, scratch_bytes()}};
  }

 private:
  int64_t scratch_bytes() const {
    return threads_ * scratch_floats() * static_cast<int64_t>(sizeof(float));
  }
  // Forward's rows of scores: every key a query tile sees, padded to the tile functions' lanes.
  int64_t score_ld() const {
    return lane_width(std::max(shape_.seq, kTile));
  }
  int64_t block_floats() const {
    return kTile * score_ld();
  }
  // Per thread: two blocks of kTile rows of score_ld() floats (forward: the query tile's
  // scores in the first; backward: a key tile's probabilities and their gradients against
  // every query, kTile wide), then one float per query row (forward: the rows' softmax
  // maxima and sums; backward: the deltas).
  int64_t row_floats() const {
    return std::max(shape_.seq, 2 * kTile);
  }
  // ... then, for the tiles, the keys or values of a product read transposed, laid out by rows.
  int64_t scratch_floats() const {
    const int64_t packed = shape_.head_dim * cpu_attention::pack_ld(std::max(shape_.seq, kTile));
    return 2 * block_floats() + row_floats() + (tiles_ ? packed : 0);
  }
  float* thread_scratch(int thread) const {
    return reinterpret_cast<float*>(scratch()) + thread * scratch_floats();
  }
  void product(const Product& p, std::atomic<int>& failures) const {
    run(p, tiles_, thread_scratch(omp_get_thread_num()) + 2 * block_floats() + row_floats(),
        failures);
  }

  static bool tiles_run() {
    return !cpu_attention::sgemm_products_asked() && cpu_attention::tile_products_supported();
  }

  bool tiles_;

  void forward_tile(const float* in, float* out, int64_t head_task, int64_t tile,
                    std::atomic<int>& failures) const;
  void backward_head(const float* in, const float* out, const float* dout, float* din,
                     int64_t head_task, std::atomic<int>& failures) const;
  void backward_key_tile(const float* in, const float* dout, float* din, int64_t head_task,
                         int64_t key_tile, const float* deltas, std::atomic<int>& failures) const;
};

// Query tile `tile` of (sample, head) `head_task` against every key up to its last query in
// one block: the scores in one product, each row's softmax, the output in a second product,
// divided by the rows' sums.
void AttentionKernel::forward_tile(const float* in, float* out, int64_t head_task, int64_t tile,
                                   std::atomic<int>& failures) const {
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim, ld_in = 3 * d;
  const int64_t q0 = tile * kTile, rows = tile_size(shape_, tile), keys = q0 + rows;
  const float* q = in + qkv_offset(shape_, head_task) + q0 * ld_in;
  const float* k = in + qkv_offset(shape_, head_task) + d;
  const float* v = in + qkv_offset(shape_, head_task) + 2 * d;
  float* o = out + out_offset(shape_, head_task) + q0 * d;
  float* scores = thread_scratch(omp_get_thread_num());
  auto* softmax = reinterpret_cast<km::OnlineSoftmaxRow*>(scores + 2 * block_floats());
  static_assert(sizeof(km::OnlineSoftmaxRow) == 2 * sizeof(float));
  product({false,
           true,
           rows,
           keys,
           hd,
           {q, ld_in},
           {k, ld_in},
           0.0f,
           {scores, score_ld()},
           TileMask::kColsUpToRow,
           q0},
          failures);
  cpu_attention::softmax_rows({q0, rows, 0, keys, score_ld()}, scale_, scores, softmax);
  product({false,
           false,
           rows,
           hd,
           keys,
           {scores, score_ld()},
           {v, ld_in},
           0.0f,
           {o, d},
           TileMask::kTermsUpToRow,
           q0},
          failures);
  float* lse = log_sum_exp(head_task) + q0;
  for (int64_t r = 0; r < rows; ++r) {
    const float inverse = 1.0f / softmax[r].sum;
    for (int64_t c = 0; c < hd; ++c) o[r * d + c] *= inverse;
    lse[r] = softmax[r].log_sum_exp();
  }
}

// Every gradient of (sample, head) `head_task`: dq's rows accumulate over the key tiles, so one
// task takes them all.
void AttentionKernel::backward_head(const float* in, const float* out, const float* dout,
                                    float* din, int64_t head_task,
                                    std::atomic<int>& failures) const {
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim;
  // delta_i = Σ_j p_ij·dp_ij = Σ_c dout_ic·out_ic: the softmax backward's row sum, from the
  // output instead of the probabilities no one kept.
  float* deltas = thread_scratch(omp_get_thread_num()) + 2 * block_floats();
  const float* o = out + out_offset(shape_, head_task);
  const float* dout_rows = dout + out_offset(shape_, head_task);
  cpu_attention::row_deltas(dout_rows, o, d, hd, shape_.seq, deltas);
  for (int64_t key_tile = 0; key_tile < tile_count(shape_); ++key_tile) {
    backward_key_tile(in, dout, din, head_task, key_tile, deltas, failures);
  }
}

// Key tile `key_tile` against every query that sees it (from the tile's first key on), as one
// block of rows: their scores and dout's products with the tile's values in two tall
// products, then the tile's rows of dk and dv and its share of dq in three.
void AttentionKernel::backward_key_tile(const float* in, const float* dout, float* din,
                                        int64_t head_task, int64_t key_tile, const float* deltas,
                                        std::atomic<int>& failures) const {
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim, ld_in = 3 * d;
  const int64_t k0 = key_tile * kTile, cols = tile_size(shape_, key_tile), rows = shape_.seq - k0;
  const float* q = in + qkv_offset(shape_, head_task) + k0 * ld_in;  // the queries from k0 on
  const float* k = in + qkv_offset(shape_, head_task) + d + k0 * ld_in;
  const float* v = in + qkv_offset(shape_, head_task) + 2 * d + k0 * ld_in;
  float* dq = din + qkv_offset(shape_, head_task) + k0 * ld_in;
  float* dk = dq + d;
  float* dv = dq + 2 * d;
  const float* dout_rows = dout + out_offset(shape_, head_task) + k0 * d;
  float* probs = thread_scratch(omp_get_thread_num());
  float* grads = probs + block_floats();
  product({false,
           true,
           rows,
           cols,
           hd,
           {q, ld_in},
           {k, ld_in},
           0.0f,
           {probs, kTile},
           TileMask::kColsUpToRow,
           0},
          failures);
  product({false,
           true,
           rows,
           cols,
           hd,
           {dout_rows, d},
           {v, ld_in},
           0.0f,
           {grads, kTile},
           TileMask::kColsUpToRow,
           0},
          failures);
  cpu_attention::backward_tile_rows({k0, rows, k0, cols, kTile}, scale_, probs, grads,
                                    log_sum_exp(head_task), deltas);
  // dv = Pᵀ·dout, dk = dSᵀ·q, dq += dS·k: the first key tile is seen by every query, so its
  // product writes all of dq (beta 0: nothing to clear first) and the later ones add to it.
  product({true,
           false,
           cols,
           hd,
           rows,
           {probs, kTile},
           {dout_rows, d},
           0.0f,
           {dv, ld_in},
           TileMask::kTermsFromRow,
           0},
          failures);
  product({true,
           false,
           cols,
           hd,
           rows,
           {grads, kTile},
           {q, ld_in},
           0.0f,
           {dk, ld_in},
           TileMask::kTermsFromRow,
           0},
          failures);
  product({false,
           false,
           rows,
           hd,
           cols,
           {grads, kTile},
           {k, ld_in},
           key_tile == 0 ? 0.0f : 1.0f,
           {dq, ld_in},
           TileMask::kTermsUpToRow,
           0},
          failures);
}

}  // namespace

namespace cpu_attention {

bool sgemm_products_asked() {
  return choice_from_environment("SCALESCOPE_ATTENTION_PRODUCTS", {"tiles", "sgemm"}) == 1;
}

// The rows' loops are vector clones (vector_clones.h): 16 floats at a time where the baseline
// has 4. Their bits are the baseline's (no contraction of a multiply and an add, a fixed order
// of the lanes' sums: KernelMathAttention.CpuKernelsSoftmaxIsTheTileMathBitForBit holds the
// clone the CPU runs to the baseline's).
SCALESCOPE_VECTOR_CLONES void softmax_rows(const TileRows& t, float scale, float* scores,
                                           km::OnlineSoftmaxRow* softmax) {
  for (int64_t r = 0; r < t.rows; ++r) {
    softmax[r] = km::OnlineSoftmaxRow{};
    km::online_softmax_tile(scores + r * t.ld, t.cols, lane_width(t.cols), t.k0, t.q0 + r, scale,
                            softmax[r]);
  }
}

// Eight rows at a time, a lane each: a row's sum is one chain of dependent adds (hd of them,
// in column order, as attention_row_delta adds them), which alone left the core waiting on
// each add's latency (8% of gpt micro's backward).
SCALESCOPE_VECTOR_CLONES void row_deltas(const float* dout, const float* out, int64_t ld,
                                         int64_t hd, int64_t rows, float* deltas) {
  constexpr int64_t kRows = 8;
  int64_t i0 = 0;
  for (; i0 + kRows <= rows; i0 += kRows) {
    float sum[kRows] = {};
    for (int64_t c = 0; c < hd; ++c) {
#pragma omp simd
      for (int64_t r = 0; r < kRows; ++r)
        sum[r] += dout[(i0 + r) * ld + c] * out[(i0 + r) * ld + c];
    }
    for (int64_t r = 0; r < kRows; ++r) deltas[i0 + r] = sum[r];
  }
  for (; i0 < rows; ++i0) deltas[i0] = km::attention_row_delta(dout + i0 * ld, out + i0 * ld, hd);
}

SCALESCOPE_VECTOR_CLONES void backward_tile_rows(const TileRows& t, float scale, float* probs,
                                                 float* grads, const float* lse,
                                                 const float* deltas) {
  for (int64_t r = 0; r < t.rows; ++r) {
    km::attention_tile_backward_row(probs + r * t.ld, grads + r * t.ld, t.cols, lane_width(t.cols),
                                    t.k0, t.q0 + r, scale, lse[t.q0 + r], deltas[t.q0 + r]);
  }
}

}  // namespace cpu_attention

std::unique_ptr<LayerKernel> make_cpu_attention(const CausalSelfAttentionSpec& spec,
                                                const LayerBinding& binding, Device& device) {
  if (precision() == Precision::kBf16) {
    return cpu_attention::make_bf16_attention(spec, binding, device);
  }
  return std::make_unique<AttentionKernel>(spec, binding, device);
}

}  // namespace scalescope
