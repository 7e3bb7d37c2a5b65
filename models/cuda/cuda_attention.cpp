// GPT-2's causal self-attention on CUDA: cuBLAS strided-batched GEMMs for the products, on
// head-major copies [N·H, S, hd] of q, k and v made by our kernels, and our kernels for the
// causal scaled softmax (attention_ops.cu, math in kernel_math/attention_math.h).
//
// It keeps nothing from forward for backward: backward makes the head-major copies again from
// its input (which the model keeps for it) and recomputes the probabilities P [N·H, S, S] with
// the forward's product and softmax, the same bits where the input is the same (fp32, tf32;
// under 16 bits the model's restored input, as autocast's saved tensors). Every buffer of a
// pass, P and dP included, lives in the stream's workspace that every layer shares
// (CudaLibraries): quadratic in S, but once per stream rather than once per layer, as keeping
// P was. A fused kernel (flash attention's scheme, as the CPU kernel's) would need no S × S
// buffer at all.
//
// Under bf16 and fp16 every product multiplies 16-bit copies of its operands (q, k, v, dout's
// heads, P and dS; autocast's casts, as the dense layers) with fp32 accumulation into fp32
// results; the softmax and its backward stay fp32. P's copy lies in dP's buffer until dP is
// computed, dS's in P's once the softmax's backward has read P: only the four head copies take
// memory of their own.
#include <cublas_v2.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "models/cuda/attention_ops.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda/cuda_ops.h"
#include "models/kernel_math/attention_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// C[b] = op(A[b])·op(B[b]) over the N·H batches, row-major, C [m, n], op(A) [m, k] and op(B)
// [k, n]; a transposed operand is stored as the untransposed one ([k, m] for A, [n, k] for B).
// A and B are fp32, or both 16-bit copies; C is fp32.
struct Product {
  const void* a;
  bool transpose_a;
  const void* b;
  bool transpose_b;
  float* c;
  int m, n, k;
};

class AttentionKernel final : public LayerKernel {
 public:
  AttentionKernel(const CausalSelfAttentionSpec& spec, const LayerSpec& layer,
                  const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        shape_{b.in[0], b.in[1], spec.heads, b.in[2] / (3 * spec.heads)},
        batches_(to_int(shape_.batch * shape_.heads, "the batch times the heads", layer)),
        seq_(to_int(shape_.seq, "the sequence", layer)),
        head_dim_(to_int(shape_.head_dim, "the head size", layer)),
        scale_(km::attention_scale(shape_.head_dim)),
        // Chosen per kernel, not on the shared handle: see CublasHandle.
        compute_(half_ ? CUBLAS_COMPUTE_32F : gemm_compute_type(precision_)) {
    // cuBLAS's m, n and k are ints (S and hd, checked above) and its strides 64-bit; one
    // head's scores (S·S) are held to an int too.
    to_int(shape_.seq * shape_.seq, "the scores of one head (S·S)", layer);
    const int64_t half_heads = half_ ? kHalfHeadBuffers * shape_.head_elements() : 0;
    libraries_->reserve_workspace(
        static_cast<size_t>(kHeadBuffers * shape_.head_elements() + 2 * score_elements()) *
            sizeof(float) +
        static_cast<size_t>(half_heads) * sizeof(uint16_t));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    float* y_heads = head(s, kOutputHeads);
    probabilities(in, s);
    const void* probs = operand(scores(s, 0), score_elements(), scores(s, 1), s);
    gemm(s, {probs, false, head_operand(s, 2), false, y_heads, seq_, head_dim_, seq_});  // P·V
    cuda_ops::from_heads(shape_, y_heads, out, shape_.model_dim(), 0, s);
  }

  // Reads the input of the last forward (q, k and v), from which it recomputes P.
  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const cudaStream_t s = cuda_stream(stream);
    const int64_t d = shape_.model_dim();
    probabilities(in, s);
    const float* probs = scores(s, 0);
    float* grad_probs = scores(s, 1);
    cuda_ops::to_heads(shape_, dout, d, 0, head(s, kOutputHeads), s);
    round_head(s, kOutputHeads);
    const void* dout_heads = head_operand(s, kOutputHeads);
    const void* v = head_operand(s, 2);
    // P's 16-bit copy in dP's place, read before dP is written there.
    const void* probs_operand = operand(probs, score_elements(), grad_probs, s);
    gemm(s, {probs_operand, true, dout_heads, false, head(s, kGradHeads + 2), seq_, head_dim_,
             seq_});                                                           // dV
    gemm(s, {dout_heads, false, v, true, grad_probs, seq_, seq_, head_dim_});  // dO·Vᵀ
    cuda_ops::causal_softmax_backward(shape_, probs, grad_probs, grad_probs, scale_, s);
    // dS's 16-bit copy in P's place, which the softmax's backward was the last to read.
    const void* grad_scores = operand(grad_probs, score_elements(), scores(s, 0), s);
    gemm(s, {grad_scores, false, head_operand(s, 1), false, head(s, kGradHeads), seq_, head_dim_,
             seq_});  // dS·K
    gemm(s, {grad_scores, true, head_operand(s, 0), false, head(s, kGradHeads + 1), seq_, head_dim_,
             seq_});  // dSᵀ·Q
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::from_heads(shape_, head(s, kGradHeads + part), din, 3 * d, part * d, s);
    }
  }

  // With atomics not allowed (a handle's default), cuBLAS's results are bit-identical run after
  // run on one GPU; our softmax kernels add in a fixed order.
  // 16-bit math named as the CPU kernels name it ("bf16").
  std::vector<KernelChoice> choices() const override {
    const std::string math = half_ ? to_string(precision_) : compute_type_name(compute_);
    const std::string algorithm =
        "cublasGemmStridedBatchedEx CUBLAS_GEMM_DEFAULT + causal softmax kernels";
    return {{"forward", algorithm, math, "NSC", true, 0},
            {"backward-data", algorithm, math, "NSC", true, 0}};
  }

 private:
  // The stream's workspace during a pass: head-major buffers [N, H, S, hd], q, k and v (0-2),
  // the heads' outputs in forward or dout's in backward (kOutputHeads), dq, dk and dv in
  // backward (kGradHeads on); then two of [N·H, S, S], P (0) and backward's dP (1), turned into
  // dS in place; then in 16 bits the copies of the first four heads (kHalfHeadBuffers).
  static constexpr int64_t kOutputHeads = 3;
  static constexpr int64_t kGradHeads = 4;
  static constexpr int64_t kHeadBuffers = 7;
  static constexpr int64_t kHalfHeadBuffers = 4;
  int64_t score_elements() const { return shape_.score_rows() * shape_.seq; }
  float* head(cudaStream_t s, int64_t i) const {
    return static_cast<float*>(libraries_->workspace(s)) + i * shape_.head_elements();
  }
  float* scores(cudaStream_t s, int64_t i) const {
    return head(s, kHeadBuffers) + i * score_elements();
  }
  // Head buffer i's 16-bit copy (i < kHalfHeadBuffers; 16 bits only).
  uint16_t* half_head(cudaStream_t s, int64_t i) const {
    return reinterpret_cast<uint16_t*>(scores(s, 2)) + i * shape_.head_elements();
  }
  // What the products read of head buffer i: the buffer itself, or its 16-bit copy once
  // round_head() has made it.
  const void* head_operand(cudaStream_t s, int64_t i) const {
    return half_ ? static_cast<const void*>(half_head(s, i)) : head(s, i);
  }
  // `count` values as the products read them: themselves, or in 16 bits their copy in `to`.
  const void* operand(const float* values, int64_t count, void* to, cudaStream_t s) const {
    return sixteen_bit_operand(values, count, to, half_, s);
  }
  // Head buffer i's 16-bit copy made from it (nothing without 16 bits).
  void round_head(cudaStream_t s, int64_t i) const {
    if (half_) operand(head(s, i), shape_.head_elements(), half_head(s, i), s);
  }
  // q, k and v head-major from the input rows [N, S, 3D] (and their 16-bit copies), and
  // P = softmax(scale·Q·Kᵀ), causal.
  void probabilities(const float* in, cudaStream_t s) const {
    const int64_t d = shape_.model_dim();
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::to_heads(shape_, in, 3 * d, part * d, head(s, part), s);
      round_head(s, part);
    }
    float* probs = scores(s, 0);
    gemm(s, {head_operand(s, 0), false, head_operand(s, 1), true, probs, seq_, seq_,
             head_dim_});  // Q·Kᵀ
    cuda_ops::causal_softmax_forward(shape_, probs, probs, scale_, s);
  }

  // cuBLAS is column-major, where a row-major [r, c] buffer reads as its transpose [c, r] with
  // leading dimension c. So C = op(A)·op(B) row-major is Cᵀ = op(B)ᵀ·op(A)ᵀ column-major: B
  // goes first, transposed by cuBLAS exactly when it is transposed here.
  void gemm(cudaStream_t s, const Product& p) const {
    const float one = 1.0f;
    const float zero = 0.0f;
    const long long stride_a = static_cast<long long>(p.m) * p.k;
    const long long stride_b = static_cast<long long>(p.k) * p.n;
    const long long stride_c = static_cast<long long>(p.m) * p.n;
    SS_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        libraries_->cublas(s), p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b, operand_type_,
        p.transpose_b ? p.k : p.n, stride_b, p.a, operand_type_, p.transpose_a ? p.m : p.k,
        stride_a, &zero, p.c, CUDA_R_32F, p.n, stride_c, batches_, compute_, CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<CudaLibraries> libraries_;
  km::AttentionShape shape_;
  int batches_, seq_, head_dim_;
  float scale_;
  Precision precision_ = precision();  // at construction, as every kernel reads it
  std::optional<km::HalfFormat> half_ = half_format(precision_);  // the operands', if 16-bit
  cublasComputeType_t compute_;
  cudaDataType_t operand_type_ = gemm_operand_type(half_);
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<AttentionKernel>(spec, LayerSpec(spec), binding, device);
}

}  // namespace scalescope
