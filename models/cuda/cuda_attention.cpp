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
#include <cublas_v2.h>

#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "models/cuda/attention_ops.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_libraries.h"
#include "models/kernel_math/attention_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// C[b] = op(A[b])·op(B[b]) over the N·H batches, row-major, C [m, n], op(A) [m, k] and op(B)
// [k, n]; a transposed operand is stored as the untransposed one ([k, m] for A, [n, k] for B).
struct Product {
  const float* a;
  bool transpose_a;
  const float* b;
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
        compute_(gemm_compute_type(precision())) {
    // cuBLAS's strides are 64-bit, but m, n and k are ints: S·S and S·hd must fit as well.
    to_int(shape_.seq * shape_.seq, "the scores of one head (S·S)", layer);
    libraries_->reserve_workspace(
        static_cast<size_t>(kHeadBuffers * shape_.head_elements() + 2 * score_elements()) *
        sizeof(float));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    float* y_heads = head(s, kOutputHeads);
    probabilities(in, s);
    gemm(s, {scores(s, 0), false, head(s, 2), false, y_heads, seq_, head_dim_, seq_});  // P·V
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
    float* dout_heads = head(s, kOutputHeads);
    float* grad_probs = scores(s, 1);
    cuda_ops::to_heads(shape_, dout, d, 0, dout_heads, s);
    gemm(s,
         {probs, true, dout_heads, false, head(s, kGradHeads + 2), seq_, head_dim_, seq_});  // dV
    gemm(s, {dout_heads, false, head(s, 2), true, grad_probs, seq_, seq_, head_dim_});  // dO·Vᵀ
    cuda_ops::causal_softmax_backward(shape_, probs, grad_probs, grad_probs, scale_, s);
    gemm(s, {grad_probs, false, head(s, 1), false, head(s, kGradHeads), seq_, head_dim_,
             seq_});  // dS·K
    gemm(s, {grad_probs, true, head(s, 0), false, head(s, kGradHeads + 1), seq_, head_dim_,
             seq_});  // dSᵀ·Q
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::from_heads(shape_, head(s, kGradHeads + part), din, 3 * d, part * d, s);
    }
  }

  // With atomics not allowed (a handle's default), cuBLAS's results are bit-identical run after
  // run on one GPU; our softmax kernels add in a fixed order.
  std::vector<KernelChoice> choices() const override {
    const char* math = compute_type_name(compute_);
    const std::string algorithm =
        "cublasGemmStridedBatchedEx CUBLAS_GEMM_DEFAULT + causal softmax kernels";
    return {{"forward", algorithm, math, "NSC", true, 0},
            {"backward-data", algorithm, math, "NSC", true, 0}};
  }

 private:
  // The stream's workspace during a pass: head-major buffers [N, H, S, hd], q, k and v (0-2),
  // the heads' outputs in forward or dout's in backward (kOutputHeads), dq, dk and dv in
  // backward (kGradHeads on); then two of [N·H, S, S], P (0) and backward's dP (1), turned into
  // dS in place.
  static constexpr int64_t kOutputHeads = 3;
  static constexpr int64_t kGradHeads = 4;
  static constexpr int64_t kHeadBuffers = 7;
  int64_t score_elements() const { return shape_.score_rows() * shape_.seq; }
  float* head(cudaStream_t s, int64_t i) const {
    return static_cast<float*>(libraries_->workspace(s)) + i * shape_.head_elements();
  }
  float* scores(cudaStream_t s, int64_t i) const {
    return head(s, kHeadBuffers) + i * score_elements();
  }
  // q, k and v head-major from the input rows [N, S, 3D], and P = softmax(scale·Q·Kᵀ), causal.
  void probabilities(const float* in, cudaStream_t s) const {
    const int64_t d = shape_.model_dim();
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::to_heads(shape_, in, 3 * d, part * d, head(s, part), s);
    }
    float* probs = scores(s, 0);
    gemm(s, {head(s, 0), false, head(s, 1), true, probs, seq_, seq_, head_dim_});  // Q·Kᵀ
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
        p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b, CUDA_R_32F,
        p.transpose_b ? p.k : p.n, stride_b, p.a, CUDA_R_32F, p.transpose_a ? p.m : p.k, stride_a,
        &zero, p.c, CUDA_R_32F, p.n, stride_c, batches_, compute_, CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<CudaLibraries> libraries_;
  km::AttentionShape shape_;
  int batches_, seq_, head_dim_;
  float scale_;
  cublasComputeType_t compute_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<AttentionKernel>(spec, LayerSpec(spec), binding, device);
}

}  // namespace scalescope
