// GPT-2's causal self-attention on CPU: oneDNN batched matmuls for the six products, OpenMP
// loops for the copies into and out of per-head buffers and for the causal softmax, whose
// per-row math is kernel_math/attention_math.h (the CUDA kernel's too).
//
// The matmuls run on contiguous head-major copies [N·H, S, hd] of q, k and v rather than on
// strided views of the input: each head's matrix is then a plain [S, hd] block, which every
// oneDNN matmul implementation takes, and the copies cost one pass over the activations
// against the O(S²·D) products. Transposed operands (kᵀ, vᵀ, Pᵀ, dSᵀ) are the same memory
// described with the `acb` tag, so nothing is transposed by hand.
//
// Everything is planned and allocated at construction for the one batch shape: the per-head
// copies, the probabilities P [N·H, S, S] that forward keeps for backward, dP, and one
// scratchpad shared by the matmuls, which run one after another.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/kernel_math/attention_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;
using dnnl::memory;
using Tag = memory::format_tag;

// C[b] = op(A[b])·op(B[b]) over b < batches, row-major, C [m, n] and op(A) [m, k], op(B)
// [k, n]; a transposed operand is stored as the untransposed one ([k, m] for A, [n, k] for B).
struct Product {
  float* a;
  bool transpose_a;
  float* b;
  bool transpose_b;
  float* c;
  int64_t m, n, k;
};

// One oneDNN matmul bound to buffers fixed for the kernel's life. Running passes the stored C
// handles straight to dnnl_primitive_execute: the C++ execute() builds an argument map per
// call, which allocates.
class Matmul {
 public:
  Matmul(const dnnl::engine& engine, const dnnl::primitive_attr& attr, int64_t batches,
         const Product& p) {
    const auto desc = [&](int64_t rows, int64_t cols, bool transposed) {
      return transposed ? memory::desc({batches, rows, cols}, memory::data_type::f32, Tag::acb)
                        : memory::desc({batches, rows, cols}, memory::data_type::f32, Tag::abc);
    };
    const memory::desc a = desc(p.m, p.k, p.transpose_a);
    const memory::desc b = desc(p.k, p.n, p.transpose_b);
    const memory::desc c = desc(p.m, p.n, false);
    pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine);
    primitive_ = dnnl::matmul(pd_);
    bind(DNNL_ARG_SRC, memory(a, engine, p.a));
    bind(DNNL_ARG_WEIGHTS, memory(b, engine, p.b));
    bind(DNNL_ARG_DST, memory(c, engine, p.c));
    scratchpad_ = memory(pd_.scratchpad_desc(), engine, DNNL_MEMORY_NONE);
    if (scratchpad_bytes() > 0) bind(DNNL_ARG_SCRATCHPAD, scratchpad_);
  }

  size_t scratchpad_bytes() const { return pd_.scratchpad_desc().get_size(); }
  void use_scratchpad(void* buffer) const {
    if (scratchpad_bytes() > 0) scratchpad_.set_data_handle(buffer);
  }
  // oneDNN's name of the implementation ("brg:avx2", "gemm:jit"; "ref:any" would be slow).
  std::string implementation() const { return pd_.impl_info_str(); }

  void run(const dnnl::stream& stream) const {
    SS_CHECK_DNNL(dnnl::error::wrap_c_api(
        dnnl_primitive_execute(primitive_.get(), stream.get(), static_cast<int>(args_.size()),
                               args_.data()),
        "could not execute a matmul"));
  }

 private:
  void bind(int arg, memory m) {
    args_.push_back(dnnl_exec_arg_t{arg, m.get()});
    keep_.push_back(std::move(m));
  }

  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul primitive_;
  memory scratchpad_;
  std::vector<dnnl_exec_arg_t> args_;
  std::vector<memory> keep_;
};

class AttentionKernel final : public LayerKernel {
 public:
  AttentionKernel(const CausalSelfAttentionSpec& spec, const LayerBinding& b, Device& device)
      : shape_{b.in[0], b.in[1], spec.heads, b.in[2] / (3 * spec.heads)},
        scale_(km::attention_scale(shape_.head_dim)),
        threads_(std::max(1, device.threads())),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        heads_(device, 7 * head_bytes()),
        scores_(device, 2 * score_bytes()) {
    // A user scratchpad, allocated here: oneDNN's own would be allocated while running.
    attr_.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const int64_t s = shape_.seq;
    const int64_t hd = shape_.head_dim;
    float* q = head(0);
    float* k = head(1);
    float* v = head(2);
    float* y = head(3);  // the heads' outputs forward, dout's heads backward
    forward_ = {plan({q, false, k, true, probs(), s, s, hd}),
                plan({probs(), false, v, false, y, s, hd, s})};
    backward_ = {plan({probs(), true, y, false, head(6), s, hd, s}),        // dV = Pᵀ·dO
                 plan({y, false, v, true, grad_probs(), s, s, hd}),         // dP = dO·Vᵀ
                 plan({grad_probs(), false, k, false, head(4), s, hd, s}),  // dQ = dS·K
                 plan({grad_probs(), true, q, false, head(5), s, hd, s})};  // dK = dSᵀ·Q
    size_t bytes = 0;
    for (const Matmul* m : matmuls()) bytes = std::max(bytes, m->scratchpad_bytes());
    scratchpad_ = DeviceBuffer(device, bytes);
    for (const Matmul* m : matmuls()) m->use_scratchpad(scratchpad_.data());
  }

  void forward(const float* in, float* out, Stream&) override {
    const int64_t d = shape_.model_dim();
    for (int64_t part = 0; part < 3; ++part) to_heads(in, 3 * d, part * d, head(part));
    forward_[0].run(stream_);
    softmax_forward();
    forward_[1].run(stream_);
    from_heads(head(3), out, d, 0);
  }

  // REQUIRES (beyond LayerKernel's): no forward_eval since the last forward, whose
  // probabilities and per-head copies backward reads.
  void backward(const float*, const float*, const float* dout, float* din, Stream&) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const int64_t d = shape_.model_dim();
    to_heads(dout, d, 0, head(3));
    backward_[0].run(stream_);
    backward_[1].run(stream_);
    softmax_backward();
    backward_[2].run(stream_);
    backward_[3].run(stream_);
    for (int64_t part = 0; part < 3; ++part) from_heads(head(4 + part), din, 3 * d, part * d);
  }

  // oneDNN's matmuls are deterministic for a fixed thread count, and so are our loops.
  std::vector<KernelChoice> choices() const override {
    const auto names = [](const std::vector<Matmul>& ms) {
      std::vector<std::string> impls;
      for (const Matmul& m : ms) impls.push_back(m.implementation());
      return fmt::format("matmul {} + causal softmax loops", fmt::join(impls, " "));
    };
    return {{"forward", names(forward_), "fp32", "NSC", true, scratch_size()},
            {"backward-data", names(backward_), "fp32", "NSC", true, scratch_size()}};
  }

 private:
  size_t head_bytes() const { return static_cast<size_t>(shape_.head_elements()) * sizeof(float); }
  size_t score_bytes() const {
    return static_cast<size_t>(shape_.score_rows() * shape_.seq) * sizeof(float);
  }
  int64_t scratch_size() const { return static_cast<int64_t>(scratchpad_.bytes()); }

  // Head-major buffers [N, H, S, hd]: 0-2 q, k, v; 3 the heads' outputs or dout's; 4-6 dq,
  // dk, dv.
  float* head(int64_t i) const {
    return static_cast<float*>(heads_.data()) + i * shape_.head_elements();
  }
  // [N·H, S, S]: P, kept from forward for backward; then dP, turned into dS in place.
  float* probs() const { return static_cast<float*>(scores_.data()); }
  float* grad_probs() const { return probs() + shape_.score_rows() * shape_.seq; }

  Matmul plan(const Product& p) const {
    return Matmul(engine_, attr_, shape_.batch * shape_.heads, p);
  }
  std::vector<const Matmul*> matmuls() const {
    std::vector<const Matmul*> all;
    for (const Matmul& m : forward_) all.push_back(&m);
    for (const Matmul& m : backward_) all.push_back(&m);
    return all;
  }

  // Columns [column, column + D) of each row of [N, S, width] into the head-major `heads`,
  // and back: contiguous runs of hd floats either way.
  void to_heads(const float* rows, int64_t width, int64_t column, float* heads) const {
    const km::AttentionShape s = shape_;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads_)
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t h = 0; h < s.heads; ++h) {
        float* to = heads + (n * s.heads + h) * s.seq * s.head_dim;
        const float* from = rows + n * s.seq * width + column + h * s.head_dim;
        for (int64_t i = 0; i < s.seq; ++i) {
          std::copy(from + i * width, from + i * width + s.head_dim, to + i * s.head_dim);
        }
      }
    }
  }
  void from_heads(const float* heads, float* rows, int64_t width, int64_t column) const {
    const km::AttentionShape s = shape_;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads_)
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const float* from = heads + (n * s.heads + h) * s.seq * s.head_dim;
        float* to = rows + n * s.seq * width + column + h * s.head_dim;
        for (int64_t i = 0; i < s.seq; ++i) {
          std::copy(from + i * s.head_dim, from + (i + 1) * s.head_dim, to + i * width);
        }
      }
    }
  }

  // Row r of the score matrices is query position r mod S. In place: the scores become P.
  void softmax_forward() const {
    const int64_t len = shape_.seq;
    float* p = probs();
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t r = 0; r < shape_.score_rows(); ++r) {
      km::causal_softmax_row(p + r * len, p + r * len, r % len, len, scale_, km::RowShare{},
                             km::SerialReduce{});
    }
  }
  // dP becomes dS in place.
  void softmax_backward() const {
    const int64_t len = shape_.seq;
    const float* p = probs();
    float* dp = grad_probs();
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t r = 0; r < shape_.score_rows(); ++r) {
      km::causal_softmax_backward_row(p + r * len, dp + r * len, dp + r * len, r % len, len, scale_,
                                      km::RowShare{}, km::SerialReduce{});
    }
  }

  km::AttentionShape shape_;
  float scale_;
  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::primitive_attr attr_;
  DeviceBuffer heads_;   // 7 head-major buffers, see head()
  DeviceBuffer scores_;  // P and dP, see probs()
  DeviceBuffer scratchpad_;
  std::vector<Matmul> forward_;   // scores = Q·Kᵀ; Y = P·V
  std::vector<Matmul> backward_;  // dV, dP, dQ, dK
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_attention(const CausalSelfAttentionSpec& spec,
                                                const LayerBinding& binding, Device& device) {
  return std::make_unique<AttentionKernel>(spec, binding, device);
}

}  // namespace scalescope
