// The CUDA attention's passes as a sequence of batched products and softmax calls over chunks
// of query rows (cuda_attention.cpp runs them with cuBLAS and our kernels). Plain C++ with no
// CUDA in it, so that tests run the same sequence on CPU (attention_chunks_test.cpp).
//
// Why chunks: the scores of all S queries against all S keys, [N·H, S, S] in fp32, are what
// made the attention's memory quadratic in S (two such buffers, 805 MB for GPT-2 small at 8
// sequences of 1024), and under the causal mask half of every such product is of masked
// entries. A chunk of C query rows [first, first + C) sees only the keys [0, first + C), so
// its scores are [N·H, C, first + C]: the buffers hold C·S values per head instead of S·S
// (C = 8·hd by default, so the attention's workspace is a fixed multiple of its heads', linear
// in S), and the products skip the keys no query of the chunk sees, about (S − C)/2S of the
// work of the whole-matrix products (25% for GPT-2 small's S = 1024, C = 512).
//
// Forward, per chunk: scores = Q_c·K[:keys]ᵀ, their causal softmax in place, O_c = P·V[:keys].
// Backward recomputes each chunk's scores and, from them and the rows' softmax stats forward
// kept (a max and a sum a query, [N·H, S] of them), its P; then it adds the chunk's share of dK
// and dV, the chunks taken last first: the last chunk sees
// every key, so its products write all of dK and dV (β = 0) and the others add to them (β = 1)
// and nothing is read before it is written. The order is fixed: deterministic.
//
// Under bf16 and fp16 every product reads 16-bit operands (the heads' copies, and copies of P
// and dS) with fp32 results, as the whole-matrix kernel did. The softmax kernels write P's and
// dS's copies in the same pass as their fp32 values (the bits a rounding pass would give), into
// a score buffer of 16-bit values: P's copy until dV's product has read it, then dS's.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "core/check.h"
#include "core/env.h"
#include "models/kernel_math/attention_math.h"
#include "models/kernel_math/flash_attention_math.h"

namespace scalescope::attention_chunks {

namespace km = kernel_math;

// The buffers of a pass in the kernel's workspace: the head-major [N, H, S, hd] copies of q, k
// and v, the heads' outputs (forward) or dout's (backward), the gradients of q, k and v, the
// 16-bit copies of the first four, two score buffers of score_elements() floats and, under 16
// bits, one of as many 16-bit values.
enum class Buffer {
  kQ,
  kK,
  kV,
  kOut,
  kGradQ,
  kGradK,
  kGradV,
  kHalfQ,
  kHalfK,
  kHalfV,
  kHalfOut,
  kScores,
  kGradScores,
  kHalfScores
};

// Whether buffer b holds 16-bit values (the others hold floats).
inline bool sixteen_bit(Buffer b) {
  return b >= Buffer::kHalfQ && b != Buffer::kScores && b != Buffer::kGradScores;
}

// The 16-bit copy of head buffer b (kQ, kK, kV or kOut): the same order, kHalfQ on.
inline Buffer half_copy(Buffer b) {
  SS_CHECK(b <= Buffer::kOut, "attention: buffer {} has no 16-bit copy", static_cast<int>(b));
  return static_cast<Buffer>(static_cast<int>(b) + static_cast<int>(Buffer::kHalfQ));
}

// Query rows [first, first + rows), which see keys [0, keys).
struct Chunk {
  int64_t first = 0;
  int64_t rows = 0;
  int64_t keys = 0;
};

// The default chunk: 8·hd rows (a multiple of 8, so that a chunk's 16-bit rows start 16-byte
// aligned as cuBLAS's fastest kernels want), at most S. Fewer, larger chunks make larger
// products and fewer softmax launches at the cost of score memory linear in the chunk: on an
// H200, GPT-2 small (hd = 64) at 8 sequences of 1024 stepped in 61.2 ms in tf32 and 48.6 in
// bf16 with chunks of 512 rows, against 61.8 and 48.9-51.4 with 256 and 64.8 and 50.7 with 128,
// for 0.28 and 0.18 GiB more peak memory than with 128, still below PyTorch's.
inline int64_t default_chunk_rows(const km::AttentionShape& s) {
  return std::min(s.seq, 8 * s.head_dim);
}

// The chunk the CUDA kernel takes: `requested` rows (at most S), or the default for 0.
inline int64_t chunk_rows(const km::AttentionShape& s, int64_t requested) {
  return requested == 0 ? default_chunk_rows(s) : std::min(s.seq, requested);
}

// SCALESCOPE_ATTENTION_CHUNK_ROWS: the rows of a chunk when set (a number at least S gives
// the whole matrices of the kernel before chunks, for comparing the two on a GPU), 0 or unset
// for the default. Throws Error naming the variable for anything but a whole number.
inline int64_t chunk_rows_from_environment() {
  constexpr int64_t kMostRows = int64_t{1} << 30;
  return whole_number_from_environment("SCALESCOPE_ATTENTION_CHUNK_ROWS", kMostRows, "rows");
}

// How the CUDA attention's passes run: products and softmax over chunks (Passes), or under bf16
// and fp16 fused (kernel_math/flash_attention_math.h): flash attention's forward and backward,
// scores only in shared memory.
enum class Kind { kChunks, kFlash };

// SCALESCOPE_ATTENTION=chunks (the default while the fused passes have not run on a GPU) or
// flash. Throws Error naming the variable for anything else.
inline Kind kind_from_environment() {
  return choice_from_environment("SCALESCOPE_ATTENTION", {"chunks", "flash"}) == 1 ? Kind::kFlash
                                                                                   : Kind::kChunks;
}

// Whether a kernel asked to run `asked` runs the fused passes: under 16 bits, a head size they
// take, N·H within a grid's y (65535), and the larger of their blocks' shared memory
// (`shared_bytes`) within what the device lets a block opt in to. Anything else runs the chunks
// (and the kernel's choices() say which ran).
inline bool flash_runs(Kind asked, bool half, const km::AttentionShape& s, int64_t shared_bytes,
                       int64_t device_shared_bytes) {
  constexpr int64_t kMostGridY = 65535;
  return asked == Kind::kFlash && half && km::flash_supports(s.head_dim) &&
         s.batch * s.heads <= kMostGridY && shared_bytes <= device_shared_bytes;
}

inline int64_t chunk_count(int64_t seq, int64_t chunk_rows) {
  return seq == 0 ? 0 : (seq + chunk_rows - 1) / chunk_rows;
}

inline Chunk chunk(int64_t seq, int64_t chunk_rows, int64_t i) {
  const int64_t first = i * chunk_rows;
  const int64_t rows = std::min(chunk_rows, seq - first);
  return {first, rows, first + rows};
}

// Floats of each score buffer: the largest chunk's [N·H, rows, keys], which is at most
// N·H·C·S (the last chunk, or any full one).
inline int64_t score_elements(const km::AttentionShape& s, int64_t chunk_rows) {
  int64_t most = 0;
  for (int64_t i = 0; i < chunk_count(s.seq, chunk_rows); ++i) {
    const Chunk c = chunk(s.seq, chunk_rows, i);
    most = std::max(most, c.rows * c.keys);
  }
  return s.batch * s.heads * most;
}

// Where each buffer of a pass lies in the kernel's workspace, in bytes from its start (which
// the caching allocator aligns to 512), in Buffer's order. Under 16 bits q, k and v are only their
// 16-bit copies; in fp32 and tf32 there is no 16-bit buffer. With the fused passes (`flash`)
// there are no chunks of scores: kScores holds each row's delta (N·H·S floats), and kGradScores
// and kHalfScores are absent. Each buffer starts on a multiple of kAlignment bytes, as the dense
// layers' and convolutions' regions do: cuBLAS's fastest kernels want 16-byte aligned operands,
// which packed buffers are not where N·S·hd or a chunk's scores count no multiple of 8.
class Workspace {
 public:
  static constexpr int64_t kAlignment = 256;
  static constexpr int kBuffers = static_cast<int>(Buffer::kHalfScores) + 1;

  Workspace(const km::AttentionShape& s, int64_t chunk_rows, bool half, bool flash = false) {
    bytes_.fill(-1);
    for (int i = 0; i < kBuffers; ++i) {
      const auto b = static_cast<Buffer>(i);
      const bool present = sixteen_bit(b) ? half : !(half && b < Buffer::kOut);
      const bool score =
          b == Buffer::kScores || b == Buffer::kGradScores || b == Buffer::kHalfScores;
      if (!present || (flash && score && b != Buffer::kScores)) continue;
      const int64_t elements =
          score ? (flash ? s.score_rows() : score_elements(s, chunk_rows)) : s.head_elements();
      bytes_[static_cast<size_t>(i)] = elements * (sixteen_bit(b) ? 2 : 4);
      offset_[static_cast<size_t>(i)] = size_;
      size_ += (bytes_[static_cast<size_t>(i)] + kAlignment - 1) / kAlignment * kAlignment;
    }
  }

  bool has(Buffer b) const { return bytes_[static_cast<size_t>(b)] >= 0; }
  // Buffer b's first byte; throws for one the pass does not have.
  int64_t offset(Buffer b) const {
    SS_CHECK(has(b), "attention: no buffer {} in this precision's workspace", static_cast<int>(b));
    return offset_[static_cast<size_t>(b)];
  }
  // Buffer b's bytes, unpadded (0 for one the pass does not have).
  int64_t bytes(Buffer b) const { return std::max<int64_t>(0, bytes_[static_cast<size_t>(b)]); }
  // The bytes the kernel reserves: every buffer, padded.
  int64_t size() const { return size_; }

 private:
  std::array<int64_t, kBuffers> offset_{};
  std::array<int64_t, kBuffers> bytes_{};
  int64_t size_ = 0;
};

// Batch b of a row-major matrix: its element (i, j) at buffer + offset + b·batch_stride +
// i·ld + j, in elements of the buffer's type.
struct Matrix {
  Buffer buffer;
  int64_t offset = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// C[b] = op(A[b])·op(B[b]) + β·C[b] over the N·H batches, row-major: C [m, n], op(A) [m, k],
// op(B) [k, n]; a transposed operand is stored untransposed ([k, m] for A, [n, k] for B). A and
// B are in the products' operand type (16-bit under bf16 and fp16), C is fp32. β is 0 or 1;
// with 0, C is not read.
struct Product {
  Matrix a;
  bool transpose_a = false;
  Matrix b;
  bool transpose_b = false;
  Matrix c;
  int64_t m = 0, n = 0, k = 0;
  float beta = 0.0f;
};

// The same product in cuBLAS's column-major terms, where a row-major [r, c] matrix reads as its
// transpose [c, r] with the same leading dimension: Cᵀ = op(B)ᵀ·op(A)ᵀ, so B becomes cuBLAS's A,
// transposed by cuBLAS exactly when it is transposed here, and m and n swap.
inline Product column_major(const Product& p) {
  return {p.b, p.transpose_b, p.a, p.transpose_a, p.c, p.n, p.m, p.k, p.beta};
}

// Head buffer b's rows from position `first` on, as an operand of a product over the N·H
// batches ([S, hd] each).
inline Matrix head_rows(Buffer b, const km::AttentionShape& s, int64_t first) {
  return {b, first * s.head_dim, s.head_dim, s.seq * s.head_dim};
}

// A chunk's scores [N·H, rows, keys], compact.
inline Matrix chunk_scores(Buffer b, const Chunk& c) {
  return {b, 0, c.keys, c.rows * c.keys};
}

inline km::ScoreBlock score_block(const km::AttentionShape& s, const Chunk& c) {
  return {s.batch * s.heads, c.rows, c.first, c.keys};
}

// What an Exec does (cuda_attention.cpp's on a stream; the test's on host vectors):
//   bool half() const: whether the products' operands are 16-bit;
//   void gemm(const Product&);
//   void softmax_forward(const km::ScoreBlock&, Buffer scores, bool fp32,
//     std::optional<Buffer> half): the probabilities in place if `fp32`, and their 16-bit copy
//     into `half` if given; it keeps each row's SoftmaxRowStats, the layer's [N·H, S] of them,
//     for backward;
//   void softmax_from_stats(const km::ScoreBlock&, Buffer scores, bool fp32,
//     std::optional<Buffer> half): the same probabilities from the scores and the kept stats,
//     each score read once;
//   void softmax_backward(const km::ScoreBlock&, Buffer probs, Buffer grads, bool fp32,
//     std::optional<Buffer> half, bool from_scores): dP into dS in place if `fp32`, and dS's
//     16-bit copy into `half` if given; with `from_scores`, `probs` holds the scores and P is
//     recomputed from them and the kept stats (ProbabilitiesFromScores).
// Under 16 bits the products read only the copies, so no fp32 probability is written at all:
// backward recomputes P from the scores where it needs it in fp32 (dS).
template <class Exec>
class Passes {
 public:
  Passes(const km::AttentionShape& shape, int64_t chunk_rows, Exec& exec)
      : s_(shape), chunk_rows_(chunk_rows), exec_(exec) {
    SS_CHECK(chunk_rows > 0, "attention: chunks of {} query rows", chunk_rows);
  }

  // From q, k and v (and their 16-bit copies) to the heads' outputs in kOut.
  void forward() {
    for (int64_t i = 0; i < chunk_count(s_.seq, chunk_rows_); ++i) {
      const Chunk c = chunk(s_.seq, chunk_rows_, i);
      const Buffer probs = probabilities(c, false);
      exec_.gemm({chunk_scores(probs, c), false, head_rows(head(Buffer::kV), s_, 0), false,
                  head_rows(Buffer::kOut, s_, c.first), c.rows, s_.head_dim, c.keys, 0.0f});
    }
  }

  // From q, k, v and dout's heads in kOut (and the 16-bit copies) to dq, dk and dv.
  void backward() {
    const int64_t last = chunk_count(s_.seq, chunk_rows_) - 1;
    for (int64_t i = last; i >= 0; --i) {
      const Chunk c = chunk(s_.seq, chunk_rows_, i);
      const float beta = i == last ? 0.0f : 1.0f;
      const Matrix dout = head_rows(head(Buffer::kOut), s_, c.first);
      const Buffer probs = probabilities(c, true);
      exec_.gemm({chunk_scores(probs, c), true, dout, false, head_rows(Buffer::kGradV, s_, 0),
                  c.keys, s_.head_dim, c.rows, beta});  // dV += Pᵀ·dO
      exec_.gemm({dout, false, head_rows(head(Buffer::kV), s_, 0), true,
                  chunk_scores(Buffer::kGradScores, c), c.rows, c.keys, s_.head_dim,
                  0.0f});  // dP = dO·Vᵀ
      exec_.softmax_backward(score_block(s_, c), Buffer::kScores, Buffer::kGradScores,
                             !exec_.half(), copies(), exec_.half());
      const Buffer grads = copies().value_or(Buffer::kGradScores);
      exec_.gemm({chunk_scores(grads, c), false, head_rows(head(Buffer::kK), s_, 0), false,
                  head_rows(Buffer::kGradQ, s_, c.first), c.rows, s_.head_dim, c.keys,
                  0.0f});  // dQ = dS·K
      exec_.gemm({chunk_scores(grads, c), true, head_rows(head(Buffer::kQ), s_, c.first), false,
                  head_rows(Buffer::kGradK, s_, 0), c.keys, s_.head_dim, c.rows,
                  beta});  // dK += dSᵀ·Q
    }
  }

 private:
  // Head buffer b as the products read it.
  Buffer head(Buffer b) const { return exec_.half() ? half_copy(b) : b; }
  // Where the softmax kernels write the 16-bit copies the products read: under 16 bits only.
  std::optional<Buffer> copies() const {
    return exec_.half() ? std::optional<Buffer>(Buffer::kHalfScores) : std::nullopt;
  }
  // The chunk's P: in kScores in fp32, its copy under 16 bits (the scores left in kScores);
  // backward's from the stats forward kept. Returns where the products read P.
  Buffer probabilities(const Chunk& c, bool backward) {
    exec_.gemm({head_rows(head(Buffer::kQ), s_, c.first), false, head_rows(head(Buffer::kK), s_, 0),
                true, chunk_scores(Buffer::kScores, c), c.rows, c.keys, s_.head_dim,
                0.0f});  // Q·Kᵀ
    if (backward) {
      exec_.softmax_from_stats(score_block(s_, c), Buffer::kScores, !exec_.half(), copies());
    } else {
      exec_.softmax_forward(score_block(s_, c), Buffer::kScores, !exec_.half(), copies());
    }
    return copies().value_or(Buffer::kScores);
  }

  km::AttentionShape s_;
  int64_t chunk_rows_;
  Exec& exec_;
};

}  // namespace scalescope::attention_chunks
