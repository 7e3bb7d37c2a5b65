// What the CPU's fused causal attention kernels share: the fp32 kernel (cpu_attention.cpp),
// whose products are sgemm calls on q, k and v where they lie, and the bf16 kernel
// (cpu_attention_bf16.cpp), whose products are oneDNN bf16 matmuls on packed copies. Both
// take the queries a tile of kTile rows at a time forward and the keys a tile at a time
// backward, and run the same rows' loops between their products.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "core/check.h"
#include "core/device.h"
#include "models/kernel_math/attention_math.h"
#include "models/kernels.h"
#include "models/layer_spec.h"

namespace scalescope::cpu_attention {

// Keys and queries per tile: sgemm's 64 × 64 products of head size 64 ran at 76-82 GFLOP/s on
// one core here, 32 × 32 at 52-59; a tile of scores (16 KiB) stays in L2 with its gradient.
inline constexpr int64_t kTile = 64;

static_assert(kTile % kernel_math::kTileLanes == 0);

// A tile row's columns as the tile functions take them: `cols` keys, then zeros up to a
// multiple of their lanes.
inline int64_t lane_width(int64_t cols) {
  return (cols + kernel_math::kTileLanes - 1) / kernel_math::kTileLanes * kernel_math::kTileLanes;
}

// Tiles of the sequence: how many, and the rows of tile `tile` (the last may be short).
inline int64_t tile_count(const kernel_math::AttentionShape& s) {
  return (s.seq + kTile - 1) / kTile;
}
inline int64_t tile_size(const kernel_math::AttentionShape& s, int64_t tile) {
  return std::min(kTile, s.seq - tile * kTile);
}

// Where the tensors of (sample, head) `head_task` start: q, k, v in the input rows [N, S, 3D]
// (k and v D and 2·D further), the output and its gradient in [N, S, D].
inline int64_t qkv_offset(const kernel_math::AttentionShape& s, int64_t head_task) {
  const int64_t n = head_task / s.heads, h = head_task % s.heads;
  return n * s.seq * 3 * s.model_dim() + h * s.head_dim;
}
inline int64_t out_offset(const kernel_math::AttentionShape& s, int64_t head_task) {
  const int64_t n = head_task / s.heads, h = head_task % s.heads;
  return n * s.seq * s.model_dim() + h * s.head_dim;
}

// Rows [q0, q0 + rows) of a query tile against keys [k0, k0 + cols), their scores in rows `ld`
// floats apart (at least lane_width(cols)).
struct TileRows {
  int64_t q0, rows, k0, cols, ld;
};

// Forward: each row's softmax over the keys it sees: the exponentials in place and each row's
// maximum and sum in `softmax`.
void softmax_rows(const TileRows& t, float scale, float* scores,
                  kernel_math::OnlineSoftmaxRow* softmax);

// Backward: each row's probabilities and the gradient of its scores, in place, from the rows'
// log-sum-exp and delta (indexed by query position).
void backward_tile_rows(const TileRows& t, float scale, float* probs, float* grads,
                        const float* lse, const float* deltas);

// deltas[i] = attention_row_delta of row i of `dout` and `out` (rows `ld` floats apart, hd
// values each), for `rows` rows: several rows at once, each summed in its own column order.
void row_deltas(const float* dout, const float* out, int64_t ld, int64_t hd, int64_t rows,
                float* deltas);

// What both kernels hold: the layer's shape, the softmax's scale, the threads of their loops,
// and what forward keeps for backward, one log-sum-exp per query row and head ([N·H, S]).
class AttentionBase {
 protected:
  AttentionBase(const CausalSelfAttentionSpec& spec, const LayerBinding& b, Device& device)
      : shape_{b.in[0], b.in[1], spec.heads, b.in[2] / (3 * spec.heads)},
        scale_(kernel_math::attention_scale(shape_.head_dim)),
        threads_(std::max(1, device.threads())),
        device_(device),
        pool_(b.transient),
        log_sum_exp_(device, static_cast<size_t>(shape_.score_rows()) * sizeof(float)) {}

  // The threads' scratch, which lasts one pass: in the model's transient pool where the
  // binding has one (its layers run one at a time, so they share it), else owned.
  // REQUIRES: reserve_scratch called once, in the constructor; scratch() only in a pass.
  void reserve_scratch(size_t bytes) {
    if (pool_) {
      pool_->reserve(bytes);
    } else {
      owned_scratch_ = DeviceBuffer(device_, bytes);
    }
  }
  char* scratch() const {
    return static_cast<char*>(pool_ ? pool_->data() : owned_scratch_.data());
  }

  float* log_sum_exp(int64_t head_task) const {
    return static_cast<float*>(log_sum_exp_.data()) + head_task * shape_.seq;
  }
  // The loops' products run inside OpenMP loops, which must not throw: they count their
  // failures, and the pass throws after the loop.
  void check(const std::atomic<int>& failures, const char* pass, const char* products) const {
    SS_CHECK(failures.load() == 0, "attention {}: {} oneDNN {} calls failed", pass, failures.load(),
             products);
  }

  // Runs task(head_task, failures) for every (sample, head), each one thread's, then checks.
  template <class Task>
  void for_each_head(const char* pass, const char* products, Task&& task) const {
    const int64_t tasks = shape_.batch * shape_.heads;
    std::atomic<int> failures{0};
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
    for (int64_t head_task = 0; head_task < tasks; ++head_task) task(head_task, failures);
    check(failures, pass, products);
  }

  kernel_math::AttentionShape shape_;
  float scale_;
  int threads_;

 private:
  Device& device_;
  std::shared_ptr<TransientPool> pool_;
  DeviceBuffer owned_scratch_;
  DeviceBuffer log_sum_exp_;
};

// SCALESCOPE_ATTENTION_PRODUCTS=sgemm: the fp32 kernel's products as oneDNN's sgemm (the tiles'
// before, for comparing) rather than tiles in AVX-512 registers (=tiles, the default, where the
// CPU has AVX-512). Throws Error naming the variable for any other value.
bool sgemm_products_asked();

// The kernel computing in bf16 (cpu_attention_bf16.cpp).
std::unique_ptr<LayerKernel> make_bf16_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, Device& device);

}  // namespace scalescope::cpu_attention
