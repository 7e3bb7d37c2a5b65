// Dense layers on cuBLAS: y = x·Wᵀ + b with x [N, in] and W [out, in] row-major, N the rows
// (the samples, or every position of every sample for sequences [batch, S, in]). cuBLAS is
// column-major, where these buffers read as xᵀ [in, N], W as Wᵀ [in, out] and y as yᵀ [out, N]:
//   forward   yᵀ  = W·xᵀ       gemm(T, N), m = out, n = N,  k = in
//   weights   dWᵀ = xᵀ·dy      gemm(N, T), m = in,  n = out, k = N   (dW [out, in] row-major)
//   data      dxᵀ = Wᵀ·dyᵀ     gemm(N, N), m = in,  n = N,  k = out
//
// Under bf16 and fp16 the operands x, W and dy are first rounded into 16-bit copies in the
// stream's shared workspace (autocast's casts), and cuBLAS multiplies those with fp32
// accumulation into the fp32 y, dW and dx. The copies are made again in backward rather than
// kept from forward, so that a layer holds no 16-bit memory between its passes.
//
// cuBLAS's tensor-core kernels want the output's columns and every leading dimension in
// multiples of 8 elements (16-byte loads): GPT-2's 50257-word head, at neither, took 15.0 ms of
// GEMMs a step on an H100 in TF32, against 5.7 ms with the vocabulary padded to 50304; padding
// the rows alone (ldc 50264, m still 50257) made it slower still (18.4 ms). So a large layer with
// such a width splits each GEMM by columns into an aligned part (the first units - units % 8)
// and the few columns left, and computes in chunks of rows through a buffer whose rows are
// padded to a multiple of 8 (in the workspace, at most kChunkBytes), copying each chunk of y out
// of it and each chunk of dy into it (cuda_ops::copy_pitched_rows). dW and dx add up over the parts
// and chunks in a fixed order, so they stay deterministic.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda/cuda_ops.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

constexpr int64_t kRowAlignment = 8;                 // elements: 32 bytes of fp32, 16 of 16-bit
constexpr int64_t kPaddedFrom = int64_t{1} << 22;    // y's elements: smaller layers gain nothing
constexpr int64_t kChunkBytes = int64_t{256} << 20;  // the padded buffer's size at most

// The rows of y and dy as the GEMMs see them: `pitch` elements apart, `chunk` at a time, and
// their columns in parts: [0, aligned) and [aligned, units). A layer that needs no padding has
// pitch == aligned == units and one chunk of every row.
struct RowPlan {
  int pitch = 0;
  int chunk = 0;
  int aligned = 0;
  bool padded(int units) const { return pitch != units; }
};

RowPlan row_plan(int rows, int units) {
  const int64_t elements = int64_t{rows} * units;
  if (units % kRowAlignment == 0 || elements < kPaddedFrom) return {units, rows, units};
  const int64_t pitch = (units + kRowAlignment - 1) / kRowAlignment * kRowAlignment;
  // Two chunks at least, so that the sums over chunks always run where padding does; chunks of
  // a multiple of 64 rows, a whole number of the GEMMs' tiles.
  const int64_t chunks =
      std::max<int64_t>(2, (int64_t{rows} * pitch * 4 + kChunkBytes - 1) / kChunkBytes);
  const int64_t chunk = ((rows + chunks - 1) / chunks + 63) / 64 * 64;
  return {static_cast<int>(pitch), static_cast<int>(std::min<int64_t>(chunk, rows)),
          static_cast<int>(units - units % kRowAlignment)};
}

// A range of columns of y (rows of W) that one GEMM computes.
struct Columns {
  int first = 0;
  int count = 0;
};

class DenseKernel final : public LayerKernel {
 public:
  DenseKernel(const DenseSpec& d, const LayerSpec& spec, const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        rows_(to_int(b.in.numel() / b.in[b.in.rank() - 1], "the rows", spec)),
        in_(to_int(b.in[b.in.rank() - 1], "the input features", spec)),
        units_(to_int(d.units, "the units", spec)),
        rows_plan_(row_plan(rows_, units_)),
        half_(half_format(precision_)),
        // Chosen per kernel, not on the shared handle: see CublasHandle.
        compute_(half_ ? CUBLAS_COMPUTE_32F : gemm_compute_type(precision_)),
        weight_(b.params[0].data),
        bias_(d.bias ? b.params[1].data : nullptr),
        weight_grad_(b.grads[0].data),
        bias_grad_(d.bias ? b.grads[1].data : nullptr),
        bias_scratch_(
            float_buffer(device, d.bias ? cuda_ops::bias_grad_scratch(rows_, units_) : 0)) {
    to_int(int64_t{rows_plan_.chunk} * rows_plan_.pitch, "a chunk of the padded output", spec);
    libraries_->reserve_workspace(region_offset(kRegions));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    forward_from(operand(kInput, in, s), out, s);
  }

  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    backward_from(operand(kInput, in, s), dout, din, s);
  }

  // In 16 bits both passes read the model's saved 16-bit copy of the input: the values
  // operand() would round into a copy of its own (the model rounds them as it does), without
  // the copy, nor in backward the restore of the input from that copy.
  bool forwards_from_saved(km::HalfFormat format) const override { return reads_saved(format); }
  void forward_saved(const uint16_t* in, float* out, Stream& stream) override {
    forward_from(in, out, cuda_stream(stream));
  }
  bool reads_saved(km::HalfFormat format) const override { return half_ == format; }
  void backward_saved(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                      Stream& stream) override {
    backward_from(in, dout, din, cuda_stream(stream));
  }

  // And where every reader of the output reads only its saved copy (GELU, attention: the model
  // asks), forward writes that copy: the GEMMs' fp32 result in the workspace, then y + b rounded
  // into the copy in one pass, where forward wrote y, added b in place, and the model read y
  // again to round it. The same bits; not for a padded layer (GPT-2's head, read by the loss).
  SavedOutput forwards_into_saved(km::HalfFormat format) const override {
    return half_ == format && !padded() ? SavedOutput::kFromSavedInput : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          km::HalfFormat format, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    auto* y = static_cast<float*>(region(kOut, s));
    products(saved_in, y, s);
    if (bias_ != nullptr) {
      cuda_ops::bias_add_to_half(y, bias_, out, rows_, units_, format, s);
    } else {
      cuda_ops::compress_gradients(y, out, int64_t{rows_} * units_, 1, format, s);
    }
  }

  // cuBLAS picks its GEMM kernel itself (CUBLAS_GEMM_DEFAULT); with atomics not allowed (a
  // handle's default) its results are bit-identical run after run on one GPU. The math of
  // 16-bit operands is named as the CPU kernels name it ("bf16").
  std::vector<KernelChoice> choices() const override {
    const std::string math = half_ ? to_string(precision_) : compute_type_name(compute_);
    std::string algorithm = "cublasGemmEx CUBLAS_GEMM_DEFAULT";
    if (padded()) {
      algorithm += fmt::format(", rows padded to {} in chunks of {}, columns split at {}", pitch(),
                               chunk(), rows_plan_.aligned);
    }
    std::vector<KernelChoice> out;
    for (const char* pass : {"forward", "backward-weights", "backward-data"})
      out.push_back({pass, algorithm, math, "NC", true, 0});
    return out;
  }

 private:
  // The passes from x as the GEMMs read it (operand()'s, or the saved copy).
  void forward_from(const void* x, float* out, cudaStream_t s) {
    products(x, out, s);
    if (bias_ != nullptr) cuda_ops::bias_add(out, bias_, rows_, units_, s);
  }
  // out = x·Wᵀ, without the bias.
  void products(const void* x, float* out, cudaStream_t s) {
    const void* w = operand(kWeight, weight_, s);
    float* pad = padded() ? static_cast<float*>(region(kPad, s)) : nullptr;
    for (int r = 0; r < rows_; r += chunk()) {
      const int n = std::min(chunk(), rows_ - r);
      float* y = padded() ? pad : out + int64_t{r} * units_;
      for (const Columns& c : parts()) {
        gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, c.count, n, in_, at(w, int64_t{c.first} * in_), in_,
             at(x, int64_t{r} * in_), in_, y + c.first, pitch(), false);
      }
      if (padded()) copy_rows(pad, pitch(), out + int64_t{r} * units_, units_, n, s);
    }
  }
  void backward_from(const void* x, const float* dout, float* din, cudaStream_t s) {
    // din null: the first layer, whose input's gradient nobody needs.
    const void* w = din != nullptr ? operand(kWeight, weight_, s) : nullptr;
    for (int r = 0; r < rows_; r += chunk()) {
      const int n = std::min(chunk(), rows_ - r);
      const void* dy = output_gradient(dout + int64_t{r} * units_, n, s);
      const void* x_rows = at(x, int64_t{r} * in_);
      bool first_part = true;
      for (const Columns& c : parts()) {
        const void* dy_part = at(dy, c.first);
        gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, in_, c.count, n, x_rows, in_, dy_part, pitch(),
             weight_grad_ + int64_t{c.first} * in_, in_, r > 0);
        if (din != nullptr) {
          gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, in_, n, c.count, at(w, int64_t{c.first} * in_), in_,
               dy_part, pitch(), din + int64_t{r} * in_, in_, !first_part);
        }
        first_part = false;
      }
    }
    if (bias_grad_ != nullptr) {
      cuda_ops::bias_grad(dout, bias_grad_, rows_, units_, floats(bias_scratch_),
                          bias_grad_read(half_), s);
    }
  }

  // What the kernel keeps in the stream's workspace, in this order: the 16-bit copies of x, W
  // and (unpadded) dy, then the padded chunk and its 16-bit copy, then (16-bit, unpadded) the
  // fp32 y of forward_into_saved. Unused ones take no bytes.
  enum Region { kInput, kWeight, kDout, kPad, kPad16, kOut, kRegions };

  bool padded() const { return rows_plan_.padded(units_); }
  // The GEMMs' column parts: the aligned ones, then those left (none when all are aligned).
  std::vector<Columns> parts() const {
    std::vector<Columns> out{{0, rows_plan_.aligned}};
    if (rows_plan_.aligned < units_)
      out.push_back({rows_plan_.aligned, units_ - rows_plan_.aligned});
    return out;
  }
  int pitch() const { return rows_plan_.pitch; }
  int chunk() const { return rows_plan_.chunk; }
  size_t operand_size() const { return half_ ? sizeof(uint16_t) : sizeof(float); }

  int64_t region_count(Region r) const {
    const int64_t chunk_elements = int64_t{chunk()} * pitch();
    switch (r) {
      case kInput:
        return half_ ? int64_t{rows_} * in_ : 0;
      case kWeight:
        return half_ ? int64_t{units_} * in_ : 0;
      case kDout:
        return half_ && !padded() ? int64_t{rows_} * units_ : 0;
      case kPad:
        return padded() ? chunk_elements : 0;
      case kPad16:
        return half_ && padded() ? chunk_elements : 0;
      case kOut:
        return half_ && !padded() ? int64_t{rows_} * units_ : 0;
      case kRegions:
        break;
    }
    return 0;
  }
  size_t region_bytes(Region r) const {
    const bool fp32 = r == kPad || r == kOut;
    return static_cast<size_t>(region_count(r)) * (fp32 ? sizeof(float) : sizeof(uint16_t));
  }
  size_t region_offset(Region r) const {
    return workspace_region_offset(r, [this](int i) { return region_bytes(Region(i)); });
  }
  void* region(Region r, cudaStream_t s) const {
    return static_cast<char*>(libraries_->workspace(s)) + region_offset(r);
  }
  // `elements` operands past p.
  const void* at(const void* p, int64_t elements) const {
    return static_cast<const char*>(p) + elements * static_cast<int64_t>(operand_size());
  }

  // `count` values as the GEMMs read them: themselves, or in 16 bits their copy in region `to`.
  const void* as_operand(const float* values, Region to, int64_t count, cudaStream_t s) const {
    return sixteen_bit_operand(values, count, region(to, s), half_, s);
  }
  const void* operand(Region r, const float* values, cudaStream_t s) const {
    return as_operand(values, r, region_count(r), s);
  }
  // The output gradient of `n` rows from `dout` as the GEMMs read it: dout itself (or its 16-bit
  // copy) unpadded, else copied into the padded chunk (and that rounded, pads and all: the
  // GEMMs never read the pads).
  const void* output_gradient(const float* dout, int n, cudaStream_t s) const {
    if (!padded()) return operand(kDout, dout, s);
    auto* pad = static_cast<float*>(region(kPad, s));
    copy_rows(dout, units_, pad, pitch(), n, s);
    return as_operand(pad, kPad16, int64_t{n} * pitch(), s);
  }
  // `rows` rows of `width` floats from `from` (rows `from_pitch` apart) to `to` (`to_pitch`).
  void copy_rows(const float* from, int from_pitch, float* to, int to_pitch, int rows,
                 cudaStream_t s) const {
    cuda_ops::copy_pitched_rows(from, from_pitch, to, to_pitch, units_, rows, s);
  }

  // c = op(a)·op(b), overwriting c or adding to it; a and b fp32, or both 16-bit copies.
  void gemm(cudaStream_t s, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
            const void* a, int lda, const void* b, int ldb, float* c, int ldc, bool add) const {
    const float one = 1.0f;
    const float beta = add ? 1.0f : 0.0f;
    const cudaDataType_t type = gemm_operand_type(half_);
    SS_CHECK_CUBLAS(cublasGemmEx(libraries_->cublas(s), op_a, op_b, m, n, k, &one, a, type, lda, b,
                                 type, ldb, &beta, c, CUDA_R_32F, ldc, compute_,
                                 CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<CudaLibraries> libraries_;
  int rows_, in_, units_;
  RowPlan rows_plan_;
  Precision precision_ = precision();
  std::optional<km::HalfFormat> half_;  // the operands' format, if 16-bit
  cublasComputeType_t compute_;
  const float* weight_;
  const float* bias_;  // null without a bias, as bias_grad_
  float* weight_grad_;
  float* bias_grad_;
  DeviceBuffer bias_scratch_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_dense(const DenseSpec& dense, const LayerSpec& spec,
                                             const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<DenseKernel>(dense, spec, binding, device);
}

}  // namespace scalescope
