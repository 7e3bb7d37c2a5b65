// CPU losses: plain loops over the batch, parallel across the device's threads when the batch
// is large enough to pay for waking them.
//
// Determinism: every sample's loss is computed by exactly one thread into its own slot of a
// buffer planned at construction, and the slots are summed serially in sample order. The result
// is therefore bit-identical for any thread count, which the replica-equivalence tests rely on.
//
// Precision: the per-sample arithmetic (log-sum-exp, logs of probabilities) runs in double,
// which keeps the loss exact to float precision even when the logits are large. Softmax
// cross-entropy is kernel_math/loss_math.h's, the CUDA kernel's math, its exponentials
// vectorised (a GPT's rows are its vocabulary wide: gpt mini's 2048 × 256 logits took 1M calls
// of libm's exp a step, about 2% of it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/loss_math.h"

namespace scalescope {
namespace {

// Below this many output values a loop runs on the calling thread: a parallel region costs a
// few microseconds, more than the whole loss of a CIFAR batch.
constexpr int64_t kParallelMinValues = int64_t{1} << 14;

// Keras's epsilon: BCE clips probabilities to [kBceEpsilon, 1 - kBceEpsilon] so that a
// saturated sigmoid gives a finite loss.
constexpr double kBceEpsilon = 1e-7;

// Index of the largest of `n` values; ties go to the lowest index (as numpy's and torch's
// argmax), so accuracy does not depend on the backend's reduction order.
int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t k = 1; k < n; ++k) {
    if (v[k] > v[best]) best = k;
  }
  return best;
}

namespace km = kernel_math;

// One row of softmax cross-entropy: its loss, and unless g is null scale × its gradient.
// `label`: the class index, or the row's targets when one-hot (check_labels vetted both).
// Flattened, so that kernel_math's loops are compiled as each clone (GCC inlined none on its own).
SCALESCOPE_VECTOR_CLONES [[gnu::flatten]] double softmax_ce_row(const float* z, const float* label,
                                                                bool one_hot, int64_t k,
                                                                double scale, float* g) {
  km::SoftmaxGradient grad;
  const double loss =
      km::softmax_ce_loss(z, label, one_hot, k, scale, km::RowShare{}, km::SerialReduce{}, grad);
  if (g == nullptr) return loss;
  if (one_hot) {
    for (int64_t j = 0; j < k; ++j) g[j] = grad(j, z[j], label[j]);
  } else {
    for (int64_t j = 0; j < k; ++j) g[j] = grad(j, z[j], 0.0f);
  }
  return loss;
}

// A sequence's logits [S, K] are S rows of one sample: the kernel runs over rows, and a
// sample's loss (and its share of correct predictions) is the mean over its `positions` rows.
class CpuLoss final : public LossKernel {
 public:
  CpuLoss(LossKind kind, int64_t rows, int64_t classes, int64_t positions, int threads)
      : kind_(kind),
        batch_(rows),
        classes_(classes),
        positions_(positions),
        threads_(threads),
        parallel_(rows * classes >= kParallelMinValues),
        per_sample_(static_cast<size_t>(rows), 0.0) {}

  void forward_backward(const float* output, const float* labels, float scale, float* loss,
                        float* dout, Stream&) override {
    check_labels(labels);
    const double s = row_scale(scale);
    compute(output, labels, s, dout);
    loss[0] = static_cast<float>(s * sum_per_sample());
  }

  void forward(const float* output, const float* labels, float scale, float* loss,
               Stream&) override {
    check_labels(labels);
    const double s = row_scale(scale);
    compute(output, labels, s, nullptr);
    loss[0] = static_cast<float>(s * sum_per_sample());
  }

  void count_correct(const float* output, const float* labels, float* correct, Stream&) override {
    check_labels(labels);
    const int64_t k = classes_;
    int64_t count = 0;  // an integer sum: the same for every thread count
#pragma omp parallel for schedule(static) num_threads(threads_) if (parallel_) reduction(+ : count)
    for (int64_t i = 0; i < batch_; ++i) {
      const float* z = output + i * k;
      bool hit = false;
      switch (kind_) {
        case LossKind::kSoftmaxCrossEntropy:
          hit = argmax(z, k) == static_cast<int64_t>(labels[i]);
          break;
        case LossKind::kSoftmaxCrossEntropyOneHot:
          hit = argmax(z, k) == argmax(labels + i * k, k);
          break;
        case LossKind::kBinaryCrossEntropy:
          hit = (z[0] >= 0.5f) == (labels[i] >= 0.5f);
          break;
      }
      count += hit ? 1 : 0;
    }
    correct[0] = static_cast<float>(static_cast<double>(count) / static_cast<double>(positions_));
  }

 private:
  double row_scale(float scale) const {
    return static_cast<double>(scale) / static_cast<double>(positions_);
  }

  // Bad labels are a data bug that would otherwise train silently on garbage (an index past
  // the last class reads another sample's logits). Checked serially before the parallel loops
  // because an exception must not leave an OpenMP region.
  void check_labels(const float* labels) const {
    switch (kind_) {
      case LossKind::kSoftmaxCrossEntropy:
        for (int64_t i = 0; i < batch_; ++i) {
          const float y = labels[i];
          SS_CHECK(std::isfinite(y) && y >= 0.0f && y < static_cast<float>(classes_) &&
                       std::floor(y) == y,
                   "softmax cross-entropy: label of sample {}{} is {}, not a class index in "
                   "[0, {})",
                   i / positions_,
                   positions_ == 1 ? std::string() : fmt::format(", position {}", i % positions_),
                   y, classes_);
        }
        break;
      case LossKind::kSoftmaxCrossEntropyOneHot:
        for (int64_t i = 0; i < batch_ * classes_; ++i) {
          const float y = labels[i];
          SS_CHECK(std::isfinite(y) && y >= 0.0f,
                   "softmax cross-entropy (one-hot): label {} of sample {} is {}, not a "
                   "non-negative target",
                   i % classes_, i / classes_, y);
        }
        break;
      case LossKind::kBinaryCrossEntropy:
        for (int64_t i = 0; i < batch_; ++i) {
          const float y = labels[i];
          SS_CHECK(y >= 0.0f && y <= 1.0f,  // false for NaN too
                   "binary cross-entropy: label of sample {} is {}, not in [0, 1]", i, y);
        }
        break;
    }
  }

  // Per-row losses into per_sample_ and, unless `dout` is null, s × their gradient.
  void compute(const float* output, const float* labels, double s, float* dout) {
    const int64_t k = classes_;
    double* per_sample = per_sample_.data();
#pragma omp parallel for schedule(static) num_threads(threads_) if (parallel_)
    for (int64_t i = 0; i < batch_; ++i) {
      const float* z = output + i * k;
      float* g = dout == nullptr ? nullptr : dout + i * k;
      switch (kind_) {
        case LossKind::kSoftmaxCrossEntropy:
          per_sample[i] = softmax_ce_row(z, labels + i, false, k, s, g);
          break;
        case LossKind::kSoftmaxCrossEntropyOneHot:
          per_sample[i] = softmax_ce_row(z, labels + i * k, true, k, s, g);
          break;
        case LossKind::kBinaryCrossEntropy: {
          // loss = -(y log p + (1-y) log(1-p)) on p clipped to [eps, 1-eps] (Keras, without
          // Keras's extra eps inside the logs). The gradient (p-y)/(p(1-p)) is evaluated at the
          // clipped p everywhere, also where the clip was active, instead of being zero there
          // as the derivative of a clip would be: a sigmoid saturated on the wrong side then
          // still gets a bounded push back (|dL/dp| <= 1/eps, and the sigmoid's backward
          // multiplies by p(1-p)), as PyTorch's BCELoss does, rather than dying silently.
          const double y = labels[i];
          const double p = std::clamp(static_cast<double>(z[0]), kBceEpsilon, 1.0 - kBceEpsilon);
          per_sample[i] = -(y * std::log(p) + (1.0 - y) * std::log1p(-p));
          if (g != nullptr) g[0] = static_cast<float>(s * (p - y) / (p * (1.0 - p)));
          break;
        }
      }
    }
  }

  // Serial and in sample order: the one place where the order of additions could depend on
  // the thread count, so it does not run in parallel.
  double sum_per_sample() const {
    double sum = 0.0;
    for (double v : per_sample_) sum += v;
    return sum;
  }

  LossKind kind_;
  int64_t batch_;
  int64_t classes_;
  int64_t positions_;
  int threads_;
  bool parallel_;
  std::vector<double> per_sample_;  // planned here so that a step allocates nothing
};

}  // namespace

std::unique_ptr<LossKernel> make_cpu_loss(LossKind kind, const Shape& output, Device& device) {
  const LossRows rows = loss_rows(kind, output);
  return std::make_unique<CpuLoss>(kind, rows.rows, rows.classes, rows.positions, device.threads());
}

}  // namespace scalescope
