// PyTorch's LayerNorm over the last dimension in plain OpenMP loops rather than oneDNN's layer
// normalization primitive: the loops run kernel_math/layer_norm_math.h's math in its order of
// additions, the CUDA kernel's, so the two backends agree to the bit and the results do not
// depend on the thread count (rows are independent; the parameter gradients' column sums run
// over parts of the rows fixed by the shape, added in part order).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cpu/cpu_half.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/prefetch.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/layer_norm_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// The model's saved bf16 copy of the input, read as the values it widens to.
using SavedBf16 = km::HalfValuesIn<km::HalfFormat::kBf16>;

// Columns one task of the parameter gradients sums: a few kilobytes of partial sums, and
// enough tasks for the threads when a part is wide.
constexpr int64_t kColumnBlock = 256;

// The loops over a row and over a column block are vector clones (vector_clones.h): the 32
// lanes of a row sum and the columns of a block are independent sums, so running 16 of them
// at a time changes no addition's order, and this file is compiled without contraction: the
// baseline's bits (KernelMathLayerNorm's tests hold the CPU kernel to them).
SCALESCOPE_VECTOR_CLONES void forward_row(const float* x, float* y, int64_t d, const float* w,
                                          const float* b, float eps, float* mean, float* rstd) {
  km::layer_norm_forward_row_on_host(x, y, d, w, b, eps, mean, rstd);
}

// `add`: dx added to what it holds (LayerKernel::backward_adding). X is how x is read: fp32, or
// the model's saved bf16 copy (SavedBf16); each gets clones of its own.
template <class X>
SCALESCOPE_VECTOR_CLONES void backward_row(X x, const float* dy, float* dx, int64_t d,
                                           const float* w, float mean, float rstd, bool add) {
  if (add) {
    km::layer_norm_backward_row_on_host<true>(x, dy, dx, d, w, mean, rstd);
  } else {
    km::layer_norm_backward_row_on_host<false>(x, dy, dx, d, w, mean, rstd);
  }
}

// Flattened: GCC would not inline the part's loops into the clones by itself.
template <class X>
SCALESCOPE_VECTOR_CLONES [[gnu::flatten]] void backward_part(
    const km::ColumnGradTerm<X>& term, float* dx, const float* w, int64_t rows,
    const km::BiasGradPlan& plan, int64_t part, float* acc, float* part_dw, float* part_db,
    bool add) {
  if (add) {
    km::layer_norm_backward_part_on_host<true>(term, dx, w, rows, plan, part, acc, part_dw,
                                               part_db);
  } else {
    km::layer_norm_backward_part_on_host<false>(term, dx, w, rows, plan, part, acc, part_dw,
                                                part_db);
  }
}

template <class X>
SCALESCOPE_VECTOR_CLONES void part_sums(const km::ColumnGradTerm<X>& term, int64_t rows,
                                        const km::BiasGradPlan& plan, int64_t part, int64_t c0,
                                        int64_t c1, float* acc, float* part_dw, float* part_db) {
  km::layer_norm_part_sums_on_host(term, rows, plan, part, c0, c1, acc, part_dw, part_db);
}

// The row of x a prefetch reads ahead of.
const float* row_values(const float* x) {
  return x;
}
const uint16_t* row_values(SavedBf16 x) {
  return x.at;
}

class LayerNormKernel final : public LayerKernel {
 public:
  LayerNormKernel(const LayerNormSpec& spec, const LayerBinding& b, Device& device)
      : eps_(spec.eps),
        d_(b.in[b.in.rank() - 1]),
        rows_(b.in.numel() / d_),
        plan_(km::bias_grad_plan(rows_)),
        weight_(b.params[0].data),
        bias_(b.params[1].data),
        weight_grad_(b.grads[0].data),
        bias_grad_(b.grads[1].data),
        stats_(device, static_cast<size_t>(2 * rows_) * sizeof(float)),
        parts_(device,
               static_cast<size_t>(plan_.parts > 1 ? 2 * plan_.parts * d_ : 0) * sizeof(float)) {}

  void forward(const float* in, float* out, Stream&) override {
    const int64_t d = d_;
    float* mean = saved_mean();
    float* rstd = saved_rstd();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      cpu_prefetch::prefetch_ahead(in + r * d, d);
      forward_row(in + r * d, out + r * d, d, weight_, bias_, eps_, mean + r, rstd + r);
    }
  }

  // Under bf16 and fp16 the rows go straight into the model's saved copy: each row normalized
  // in fp32 and rounded as the model's save would round it, with no fp32 output written.
  SavedOutput forwards_into_saved(km::HalfFormat) const override {
    return SavedOutput::kFromInput;
  }
  void forward_into_saved(const float* in, const uint16_t*, uint16_t* out, km::HalfFormat format,
                          Stream&) override {
    const int64_t d = d_;
    float* mean = saved_mean();
    float* rstd = saved_rstd();
#pragma omp parallel
    {
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(d));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        cpu_prefetch::prefetch_ahead(in + r * d, d);
        forward_row(in + r * d, row.data(), d, weight_, bias_, eps_, mean + r, rstd + r);
        compress_half_span(row.data(), out + r * d, d, 1, format);
      }
    }
  }

  void backward(const float* in, const float*, const float* dout, float* din, Stream&) override {
    backward_into(in, dout, din, false);
  }

  // A residual stream's layer norm adds its dx in the same pass (no scratch, no second pass).
  bool adds_input_gradient() const override {
    return true;
  }
  void backward_adding(const float* in, const float*, const float* dout, float* din,
                       Stream&) override {
    check_adding(dout, din);
    backward_into(in, dout, din, true);
  }

  // Under bf16 backward reads the model's saved bf16 copy of the input as it is (no restore
  // into fp32 first): the same values, so the same bits.
  bool reads_saved(km::HalfFormat format) const override {
    return format == km::HalfFormat::kBf16;
  }
  void backward_saved(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                      Stream&) override {
    backward_into(SavedBf16{in}, dout, din, false);
  }
  bool adds_input_gradient_from_saved(km::HalfFormat format) const override {
    return reads_saved(format);
  }
  void backward_saved_adding(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                             Stream&) override {
    check_adding(dout, din);
    backward_into(SavedBf16{in}, dout, din, true);
  }

 private:
  static void check_adding(const float* dout, const float* din) {
    SS_CHECK(din != nullptr && din != dout,
             "layer norm: backward_adding needs an input gradient apart from dout");
  }

  template <class X>
  void backward_into(X in, const float* dout, float* din, bool add) {
    if (din != nullptr && parts_share_out_evenly()) {
      backward_in_parts(in, dout, din, add);
      return;
    }
    parameter_gradients(in, dout);
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    const int64_t d = d_;
    const float* mean = saved_mean();
    const float* rstd = saved_rstd();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      cpu_prefetch::prefetch_ahead(row_values(in + r * d), d);
      cpu_prefetch::prefetch_ahead(dout + r * d, d);
      backward_row(in + r * d, dout + r * d, din + r * d, d, weight_, mean[r], rstd[r], add);
    }
  }

  // Overwrites dw and db: each (part, column block) task sums its own columns of its own rows;
  // with several parts, their sums are then added in part order.
  template <class X>
  void parameter_gradients(X in, const float* dout) {
    const km::ColumnGradTerm term{in, dout, saved_mean(), saved_rstd(), d_};
    const int64_t d = d_;
    const int64_t parts = plan_.parts;
    const int64_t blocks = (d + kColumnBlock - 1) / kColumnBlock;
    float* parts_dw = parts > 1 ? static_cast<float*>(parts_.data()) : weight_grad_;
    float* parts_db = parts > 1 ? parts_dw + parts * d : bias_grad_;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t p = 0; p < parts; ++p) {
      for (int64_t k = 0; k < blocks; ++k) {
        float acc[2 * kColumnBlock];
        const int64_t c0 = k * kColumnBlock;
        part_sums(term, rows_, plan_, p, c0, std::min(d, c0 + kColumnBlock), acc, parts_dw + p * d,
                  parts_db + p * d);
      }
    }
    finish_sums(parts_dw, parts_db);
  }

  // Whether the parts of the rows go evenly enough to the threads for backward_in_parts, whose
  // threads each take whole parts.
  bool parts_share_out_evenly() const {
    const int64_t threads = omp_get_max_threads();
    return plan_.parts % threads == 0 || plan_.parts >= 4 * threads;
  }

  // Each part of the rows in one pass (layer_norm_backward_part_on_host): the rows read once and
  // in order, where parameter_gradients's column sums stride over them and the rows' pass reads
  // them again. The same bits.
  template <class X>
  void backward_in_parts(X in, const float* dout, float* din, bool add) {
    const km::ColumnGradTerm term{in, dout, saved_mean(), saved_rstd(), d_};
    const int64_t d = d_;
    const int64_t parts = plan_.parts;
    float* parts_dw = parts > 1 ? static_cast<float*>(parts_.data()) : weight_grad_;
    float* parts_db = parts > 1 ? parts_dw + parts * d : bias_grad_;
#pragma omp parallel
    {
      thread_local std::vector<float> acc;
      acc.resize(static_cast<size_t>(2 * km::kBiasTileRows * d));
#pragma omp for schedule(static)
      for (int64_t p = 0; p < parts; ++p) {
        backward_part(term, din, weight_, rows_, plan_, p, acc.data(), parts_dw + p * d,
                      parts_db + p * d, add);
      }
    }
    finish_sums(parts_dw, parts_db);
  }

  // With several parts, dw and db from their sums, added in part order.
  void finish_sums(const float* parts_dw, const float* parts_db) {
    if (plan_.parts == 1) return;
    for (int64_t c = 0; c < d_; ++c) {
      km::layer_norm_finish_sums(parts_dw, parts_db, plan_.parts, d_, c, weight_grad_, bias_grad_);
    }
  }

  // Each row's mean and rstd, saved by the last forward for backward.
  float* saved_mean() const {
    return static_cast<float*>(stats_.data());
  }
  float* saved_rstd() const {
    return saved_mean() + rows_;
  }

  float eps_;
  int64_t d_;
  int64_t rows_;
  km::BiasGradPlan plan_;
  const float* weight_;
  const float* bias_;
  float* weight_grad_;
  float* bias_grad_;
  DeviceBuffer stats_;  // 2·rows floats: the rows' means, then their rstd
  DeviceBuffer parts_;  // with several parts, each part's column sums: dw's, then db's
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_layer_norm(const LayerNormSpec& spec,
                                                 const LayerBinding& binding, Device& device) {
  return std::make_unique<LayerNormKernel>(spec, binding, device);
}

}  // namespace scalescope
