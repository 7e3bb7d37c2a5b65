// GPT-2's causal self-attention on CUDA: cuBLAS strided-batched GEMMs for the products, on
// head-major copies [N·H, S, hd] of q, k and v made by our kernels, and our kernels for the
// causal scaled softmax (attention_ops.cu, math in kernel_math/attention_math.h), over chunks
// of query rows in the order attention_chunks.h gives (why chunks: there).
//
// It keeps from forward for backward only each query's softmax stats (a max and a sum, 8 bytes
// a query and head): backward makes the head-major copies again from its input (which the
// model keeps for it) and recomputes each chunk's scores with the forward's product, the same
// bits where the input is the same (fp32, tf32; under 16 bits the model's saved 16-bit copy of
// it, read as it is, as autocast's saved tensors), and the probabilities from them and the
// stats, reading each score once. Every other buffer of a pass lives in the stream's workspace
// that every layer shares (CudaLibraries): the head buffers and two chunks of scores (under 16
// bits also the scores' and heads' 16-bit copies), linear in S.
//
// With SCALESCOPE_ATTENTION=flash, under bf16 and fp16, both passes run fused instead
// (flash_attention.cu, flash_attention_backward.cu: no score in global memory) on the same head
// buffers and kept stats; attention_chunks::flash_runs says where they can.
#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "models/cuda/attention_chunks.h"
#include "models/cuda/attention_ops.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda/cuda_ops.h"
#include "models/kernel_math/attention_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

namespace ac = attention_chunks;

class AttentionKernel final : public LayerKernel {
 public:
  AttentionKernel(const CausalSelfAttentionSpec& spec, const LayerSpec& layer,
                  const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        shape_{b.in[0], b.in[1], spec.heads, b.in[2] / (3 * spec.heads)},
        batches_(to_int(shape_.batch * shape_.heads, "the batch times the heads", layer)),
        chunk_rows_(ac::chunk_rows(shape_, ac::chunk_rows_from_environment())),
        scale_(km::attention_scale(shape_.head_dim)),
        // Chosen per kernel, not on the shared handle: see CublasHandle.
        compute_(half_ ? CUBLAS_COMPUTE_32F : gemm_compute_type(precision_)),
        flash_(flash_runs(device)),
        workspace_(shape_, chunk_rows_, half_.has_value(), flash_),
        stats_(float_buffer(device, stats_floats(shape_))) {
    // cuBLAS's m, n, k and leading dimensions are ints (at most S and hd) and its strides
    // 64-bit.
    to_int(shape_.seq, "the sequence", layer);
    to_int(shape_.head_dim, "the head size", layer);
    libraries_->reserve_workspace(static_cast<size_t>(workspace_.size()));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    to_heads(in, s);
    forward_from_heads(out, s);
  }

  // Reads the input of the last forward (q, k and v), from which it recomputes P with the
  // softmax stats that forward kept; the fused passes also its output (backward_reads: both).
  // REQUIRES (beyond LayerKernel's): no forward_eval since the last forward.
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const cudaStream_t s = cuda_stream(stream);
    to_heads(in, s);
    backward_from_heads(dout, din, {out, nullptr}, s);
  }

  // Under 16 bits the products read 16-bit copies of q, k and v: the model's saved copy of the
  // input holds those values already (rounded as to_half_heads rounds), so both passes may take
  // their heads from it instead of from fp32 rows, and backward needs no restored input.
  bool forwards_from_saved(km::HalfFormat format) const override { return reads_saved(format); }
  void forward_saved(const uint16_t* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    saved_to_heads(in, s);
    forward_from_heads(out, s);
  }
  // And its output straight into the saved copy where c_proj, its reader, reads only that: the
  // heads' fp32 result rounded as the model's save rounds, no fp32 rows.
  SavedOutput forwards_into_saved(km::HalfFormat format) const override {
    return half_ == format ? SavedOutput::kFromSavedInput : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          km::HalfFormat format, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    saved_to_heads(saved_in, s);
    products_forward(s);
    cuda_ops::from_heads_to_half(shape_, buffer(s, ac::Buffer::kOut), out, format,
                                 shape_.model_dim(), 0, s);
  }
  bool reads_saved(km::HalfFormat format) const override { return half_ == format; }
  void backward_saved(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                      Stream& stream) override {
    if (din == nullptr) return;
    const cudaStream_t s = cuda_stream(stream);
    saved_to_heads(in, s);
    backward_from_heads(dout, din, {nullptr, out}, s);
  }

  // With atomics not allowed (a handle's default), cuBLAS's results are bit-identical run after
  // run on one GPU; our softmax kernels add in a fixed order, and the chunks' shares of dK and
  // dV are added in a fixed order. 16-bit math named as the CPU kernels name it ("bf16").
  std::vector<KernelChoice> choices() const override {
    const std::string math = half_ ? to_string(precision_) : compute_type_name(compute_);
    const std::string algorithm = fmt::format(
        "cublasGemmStridedBatchedEx CUBLAS_GEMM_DEFAULT + causal softmax kernels, {} query rows "
        "a chunk",
        chunk_rows_);
    const std::string flash =
        fmt::format("fused flash attention (WMMA tensor cores, {} queries by {} keys a tile)",
                    km::FlashTiling::kQueryRows, km::FlashTiling::kKeyTile);
    return {{"forward", flash_ ? flash : algorithm, math, "NSC", true, 0},
            {"backward-data", flash_ ? flash : algorithm, math, "NSC", true, 0}};
  }

 private:
  // attention_chunks.h's steps on stream s.
  struct Exec {
    const AttentionKernel& kernel;
    cudaStream_t s;
    bool half() const { return kernel.half_.has_value(); }
    void gemm(const ac::Product& p) const { kernel.gemm(s, ac::column_major(p)); }
    void softmax_forward(const km::ScoreBlock& b, ac::Buffer scores, bool fp32,
                         std::optional<ac::Buffer> half) const {
      float* p = kernel.buffer(s, scores);
      cuda_ops::causal_softmax_forward(b, p, fp32 ? p : nullptr, kernel.scale_, copy(half),
                                       kernel.row_stats(), s);
    }
    void softmax_from_stats(const km::ScoreBlock& b, ac::Buffer scores, bool fp32,
                            std::optional<ac::Buffer> half) const {
      float* p = kernel.buffer(s, scores);
      cuda_ops::causal_softmax_from_stats(b, p, fp32 ? p : nullptr, kernel.scale_, copy(half),
                                          kernel.row_stats(), s);
    }
    void softmax_backward(const km::ScoreBlock& b, ac::Buffer probs, ac::Buffer grads, bool fp32,
                          std::optional<ac::Buffer> half, bool from_scores) const {
      float* g = kernel.buffer(s, grads);
      cuda_ops::causal_softmax_backward(b, kernel.buffer(s, probs), g, fp32 ? g : nullptr,
                                        kernel.scale_, copy(half),
                                        from_scores ? kernel.row_stats() : km::RowStatsAt{}, s);
    }
    // Where a softmax kernel writes its results' 16-bit copy (nowhere without one).
    km::HalfRow copy(std::optional<ac::Buffer> half) const {
      if (!half) return {};
      return {reinterpret_cast<uint16_t*>(kernel.buffer(s, *half)), *kernel.half_};
    }
  };

  // The passes once q, k and v are in their head buffers (their 16-bit copies under 16 bits).
  void forward_from_heads(float* out, cudaStream_t s) const {
    products_forward(s);
    cuda_ops::from_heads(shape_, buffer(s, ac::Buffer::kOut), out, shape_.model_dim(), 0, s);
  }
  // The forward's products and softmax, into the kOut head buffer, keeping the rows' stats.
  void products_forward(cudaStream_t s) const {
    if (flash_) {
      cuda_ops::flash_attention_forward(shape_, half_heads(s, ac::Buffer::kQ),
                                        half_heads(s, ac::Buffer::kK),
                                        half_heads(s, ac::Buffer::kV), *half_, scale_,
                                        buffer(s, ac::Buffer::kOut), row_stats().at, s);
      return;
    }
    Exec exec{*this, s};
    ac::Passes<Exec>(shape_, chunk_rows_, exec).forward();
  }

  // The layer's output as backward is given it: fp32 rows, or the model's saved 16-bit copy.
  struct OutputRows {
    const float* fp32;
    const uint16_t* half;
  };
  void backward_from_heads(const float* dout, float* din, OutputRows out, cudaStream_t s) const {
    const int64_t d = shape_.model_dim();
    to_heads(dout, d, 0, ac::Buffer::kOut, s);
    if (flash_) {
      flash_backward(dout, out, s);
    } else {
      Exec exec{*this, s};
      ac::Passes<Exec>(shape_, chunk_rows_, exec).backward();
    }
    const ac::Buffer grads[] = {ac::Buffer::kGradQ, ac::Buffer::kGradK, ac::Buffer::kGradV};
    for (int64_t part = 0; part < 3; ++part) {
      cuda_ops::from_heads(shape_, buffer(s, grads[part]), din, 3 * d, part * d, s);
    }
  }

  // The fused backward, with dO's heads in kOut's 16-bit copy; each row's delta (dO·O) from the
  // rows of dout and of the output, into kScores.
  void flash_backward(const float* dout, OutputRows out, cudaStream_t s) const {
    using B = ac::Buffer;
    const cuda_ops::FlashBackwardTensors t{shape_,
                                           half_heads(s, B::kQ),
                                           half_heads(s, B::kK),
                                           half_heads(s, B::kV),
                                           half_heads(s, B::kOut),
                                           dout,
                                           out.fp32,
                                           out.half,
                                           row_stats().at,
                                           buffer(s, B::kScores),
                                           buffer(s, B::kGradQ),
                                           buffer(s, B::kGradK),
                                           buffer(s, B::kGradV)};
    cuda_ops::flash_attention_backward(t, *half_, scale_, s);
  }
  // Head buffer b's 16-bit copy.
  const uint16_t* half_heads(cudaStream_t s, ac::Buffer b) const {
    return reinterpret_cast<const uint16_t*>(buffer(s, ac::half_copy(b)));
  }

  // Whether the passes run fused (ac::flash_runs, SCALESCOPE_ATTENTION).
  bool flash_runs(const CudaDevice& device) const {
    int optin = 0;
    SS_CHECK_CUDA(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.id().index));
    const int64_t bytes =
        std::max(cuda_ops::flash_attention_shared_bytes(shape_.head_dim),
                 cuda_ops::flash_attention_backward_shared_bytes(shape_.head_dim));
    return ac::flash_runs(ac::kind_from_environment(), half_.has_value(), shape_, bytes, optin);
  }

  // Floats of the kept stats: a SoftmaxRowStats for each query of each sequence and head.
  static int64_t stats_floats(const km::AttentionShape& s) {
    return s.batch * s.heads * s.seq *
           static_cast<int64_t>(sizeof(km::SoftmaxRowStats) / sizeof(float));
  }
  km::RowStatsAt row_stats() const {
    return {reinterpret_cast<km::SoftmaxRowStats*>(floats(stats_)), shape_.seq};
  }

  // Buffer b's start in the stream's workspace (ac::Workspace), as floats (a 16-bit buffer's
  // bytes start there too).
  float* buffer(cudaStream_t s, ac::Buffer b) const {
    char* base = static_cast<char*>(libraries_->workspace(s));
    return reinterpret_cast<float*>(base + workspace_.offset(b));
  }
  // Columns [column, column + D) of rows [N, S, width] head-major into head buffer b (kQ to
  // kOut), or under 16 bits into its 16-bit copy only: what the products read.
  void to_heads(const float* rows, int64_t width, int64_t column, ac::Buffer b,
                cudaStream_t s) const {
    if (half_) {
      const km::HalfRow heads{reinterpret_cast<uint16_t*>(buffer(s, ac::half_copy(b))), *half_};
      cuda_ops::to_half_heads(shape_, rows, width, column, heads, s);
    } else {
      cuda_ops::to_heads(shape_, rows, width, column, buffer(s, b), s);
    }
  }
  // q, k and v head-major from the input rows [N, S, 3D] (16-bit copies only under 16 bits).
  void to_heads(const float* in, cudaStream_t s) const {
    const int64_t d = shape_.model_dim();
    const ac::Buffer parts[] = {ac::Buffer::kQ, ac::Buffer::kK, ac::Buffer::kV};
    for (int64_t part = 0; part < 3; ++part) to_heads(in, 3 * d, part * d, parts[part], s);
  }
  // The same from the model's saved 16-bit copy of the input rows.
  void saved_to_heads(const uint16_t* in, cudaStream_t s) const {
    const int64_t d = shape_.model_dim();
    const ac::Buffer parts[] = {ac::Buffer::kQ, ac::Buffer::kK, ac::Buffer::kV};
    for (int64_t part = 0; part < 3; ++part) {
      auto* heads = reinterpret_cast<uint16_t*>(buffer(s, ac::half_copy(parts[part])));
      cuda_ops::half_rows_to_heads(shape_, in, 3 * d, part * d, heads, s);
    }
  }
  // Operand m's batch 0, its offset in elements of the operand type.
  const void* operand(cudaStream_t s, const ac::Matrix& m) const {
    if (half_) return reinterpret_cast<const uint16_t*>(buffer(s, m.buffer)) + m.offset;
    return buffer(s, m.buffer) + m.offset;
  }
  // p in column-major terms (ac::column_major).
  void gemm(cudaStream_t s, const ac::Product& p) const {
    const float one = 1.0f;
    SS_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        libraries_->cublas(s), p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(p.m), static_cast<int>(p.n),
        static_cast<int>(p.k), &one, operand(s, p.a), operand_type_, static_cast<int>(p.a.ld),
        p.a.batch_stride, operand(s, p.b), operand_type_, static_cast<int>(p.b.ld),
        p.b.batch_stride, &p.beta, buffer(s, p.c.buffer) + p.c.offset, CUDA_R_32F,
        static_cast<int>(p.c.ld), p.c.batch_stride, batches_, compute_, CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<CudaLibraries> libraries_;
  km::AttentionShape shape_;
  int batches_;
  int64_t chunk_rows_;
  float scale_;
  Precision precision_ = precision();  // at construction, as every kernel reads it
  std::optional<km::HalfFormat> half_ = half_format(precision_);  // the operands', if 16-bit
  cublasComputeType_t compute_;
  cudaDataType_t operand_type_ = gemm_operand_type(half_);
  bool flash_;  // whether the passes run fused
  ac::Workspace workspace_;
  DeviceBuffer stats_;  // the last forward's softmax stats, [N·H, S], read by backward
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<AttentionKernel>(spec, LayerSpec(spec), binding, device);
}

}  // namespace scalescope
