// GPT-2's causal self-attention on CUDA: cuBLAS strided-batched GEMMs for the six products, on
// head-major copies [N·H, S, hd] of q, k and v made by our kernels, and our kernels for the
// causal scaled softmax (attention_ops.cu, math in kernel_math/attention_math.h). Unlike the
// CPU kernel (models/cpu/cpu_attention.cpp, fused, one value per row kept), it keeps the
// probabilities P [N·H, S, S] from forward for backward: memory quadratic in S.
//
// Planned at construction for the one batch shape. The layer owns what forward keeps for
// backward: the copies of q, k and v and P. Its transients, the heads' outputs (or dout's),
// dq, dk, dv and dP, live in the stream's workspace that every layer shares (CudaLibraries).
#include <cublas_v2.h>

#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
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
        compute_(gemm_compute_type(precision())),
        heads_(float_buffer(device, 3 * shape_.head_elements())),
        probs_(float_buffer(device, score_elements())) {
    // cuBLAS's strides are 64-bit, but m, n and k are ints: S·S and S·hd must fit as well.
    to_int(shape_.seq * shape_.seq, "the scores of one head (S·S)", layer);
    libraries_->reserve_workspace(
        static_cast<size_t>(4 * shape_.head_elements() + score_elements()) * sizeof(float));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    const int64_t d = shape_.model_dim();
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::to_heads(shape_, in, 3 * d, part * d, head(part), s);
    }
    float* y_heads = transient(s, 0);
    gemm(s, {head(0), false, head(1), true, probs(), seq_, seq_, head_dim_});  // Q·Kᵀ
    cuda_ops::causal_softmax_forward(shape_, probs(), probs(), scale_, s);
    gemm(s, {probs(), false, head(2), false, y_heads, seq_, head_dim_, seq_});  // P·V
    cuda_ops::from_heads(shape_, y_heads, out, d, 0, s);
  }

  // Reads P and the per-head copies of the last forward.
  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const cudaStream_t s = cuda_stream(stream);
    const int64_t d = shape_.model_dim();
    float* dout_heads = transient(s, 0);
    float* grad_heads = transient(s, 1);  // dq, dk, dv, one after another
    float* grad_probs = transient(s, 4);
    const int64_t e = shape_.head_elements();
    cuda_ops::to_heads(shape_, dout, d, 0, dout_heads, s);
    gemm(s, {probs(), true, dout_heads, false, grad_heads + 2 * e, seq_, head_dim_, seq_});  // dV
    gemm(s, {dout_heads, false, head(2), true, grad_probs, seq_, seq_, head_dim_});  // dO·Vᵀ
    cuda_ops::causal_softmax_backward(shape_, probs(), grad_probs, grad_probs, scale_, s);
    gemm(s, {grad_probs, false, head(1), false, grad_heads, seq_, head_dim_, seq_});     // dS·K
    gemm(s, {grad_probs, true, head(0), false, grad_heads + e, seq_, head_dim_, seq_});  // dSᵀ·Q
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::from_heads(shape_, grad_heads + part * e, din, 3 * d, part * d, s);
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
  int64_t score_elements() const { return shape_.score_rows() * shape_.seq; }
  // Head-major buffers [N, H, S, hd] of q, k and v (i = 0, 1, 2), kept from forward.
  float* head(int64_t i) const { return floats(heads_) + i * shape_.head_elements(); }
  // [N·H, S, S]: P, kept from forward for backward.
  float* probs() const { return floats(probs_); }
  // The stream's workspace from head-major buffer `i` on: forward's heads' outputs (0);
  // backward's dout heads (0), dq, dk, dv (1-3) and then dP [N·H, S, S] (4 on), turned into dS
  // in place.
  float* transient(cudaStream_t s, int64_t i) const {
    return static_cast<float*>(libraries_->workspace(s)) + i * shape_.head_elements();
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
  DeviceBuffer heads_;  // q, k, v head-major, see head()
  DeviceBuffer probs_;  // P, see probs()
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<AttentionKernel>(spec, LayerSpec(spec), binding, device);
}

}  // namespace scalescope
