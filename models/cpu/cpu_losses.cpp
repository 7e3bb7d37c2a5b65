// CPU losses: plain loops over the batch, parallel across the device's threads when the batch
// is large enough to pay for waking them.
//
// Determinism: every sample's loss is computed by exactly one thread into its own slot of a
// buffer planned at construction, and the slots are summed serially in sample order. The result
// is therefore bit-identical for any thread count, which the replica-equivalence tests rely on.
//
// Precision: the per-sample arithmetic (log-sum-exp, logs of probabilities) runs in double.
// Outputs are small ([N, K] with K the number of classes), so this costs nothing measurable and
// keeps the loss exact to float precision even when the logits are large.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "models/cpu/cpu_kernels.h"

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

// log(sum_k exp(z_k)), stable for any finite z: the largest logit is subtracted before exp.
double log_sum_exp(const float* z, int64_t k) {
  const double m = *std::max_element(z, z + k);
  double s = 0.0;
  for (int64_t j = 0; j < k; ++j) s += std::exp(static_cast<double>(z[j]) - m);
  return m + std::log(s);
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
        case LossKind::kSoftmaxCrossEntropy: {
          // loss = lse(z) - z_y;  d/dz_j = softmax_j - [j == y]
          const int64_t y = static_cast<int64_t>(labels[i]);
          const double lse = log_sum_exp(z, k);
          per_sample[i] = lse - static_cast<double>(z[y]);
          if (g == nullptr) break;
          for (int64_t j = 0; j < k; ++j) {
            const double p = std::exp(static_cast<double>(z[j]) - lse);
            g[j] = static_cast<float>(s * (p - (j == y ? 1.0 : 0.0)));
          }
          break;
        }
        case LossKind::kSoftmaxCrossEntropyOneHot: {
          // loss = sum_j y_j (lse - z_j);  d/dz_j = (sum y) softmax_j - y_j. Targets need not
          // sum to one (label smoothing, mixup), so the sum is kept rather than assumed.
          const float* t = labels + i * k;
          const double lse = log_sum_exp(z, k);
          double loss = 0.0;
          double t_sum = 0.0;
          for (int64_t j = 0; j < k; ++j) {
            loss += static_cast<double>(t[j]) * (lse - static_cast<double>(z[j]));
            t_sum += t[j];
          }
          per_sample[i] = loss;
          if (g == nullptr) break;
          for (int64_t j = 0; j < k; ++j) {
            const double p = std::exp(static_cast<double>(z[j]) - lse);
            g[j] = static_cast<float>(s * (t_sum * p - static_cast<double>(t[j])));
          }
          break;
        }
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
