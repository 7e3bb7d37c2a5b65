// GPT-2's causal self-attention on CPU under bf16, as autocast's scaled-dot-product attention
// computes it: the fused kernel of cpu_attention.cpp (query tiles forward, key tiles backward,
// one log-sum-exp per row kept) with its five products on bf16 copies of their operands and
// fp32 accumulation. q, k, v and dout are rounded as the model's saved copies are (the kernel
// reads those copies where the model has them), and the probabilities and their gradient are
// rounded after the fp32 softmax, for the products that read them, as PyTorch's CPU flash
// attention rounds them. The softmax, the row sums and the log-sum-exps stay fp32.
//
// The products are oneDNN matmuls, one primitive per shape made at construction: on a CPU
// with AMX oneDNN 2.6 runs them on its bf16 tiles (brg:avx512_core_amx_bf16, 2-7x sgemm on
// these shapes on one core), but only on dense operands. So each (sample, head) task first
// packs its heads into dense [S, hd] bf16 matrices (zero rows up to a whole number of the
// tile functions' lanes), and every block of scores is exactly as wide as the product that
// fills it.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cpu/cpu_attention.h"
#include "models/cpu/cpu_half.h"
#include "models/kernel_math/attention_math.h"
#include "models/kernel_math/half_math.h"

namespace scalescope::cpu_attention {
namespace {

namespace km = kernel_math;
using dnnl::memory;
using Tag = memory::format_tag;
constexpr km::HalfFormat kBf16 = km::HalfFormat::kBf16;

// Where a pass reads an activation: the fp32 tensor (rounded as it is packed) or the model's
// saved bf16 copy of it (copied).
struct Values {
  const float* fp32 = nullptr;
  const uint16_t* bf16 = nullptr;

  // `n` values from `offset` on, as bf16.
  void round_into(int64_t offset, int64_t n, uint16_t* to) const {
    if (bf16 != nullptr) {
      std::memcpy(to, bf16 + offset, static_cast<size_t>(n) * sizeof(uint16_t));
    } else {
      compress_half_span(fp32 + offset, to, n, 1, kBf16);
    }
  }
  // `n` values from `offset` on, as fp32: where they are, or widened into `room`.
  const float* widen(int64_t offset, int64_t n, float* room) const {
    if (bf16 == nullptr) return fp32 + offset;
    decompress_half_span(bf16 + offset, room, n, kBf16);
    return room;
  }
};

// Where backward writes the input's gradient: fp32, or the bf16 copy the dense layer before
// reads (writes_half_gradient), rounded as that layer would round the fp32 values.
struct Gradient {
  float* fp32 = nullptr;
  uint16_t* bf16 = nullptr;

  // `n` fp32 values into the gradient from `offset` on.
  void write(int64_t offset, const float* from, int64_t n) const {
    if (bf16 != nullptr) {
      compress_half_span(from, bf16 + offset, n, 1, kBf16);
    } else {
      std::copy(from, from + n, fp32 + offset);
    }
  }
};

// One shape of product, C = op(A)·B (+ C), and per thread the memory objects its operands are
// bound to at each call (dnnl::memory::set_data_handle: no allocation inside the loops).
struct Product {
  dnnl::matmul primitive;
  std::string implementation;
  std::vector<std::array<memory, 3>> args;  // per thread: A, B, C
};

memory::desc bf16_matrix(int64_t rows, int64_t cols, Tag tag) {
  return memory::desc({rows, cols}, memory::data_type::bf16, tag);
}

// The byte offsets of one thread's scratch, each region 64-byte aligned.
struct ScratchLayout {
  int64_t q, k, v, dout, scores, grads, probs16, grads16, tile, dq, rows, library, bytes;
};

class Bf16AttentionKernel final : public LayerKernel, private AttentionBase {
 public:
  Bf16AttentionKernel(const CausalSelfAttentionSpec& spec, const LayerBinding& b, Device& device)
      : AttentionBase(spec, b, device),
        padded_seq_(lane_width(shape_.seq)),
        engine_(dnnl::engine::kind::cpu, 0) {
    make_products();
    layout_ = scratch_layout();
    reserve_scratch(static_cast<size_t>(threads_ * layout_.bytes));
    const memory::desc library({std::max<int64_t>(library_bytes_, 1)}, memory::data_type::u8,
                               Tag::a);
    for (int t = 0; t < threads_; ++t) {
      streams_.emplace_back(engine_);
      library_scratch_.push_back(memory(library, engine_, DNNL_MEMORY_NONE));
    }
  }

  void forward(const float* in, float* out, Stream&) override { run_forward({in, nullptr}, out); }
  bool forwards_from_saved(km::HalfFormat format) const override { return format == kBf16; }
  void forward_saved(const uint16_t* in, float* out, Stream&) override {
    run_forward({nullptr, in}, out);
  }

  // Reads the forward's input and output (backward_reads: both) and the log-sum-exp that
  // forward kept.
  // REQUIRES (beyond LayerKernel's): no forward_eval since the last forward.
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream&) override {
    run_backward({in, nullptr}, {out, nullptr}, dout, {din, nullptr});
  }
  bool reads_saved(km::HalfFormat format) const override { return format == kBf16; }
  void backward_saved(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                      Stream&) override {
    run_backward({nullptr, in}, {nullptr, out}, dout, {din, nullptr});
  }
  // And may write q's, k's and v's gradient as the bf16 copy the dense layer before (c_attn)
  // reads, where that layer would round the fp32 gradient itself.
  bool writes_half_gradient(km::HalfFormat format) const override { return format == kBf16; }
  void backward_into_half_gradient(const uint16_t* in, const uint16_t* out, const float* dout,
                                   uint16_t* din, Stream&) override {
    run_backward({nullptr, in}, {nullptr, out}, dout, {nullptr, din});
  }

  // oneDNN's matmuls are deterministic for a fixed thread count (one, here), and so are our
  // loops.
  std::vector<KernelChoice> choices() const override {
    std::set<std::string> implementations;
    for (const auto* products : {&forward_scores_, &forward_values_, &backward_scores_,
                                 &backward_weights_, &backward_queries_}) {
      for (const Product& p : *products) implementations.insert(p.implementation);
    }
    const std::string name =
        fmt::format("fused causal attention, blocks of {} rows: oneDNN matmul ({}) + softmax",
                    kTile, fmt::join(implementations, ", "));
    const int64_t bytes = threads_ * layout_.bytes;
    return {{"forward", name, "bf16", "NSC", true, bytes},
            {"backward-data", name, "bf16", "NSC", true, bytes}};
  }

 private:
  // Forward: the keys query tile `tile` sees, as wide as its block of scores.
  int64_t key_width(int64_t tile) const {
    return lane_width(tile * kTile + tile_size(shape_, tile));
  }

  void make_products();
  Product product(const memory::desc& a, const memory::desc& b, const memory::desc& c,
                  bool accumulate);
  ScratchLayout scratch_layout() const;
  void run(const Product& p, int thread, const void* a, const void* b, void* c,
           std::atomic<int>& failures) const;

  // At the start of each pass: oneDNN's scratchpads into the threads' scratch.
  void bind_library_scratch() const;
  void run_forward(Values in, float* out);
  void run_backward(Values in, Values out, const float* dout, Gradient din);
  void forward_head(Values in, float* out, int64_t head_task, std::atomic<int>& failures) const;
  void backward_head(Values in, Values out, const float* dout, Gradient din, int64_t head_task,
                     std::atomic<int>& failures) const;
  void backward_key_tile(Gradient din, int64_t head_task, int64_t key_tile, int thread,
                         std::atomic<int>& failures) const;

  template <class T>
  T* at(int thread, int64_t offset) const {
    return reinterpret_cast<T*>(scratch() + thread * layout_.bytes + offset);
  }
  // Packs part `part` (0 q, 1 k, 2 v) of (sample, head) `head_task` into a dense [S, hd] bf16
  // matrix, zero rows up to padded_seq_.
  void pack(Values in, int64_t head_task, int part, uint16_t* to) const;
  int64_t padded_seq_;
  dnnl::engine engine_;
  // Per tile: forward's scores Q·Kᵀ and output P·V; backward's scores and dP (one shape),
  // dV and dK (Pᵀ·dout and dSᵀ·q, one shape), and dq += dS·K.
  std::vector<Product> forward_scores_, forward_values_;
  std::vector<Product> backward_scores_, backward_weights_, backward_queries_;
  int64_t library_bytes_ = 0;  // the largest scratchpad a product asks for
  ScratchLayout layout_{};
  std::vector<dnnl::stream> streams_;    // one per thread
  std::vector<memory> library_scratch_;  // per thread, bound to its scratch's library region
};

Product Bf16AttentionKernel::product(const memory::desc& a, const memory::desc& b,
                                     const memory::desc& c, bool accumulate) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine_);
  library_bytes_ = std::max(library_bytes_, static_cast<int64_t>(pd.scratchpad_desc().get_size()));
  Product p{dnnl::matmul(pd), pd.impl_info_str(), {}};
  for (int t = 0; t < threads_; ++t) {
    p.args.push_back({memory(a, engine_, DNNL_MEMORY_NONE), memory(b, engine_, DNNL_MEMORY_NONE),
                      memory(c, engine_, DNNL_MEMORY_NONE)});
  }
  return p;
}

void Bf16AttentionKernel::make_products() {
  const int64_t hd = shape_.head_dim;
  for (int64_t tile = 0; tile < tile_count(shape_); ++tile) {
    const int64_t rows = tile_size(shape_, tile), width = key_width(tile);
    // Forward: scores [rows, width] = Q_tile · Kᵀ (K read as [hd, width] through its rows),
    // then out [rows, hd] = P [rows, width] · V [width, hd].
    forward_scores_.push_back(
        product(bf16_matrix(rows, hd, Tag::ab), bf16_matrix(hd, width, Tag::ba),
                memory::desc({rows, width}, memory::data_type::f32, Tag::ab), false));
    forward_values_.push_back(
        product(bf16_matrix(rows, width, Tag::ab), bf16_matrix(width, hd, Tag::ab),
                memory::desc({rows, hd}, memory::data_type::f32, Tag::ab), false));
    // Backward, key tile `tile`: the queries from its first key on, against its columns.
    const int64_t queries = shape_.seq - tile * kTile, cols = lane_width(rows);
    backward_scores_.push_back(
        product(bf16_matrix(queries, hd, Tag::ab), bf16_matrix(hd, cols, Tag::ba),
                memory::desc({queries, cols}, memory::data_type::f32, Tag::ab), false));
    backward_weights_.push_back(
        product(bf16_matrix(cols, queries, Tag::ba), bf16_matrix(queries, hd, Tag::ab),
                memory::desc({cols, hd}, memory::data_type::f32, Tag::ab), false));
    backward_queries_.push_back(
        product(bf16_matrix(queries, cols, Tag::ab), bf16_matrix(cols, hd, Tag::ab),
                memory::desc({queries, hd}, memory::data_type::f32, Tag::ab), true));
  }
}

ScratchLayout Bf16AttentionKernel::scratch_layout() const {
  const int64_t s = padded_seq_, hd = shape_.head_dim;
  ScratchLayout l{};
  int64_t end = 0;
  const auto region = [&](int64_t bytes) {
    const int64_t offset = end;
    end += (bytes + 63) / 64 * 64;
    return offset;
  };
  const int64_t head = s * hd * static_cast<int64_t>(sizeof(uint16_t));
  l.q = region(head);
  l.k = region(head);
  l.v = region(head);
  l.dout = region(head);
  // A block of scores: forward's kTile queries against up to S keys, backward's up to S
  // queries against kTile keys.
  const int64_t block = kTile * s;
  l.scores = region(block * static_cast<int64_t>(sizeof(float)));
  l.grads = region(block * static_cast<int64_t>(sizeof(float)));
  l.probs16 = region(block * static_cast<int64_t>(sizeof(uint16_t)));
  l.grads16 = region(block * static_cast<int64_t>(sizeof(uint16_t)));
  l.tile = region(kTile * hd * static_cast<int64_t>(sizeof(float)));
  l.dq = region(s * hd * static_cast<int64_t>(sizeof(float)));
  // Forward: the tile rows' softmax (two floats a row); backward: the deltas (one a query).
  l.rows = region(std::max(shape_.seq, 2 * kTile) * static_cast<int64_t>(sizeof(float)));
  l.library = region(library_bytes_);
  l.bytes = end;
  return l;
}

// Never throws (it runs inside OpenMP loops): a failure is counted.
void Bf16AttentionKernel::run(const Product& p, int thread, const void* a, const void* b, void* c,
                              std::atomic<int>& failures) const {
  const auto& args = p.args[static_cast<size_t>(thread)];
  const void* pointers[] = {a, b, c};
  dnnl_status_t status = dnnl_success;
  for (size_t i = 0; i < args.size() && status == dnnl_success; ++i) {
    status = dnnl_memory_set_data_handle(args[i].get(), const_cast<void*>(pointers[i]));
  }
  const dnnl_exec_arg_t exec[] = {
      {DNNL_ARG_SRC, args[0].get()},
      {DNNL_ARG_WEIGHTS, args[1].get()},
      {DNNL_ARG_DST, args[2].get()},
      {DNNL_ARG_SCRATCHPAD, library_scratch_[static_cast<size_t>(thread)].get()}};
  if (status == dnnl_success) {
    status = dnnl_primitive_execute(p.primitive.get(), streams_[static_cast<size_t>(thread)].get(),
                                    4, exec);
  }
  if (status != dnnl_success) failures.fetch_add(1, std::memory_order_relaxed);
}

void Bf16AttentionKernel::pack(Values in, int64_t head_task, int part, uint16_t* to) const {
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim;
  const int64_t from = qkv_offset(shape_, head_task) + part * d;
  for (int64_t i = 0; i < shape_.seq; ++i) in.round_into(from + i * 3 * d, hd, to + i * hd);
  std::fill(to + shape_.seq * hd, to + padded_seq_ * hd, uint16_t{0});
}

void Bf16AttentionKernel::bind_library_scratch() const {
  for (int t = 0; t < threads_; ++t) {
    library_scratch_[static_cast<size_t>(t)].set_data_handle(at<char>(t, layout_.library));
  }
}

void Bf16AttentionKernel::run_forward(Values in, float* out) {
  bind_library_scratch();
  for_each_head("forward", "matmul", [&](int64_t head_task, std::atomic<int>& failures) {
    forward_head(in, out, head_task, failures);
  });
}

// Every query tile of (sample, head) `head_task` against every key up to its last query in one
// block: the scores in one product, each row's softmax, its bf16 copy, the output in a second
// product, divided by the rows' sums.
void Bf16AttentionKernel::forward_head(Values in, float* out, int64_t head_task,
                                       std::atomic<int>& failures) const {
  const int thread = omp_get_thread_num();
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim;
  auto* q = at<uint16_t>(thread, layout_.q);
  auto* k = at<uint16_t>(thread, layout_.k);
  auto* v = at<uint16_t>(thread, layout_.v);
  pack(in, head_task, 0, q);
  pack(in, head_task, 1, k);
  pack(in, head_task, 2, v);
  auto* scores = at<float>(thread, layout_.scores);
  auto* probs = at<uint16_t>(thread, layout_.probs16);
  auto* tile_out = at<float>(thread, layout_.tile);
  auto* softmax = at<km::OnlineSoftmaxRow>(thread, layout_.rows);
  for (int64_t tile = 0; tile < tile_count(shape_); ++tile) {
    const int64_t q0 = tile * kTile, rows = tile_size(shape_, tile), width = key_width(tile);
    const size_t t = static_cast<size_t>(tile);
    run(forward_scores_[t], thread, q + q0 * hd, k, scores, failures);
    softmax_rows({q0, rows, 0, q0 + rows, width}, scale_, scores, softmax);
    compress_half_span(scores, probs, rows * width, 1, kBf16);
    run(forward_values_[t], thread, probs, v, tile_out, failures);
    float* o = out + out_offset(shape_, head_task) + q0 * d;
    float* lse = log_sum_exp(head_task) + q0;
    for (int64_t r = 0; r < rows; ++r) {
      const float inverse = 1.0f / softmax[r].sum;
      for (int64_t c = 0; c < hd; ++c) o[r * d + c] = tile_out[r * hd + c] * inverse;
      lse[r] = softmax[r].log_sum_exp();
    }
  }
}

void Bf16AttentionKernel::run_backward(Values in, Values out, const float* dout, Gradient din) {
  // No parameters: nothing to do without the input's gradient.
  if (din.fp32 == nullptr && din.bf16 == nullptr) return;
  bind_library_scratch();
  for_each_head("backward", "matmul", [&](int64_t head_task, std::atomic<int>& failures) {
    backward_head(in, out, dout, din, head_task, failures);
  });
}

// Every gradient of (sample, head) `head_task`: dq's rows accumulate in fp32 over the key
// tiles and are written once at the end.
void Bf16AttentionKernel::backward_head(Values in, Values out, const float* dout, Gradient din,
                                        int64_t head_task, std::atomic<int>& failures) const {
  const int thread = omp_get_thread_num();
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim, seq = shape_.seq;
  pack(in, head_task, 0, at<uint16_t>(thread, layout_.q));
  pack(in, head_task, 1, at<uint16_t>(thread, layout_.k));
  pack(in, head_task, 2, at<uint16_t>(thread, layout_.v));
  auto* dout16 = at<uint16_t>(thread, layout_.dout);
  auto* deltas = at<float>(thread, layout_.rows);
  auto* room = at<float>(thread, layout_.tile);
  const float* dout_rows = dout + out_offset(shape_, head_task);
  // delta_i = Σ_c dout_ic·out_ic: the softmax backward's row sum, from the output instead of
  // the probabilities no one kept (the saved bf16 output where the model has it).
  for (int64_t i = 0; i < seq; ++i) {
    compress_half_span(dout_rows + i * d, dout16 + i * hd, hd, 1, kBf16);
    const float* o = out.widen(out_offset(shape_, head_task) + i * d, hd, room);
    deltas[i] = km::attention_row_delta(dout_rows + i * d, o, hd);
  }
  std::fill(dout16 + seq * hd, dout16 + padded_seq_ * hd, uint16_t{0});
  auto* dq = at<float>(thread, layout_.dq);
  std::fill(dq, dq + seq * hd, 0.0f);
  for (int64_t key_tile = 0; key_tile < tile_count(shape_); ++key_tile) {
    backward_key_tile(din, head_task, key_tile, thread, failures);
  }
  const int64_t dq_rows = qkv_offset(shape_, head_task);
  for (int64_t i = 0; i < seq; ++i) din.write(dq_rows + i * 3 * d, dq + i * hd, hd);
}

// Key tile `key_tile` against every query that sees it (from the tile's first key on): their
// scores and dout's products with the tile's values, the probabilities and the scores'
// gradient in fp32 and their bf16 copies, then the tile's rows of dv and dk, and its share of
// dq.
void Bf16AttentionKernel::backward_key_tile(Gradient din, int64_t head_task, int64_t key_tile,
                                            int thread, std::atomic<int>& failures) const {
  const int64_t d = shape_.model_dim(), hd = shape_.head_dim, ld_in = 3 * d;
  const int64_t k0 = key_tile * kTile, cols = tile_size(shape_, key_tile), rows = shape_.seq - k0;
  const int64_t width = lane_width(cols);
  const size_t t = static_cast<size_t>(key_tile);
  const auto* q = at<uint16_t>(thread, layout_.q) + k0 * hd;  // the queries from k0 on
  const auto* k = at<uint16_t>(thread, layout_.k) + k0 * hd;
  const auto* v = at<uint16_t>(thread, layout_.v) + k0 * hd;
  const auto* dout16 = at<uint16_t>(thread, layout_.dout) + k0 * hd;
  auto* probs = at<float>(thread, layout_.scores);
  auto* grads = at<float>(thread, layout_.grads);
  auto* probs16 = at<uint16_t>(thread, layout_.probs16);
  auto* grads16 = at<uint16_t>(thread, layout_.grads16);
  auto* tile_out = at<float>(thread, layout_.tile);
  run(backward_scores_[t], thread, q, k, probs, failures);
  run(backward_scores_[t], thread, dout16, v, grads, failures);
  backward_tile_rows({k0, rows, k0, cols, width}, scale_, probs, grads, log_sum_exp(head_task),
                     at<float>(thread, layout_.rows));
  compress_half_span(probs, probs16, rows * width, 1, kBf16);
  compress_half_span(grads, grads16, rows * width, 1, kBf16);
  // dv = Pᵀ·dout and dk = dSᵀ·q, the tile's rows; dq += dS·k.
  const int64_t dk = qkv_offset(shape_, head_task) + d + k0 * ld_in;
  const int64_t dv = dk + d;
  run(backward_weights_[t], thread, probs16, dout16, tile_out, failures);
  for (int64_t r = 0; r < cols; ++r) din.write(dv + r * ld_in, tile_out + r * hd, hd);
  run(backward_weights_[t], thread, grads16, q, tile_out, failures);
  for (int64_t r = 0; r < cols; ++r) din.write(dk + r * ld_in, tile_out + r * hd, hd);
  run(backward_queries_[t], thread, grads16, k, at<float>(thread, layout_.dq) + k0 * hd, failures);
}

}  // namespace

std::unique_ptr<LayerKernel> make_bf16_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, Device& device) {
  return std::make_unique<Bf16AttentionKernel>(spec, binding, device);
}

}  // namespace scalescope::cpu_attention
