// Token and position embeddings on the host, in plain OpenMP loops: a gather of rows and an
// addition have no oneDNN primitive worth a reorder. The CUDA kernels run the same index math
// (models/kernel_math/embedding_math.h).
//
// Determinism: the token embedding's gradient adds up the rows of every position holding a
// token. Threads split the embedding's columns, never the positions, so each value is summed in
// position order whatever the thread count.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/kernel_math/embedding_math.h"

namespace scalescope {
namespace {

// Columns one thread sums at a time in the gradient: a cache line of floats.
constexpr int64_t kColumnBlock = 16;

class EmbeddingKernel final : public LayerKernel {
 public:
  EmbeddingKernel(const EmbeddingSpec& spec, const LayerBinding& b)
      : vocab_(spec.vocab),
        dim_(spec.dim),
        tokens_(b.in.numel()),
        positions_(b.in[1]),
        weight_(b.params[0].data),
        grad_(b.grads[0].data) {}

  void forward(const float* in, float* out, Stream&) override {
    check_tokens(in);
    const float* w = weight_;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tokens_; ++t) {
      const float* row = w + static_cast<int64_t>(in[t]) * dim_;
      std::copy(row, row + dim_, out + t * dim_);
    }
  }

  // The token ids have no gradient; `din`, if asked for, is zeros.
  void backward(const float* in, const float*, const float* dout, float* din, Stream&) override {
    float* g = grad_;
    const int64_t blocks = (dim_ + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t begin = block * kColumnBlock;
      const int64_t end = std::min(begin + kColumnBlock, dim_);
      for (int64_t v = 0; v < vocab_; ++v)
        std::fill(g + v * dim_ + begin, g + v * dim_ + end, 0.0f);
      for (int64_t t = 0; t < tokens_; ++t) {
        float* row = g + static_cast<int64_t>(in[t]) * dim_;
        const float* dy = dout + t * dim_;
        for (int64_t c = begin; c < end; ++c) row[c] += dy[c];
      }
    }
    if (din != nullptr) std::fill(din, din + tokens_, 0.0f);
  }

 private:
  // A token outside the vocabulary would read another row's memory: a data bug named here
  // (serially: an exception must not leave an OpenMP region).
  void check_tokens(const float* in) const {
    for (int64_t t = 0; t < tokens_; ++t) {
      SS_CHECK(kernel_math::is_token(in[t], vocab_),
               "embedding: token {} of sample {} is {}, not a token id in [0, {})", t % positions_,
               t / positions_, in[t], vocab_);
    }
  }

  int64_t vocab_, dim_, tokens_, positions_;
  const float* weight_;
  float* grad_;
};

// out[n, s] = in[n, s] + weight[s]; the weight's gradient sums dout over the batch, in sample
// order.
class PositionEmbeddingKernel final : public LayerKernel {
 public:
  explicit PositionEmbeddingKernel(const LayerBinding& b)
      : batch_(b.in[0]),
        row_(b.in[1] * b.in[2]),
        weight_(b.params[0].data),
        grad_(b.grads[0].data) {}

  void forward(const float* in, float* out, Stream&) override {
    const float* w = weight_;
    // Rows of samples, not a flat index: `i % row_` per value stopped vectorization and cost
    // an integer division each (1.47 ms a step for gpt mini's 2048 x 256 on one thread).
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < batch_; ++n) {
      const float* x = in + n * row_;
      float* y = out + n * row_;
#pragma omp simd
      for (int64_t j = 0; j < row_; ++j) y[j] = x[j] + w[j];
    }
  }

  void backward(const float*, const float*, const float* dout, float* din, Stream&) override {
    float* g = grad_;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < row_; ++j) {
      float sum = 0.0f;
      for (int64_t n = 0; n < batch_; ++n) sum += dout[n * row_ + j];
      g[j] = sum;
    }
    if (din != nullptr) std::copy(dout, dout + batch_ * row_, din);
  }

 private:
  int64_t batch_, row_;
  const float* weight_;
  float* grad_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_embedding(const EmbeddingSpec& spec,
                                                const LayerBinding& binding, Device& /*device*/) {
  return std::make_unique<EmbeddingKernel>(spec, binding);
}

std::unique_ptr<LayerKernel> make_cpu_position_embedding(const PositionEmbeddingSpec& /*spec*/,
                                                         const LayerBinding& binding,
                                                         Device& /*device*/) {
  return std::make_unique<PositionEmbeddingKernel>(binding);
}

}  // namespace scalescope
