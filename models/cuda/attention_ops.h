// Launchers of the attention kernels (attention_ops.cu), called by cuda_attention.cpp: the
// copies between the layer's [N, S, width] rows and head-major buffers [N, H, S, hd], and the
// causal scaled softmax over score rows, forward and backward. Their math and layouts are
// kernel_math/attention_math.h's.
//
// Each launcher enqueues its work on `stream` and checks the launch (check_launch, declared in
// cuda_ops.h); none synchronizes the host or allocates. Pointers are device memory of the
// current device. Like cuda_ops.h, this header is one the .cu files may include: no fmt.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "models/kernel_math/attention_math.h"

namespace scalescope::cuda_ops {

// heads[e] = rows[head_major_to_rows(s, e, width, column)] for every element e of the
// head-major buffer; from_heads writes the other way.
void to_heads(const kernel_math::AttentionShape& s, const float* rows, int64_t width,
              int64_t column, float* heads, cudaStream_t stream);
// to_heads with each element rounded to 16 bits into heads.at (as HalfRow::store does).
void to_half_heads(const kernel_math::AttentionShape& s, const float* rows, int64_t width,
                   int64_t column, const kernel_math::HalfRow& heads, cudaStream_t stream);
// to_heads of rows held in 16 bits (the model's saved copy): their bits copied as they are.
void half_rows_to_heads(const kernel_math::AttentionShape& s, const uint16_t* rows, int64_t width,
                        int64_t column, uint16_t* heads, cudaStream_t stream);
void from_heads(const kernel_math::AttentionShape& s, const float* heads, float* rows,
                int64_t width, int64_t column, cudaStream_t stream);
// from_heads rounding each value into rows held in 16 bits (the model's saved copy).
void from_heads_to_half(const kernel_math::AttentionShape& s, const float* heads, uint16_t* rows,
                        kernel_math::HalfFormat format, int64_t width, int64_t column,
                        cudaStream_t stream);

// Over the b.count() rows of a block of score matrices (b.query(r) is row r's query
// position, b.len its length): unscaled scores into probabilities (in place allowed), and the
// probabilities' gradient dp into the scores' gradient ds (in place allowed), with
// causal_softmax_row and causal_softmax_backward_row_of; each also writes its results' 16-bit
// copy in the block's layout where half.at is not null (not overlapping what it reads), and
// with probs or grad_scores null only that copy. One warp per row; every column is written
// (masked ones 0). Forward writes each row's SoftmaxRowStats at stats(b, r);
// causal_softmax_from_stats computes the same probabilities from the scores and those stats;
// backward with stats.at not null reads scores in `probs` and recomputes the probabilities from
// them and the stats, else it reads the probabilities there.
void causal_softmax_forward(const kernel_math::ScoreBlock& b, const float* scores, float* probs,
                            float scale, const kernel_math::HalfRow& half,
                            const kernel_math::RowStatsAt& stats, cudaStream_t stream);
void causal_softmax_from_stats(const kernel_math::ScoreBlock& b, const float* scores, float* probs,
                               float scale, const kernel_math::HalfRow& half,
                               const kernel_math::RowStatsAt& stats, cudaStream_t stream);
void causal_softmax_backward(const kernel_math::ScoreBlock& b, const float* probs,
                             const float* grad_probs, float* grad_scores, float scale,
                             const kernel_math::HalfRow& half, const kernel_math::RowStatsAt& stats,
                             cudaStream_t stream);

// ---- the fused passes under bf16 and fp16 (SCALESCOPE_ATTENTION=flash)

// The fused forward (flash_attention.cu): from head-major 16-bit q, k and v,
// the heads' outputs `out` (head-major fp32) and each row's SoftmaxRowStats into stats[N·H, S],
// flash attention's scheme on tensor cores, no score in global memory (what is kept, and the
// math: kernel_math/flash_attention_math.h). REQUIRES: flash_supports(s.head_dim), N·H
// at most 65535 (the grid's y), and flash_attention_shared_bytes(s.head_dim) within the
// device's opt-in shared memory per block.
void flash_attention_forward(const kernel_math::AttentionShape& s, const uint16_t* q,
                             const uint16_t* k, const uint16_t* v, kernel_math::HalfFormat format,
                             float scale, float* out, kernel_math::SoftmaxRowStats* stats,
                             cudaStream_t stream);
// The shared memory a block of flash_attention_forward takes for head size `head_dim`.
int64_t flash_attention_shared_bytes(int64_t head_dim);

// What the fused backward reads and writes: q, k, v and dO's 16-bit copies, head-major
// [N·H, S, hd]; the layer's output gradient and output as rows [N, S, D] (dout_rows in fp32, the
// output in fp32 as out_rows or as the model's saved 16-bit copy out_rows_half, whichever is not
// null), from which each row's delta; the stats the forward kept and delta's scratch, [N·H, S];
// and the gradients dq, dk and dv, head-major fp32, written whole.
struct FlashBackwardTensors {
  kernel_math::AttentionShape shape;
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  const uint16_t* dout;
  const float* dout_rows;
  const float* out_rows;
  const uint16_t* out_rows_half;
  const kernel_math::SoftmaxRowStats* stats;
  float* delta;
  float* dq;
  float* dk;
  float* dv;
};
// The fused backward under bf16 and fp16 (flash_attention_backward.cu). REQUIRES: as
// flash_attention_forward, with flash_attention_backward_shared_bytes(hd) within the device's
// opt-in shared memory.
void flash_attention_backward(const FlashBackwardTensors& t, kernel_math::HalfFormat format,
                              float scale, cudaStream_t stream);
int64_t flash_attention_backward_shared_bytes(int64_t head_dim);

}  // namespace scalescope::cuda_ops
