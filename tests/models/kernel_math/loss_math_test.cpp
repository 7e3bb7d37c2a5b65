// kernel_math/loss_math.h against the CPU's losses on the same inputs, bit for bit: softmax
// cross-entropy with class indices and with one-hot or soft targets, binary cross-entropy with its
// clip, and the accuracy count's argmax ties; the split of a softmax row among a warp's lanes;
// the GPU's rule for labels the CPU refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "models/kernel_math/loss_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"
#include "tests/models/kernel_math/lane_reduce.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

struct HostLoss {
  float loss = 0.0f;
  std::vector<float> grad;
};

// Each sample by one thread with its whole row, the batch summed in order (as the CPU does).
HostLoss host_loss(LossKind kind, int64_t batch, int64_t k, const std::vector<float>& z,
                   const std::vector<float>& labels, float scale) {
  HostLoss r{0.0f, std::vector<float>(z.size())};
  double sum = 0.0;
  for (int64_t i = 0; i < batch; ++i) {
    if (kind == LossKind::kBinaryCrossEntropy) {
      sum += km::bce_loss(z[i], labels[i]);
      r.grad[i] = km::bce_gradient(z[i], labels[i], scale);
      continue;
    }
    const bool one_hot = kind == LossKind::kSoftmaxCrossEntropyOneHot;
    sum += km::softmax_ce_row(z.data() + i * k, labels.data() + (one_hot ? i * k : i), one_hot, k,
                              scale, r.grad.data() + i * k, km::RowShare{}, km::SerialReduce{});
  }
  r.loss = static_cast<float>(static_cast<double>(scale) * sum);
  return r;
}

void expect_loss_matches_cpu(LossKind kind, int64_t batch, int64_t k, const std::vector<float>& z,
                             const std::vector<float>& labels) {
  const float scale = 1.0f / static_cast<float>(batch);
  const HostLoss host = host_loss(kind, batch, k, z, labels, scale);
  const kernel_math_test::CpuLossResult cpu = run_cpu_loss(kind, batch, k, z, labels, scale);
  EXPECT_EQ(bit_mismatches({host.loss}, {cpu.loss}), "") << to_string(kind) << " loss";
  EXPECT_EQ(bit_mismatches(host.grad, cpu.grad), "") << to_string(kind) << " gradient";
}

// Random logits, with rows of large ones (where the max subtraction matters) and of ties.
std::vector<float> logits(int64_t batch, int64_t k, uint64_t seed) {
  std::vector<float> z = random_floats(batch * k, seed, -5.0f, 5.0f);
  for (int64_t j = 0; j < k; ++j) {
    z[j] = j % 2 == 0 ? 80.0f : -80.0f;
    z[k + j] = 1000.0f + static_cast<float>(j % 3);
    z[2 * k + j] = 0.25f;
  }
  return z;
}

// Class indices, uniform over [0, k).
std::vector<float> class_labels(int64_t batch, int64_t k, uint64_t seed) {
  std::vector<float> labels = random_floats(batch, seed, 0.0f, static_cast<float>(k));
  for (float& y : labels) y = std::min(std::floor(y), static_cast<float>(k - 1));
  return labels;
}

// Batches that are not a power of two: their scale 1/batch is inexact, so that where the scale is
// applied shows in the bits.
constexpr int64_t kBatch = 12;

// vector_exp_f64 against libm's exp: within 1 ulp over [-708, 709] (1.9 M points measured
// 1.000 at most), exp(0) = 1 exactly; 0 below -708, +inf above 709, NaN for NaN.
TEST(KernelMathLoss, VectorExpF64IsExpWithinOneUlp) {
  EXPECT_EQ(km::vector_exp_f64(0.0), 1.0);
  EXPECT_EQ(km::vector_exp_f64(-708.5), 0.0);
  EXPECT_EQ(km::vector_exp_f64(-INFINITY), 0.0);
  EXPECT_EQ(km::vector_exp_f64(709.5), INFINITY);
  EXPECT_EQ(km::vector_exp_f64(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(km::vector_exp_f64(std::nan(""))));
  int checked = 0;
  const auto near = [&](double x) {
    const double want = std::exp(x);
    const double ulp = std::nextafter(want, INFINITY) - want;
    EXPECT_LE(std::abs(km::vector_exp_f64(x) - want), ulp) << "x = " << x;
    ++checked;
  };
  for (double x = -708.0; x <= 709.0; x += 0.0073) near(x);
  for (double x = -1.0; x <= 1.0; x += 1.0 / 4096.0) near(x);  // where the softmax's terms are
  near(-708.0);
  near(709.0);
  EXPECT_GT(checked, 200000);
}

TEST(KernelMathLoss, SoftmaxCrossEntropyWithClassIndicesIsTheCpuLossBitForBit) {
  for (const int64_t k : {1, 2, 10, 70}) {
    expect_loss_matches_cpu(LossKind::kSoftmaxCrossEntropy, kBatch, k, logits(kBatch, k, 51),
                            class_labels(kBatch, k, 52));
  }
}

TEST(KernelMathLoss, SoftmaxCrossEntropyWithOneHotOrSoftTargetsIsTheCpuLossBitForBit) {
  const int64_t batch = kBatch;
  for (const int64_t k : {1, 3, 10, 70}) {
    // Soft targets that do not sum to one, then one-hot rows.
    std::vector<float> targets = random_floats(batch * k, 53, 0.0f, 1.0f);
    const std::vector<float> hard = class_labels(batch, k, 54);
    for (int64_t i = batch / 2; i < batch; ++i) {
      for (int64_t j = 0; j < k; ++j) targets[i * k + j] = j == hard[i] ? 1.0f : 0.0f;
    }
    expect_loss_matches_cpu(LossKind::kSoftmaxCrossEntropyOneHot, batch, k, logits(batch, k, 55),
                            targets);
  }
}

TEST(KernelMathLoss, BinaryCrossEntropyIsTheCpuLossBitForBitClipIncluded) {
  std::vector<float> p = random_floats(40, 56, 0.0f, 1.0f);
  std::vector<float> labels = random_floats(40, 57, 0.0f, 1.0f);
  const std::vector<float> clipped = {0.0f, 1.0f, 1e-9f, 1e-7f, 0.9999999f, 0.5f, kNan, -0.0f};
  for (size_t i = 0; i < clipped.size(); ++i) {
    p[i] = clipped[i];
    p[clipped.size() + i] = clipped[i];
    labels[i] = 0.0f;
    labels[clipped.size() + i] = 1.0f;
  }
  expect_loss_matches_cpu(LossKind::kBinaryCrossEntropy, 40, 1, p, labels);
}

// 32 lanes each taking the classes lane, lane + 32, ... write each gradient exactly once, the
// values of one thread with the whole row, and their partial values combine to its totals.
TEST(KernelMathLoss, ASoftmaxRowSplitAmongLanesIsTheWholeRow) {
  constexpr int64_t kLanes = 32;
  for (const bool one_hot : {false, true}) {
    const int64_t k = 70;
    const std::vector<float> z = random_floats(k, 58, -5.0f, 5.0f);
    const std::vector<float> label = one_hot ? random_floats(k, 59, 0.0f, 1.0f) : std::vector{3.0f};
    std::vector<float> whole(k);
    RecordingReduce record;
    const double loss = km::softmax_ce_row(z.data(), label.data(), one_hot, k, 0.5, whole.data(),
                                           km::RowShare{}, record);

    constexpr float kUnwritten = 12345.0f;
    std::vector<float> split(k, kUnwritten);
    std::vector<double> partials(record.totals.size(), 0.0);
    partials[0] = -kInf;
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      // A lane sees NaN in the other lanes' columns: on a GPU those may already hold their
      // gradients (g may be z), so reading one would be a race.
      std::vector<float> seen_z(k, NAN), seen_label = label;
      if (one_hot) std::fill(seen_label.begin(), seen_label.end(), NAN);
      for (int64_t j = lane; j < k; j += kLanes) {
        seen_z[j] = z[j];
        if (one_hot) seen_label[j] = label[j];
      }
      std::vector<float> mine(k, kUnwritten);
      const double lane_loss =
          km::softmax_ce_row(seen_z.data(), seen_label.data(), one_hot, k, 0.5, mine.data(),
                             km::RowShare{lane, kLanes}, ReplayingReduce{record.totals, partials});
      EXPECT_EQ(lane_loss, loss) << "lane " << lane;
      for (int64_t j = 0; j < k; ++j) {
        if (mine[j] == kUnwritten) continue;
        EXPECT_EQ(j % kLanes, lane) << "class " << j;
        EXPECT_EQ(split[j], kUnwritten) << "class " << j << " written twice";
        split[j] = mine[j];
      }
    }
    EXPECT_EQ(bit_mismatches(split, whole), "");
    EXPECT_EQ(partials[0], record.totals[0]) << "max";
    for (size_t r = 1; r < partials.size(); ++r) {
      EXPECT_NEAR(partials[r], record.totals[r], 1e-12 * std::abs(record.totals[r])) << r;
    }
  }
}

// The CPU refuses such labels (Error); the GPU kernels must not read out of bounds: they give a
// NaN loss and gradient, and never count the sample correct.
TEST(KernelMathLoss, ALabelThatIsNotAClassIndexGivesNan) {
  const int64_t k = 4;
  EXPECT_EQ(km::class_index(0.0f, k), 0);
  EXPECT_EQ(km::class_index(-0.0f, k), 0);
  EXPECT_EQ(km::class_index(3.0f, k), 3);
  const std::vector<float> z = {0.5f, 2.0f, -1.0f, 0.0f};
  for (const float bad : {-1.0f, 4.0f, 1.5f, kNan, kInf, -kInf}) {
    EXPECT_EQ(km::class_index(bad, k), -1) << bad;
    std::vector<float> g(k);
    EXPECT_TRUE(std::isnan(km::softmax_ce_row(z.data(), &bad, false, k, 1.0, g.data(),
                                              km::RowShare{}, km::SerialReduce{})))
        << bad;
    for (float v : g) EXPECT_TRUE(std::isnan(v)) << bad;
    EXPECT_FALSE(km::prediction_correct(LossKind::kSoftmaxCrossEntropy, z.data(), &bad, k)) << bad;
  }
}

// Outputs from a small set (ties everywhere, NaN first or later), sample by sample against the
// CPU's count_correct.
TEST(KernelMathLoss, PredictionCorrectIsTheCpuCountWithTiesAndNans) {
  const std::vector<float> pool = {0.0f, 1.0f, 1.0f, 2.0f, 0.5f, kNan};
  Rng rng(60);
  const auto pick = [&] { return pool[rng.below(pool.size())]; };
  for (const LossKind kind : {LossKind::kSoftmaxCrossEntropy, LossKind::kSoftmaxCrossEntropyOneHot,
                              LossKind::kBinaryCrossEntropy}) {
    const int64_t k = kind == LossKind::kBinaryCrossEntropy ? 1 : 4;
    for (int sample = 0; sample < 64; ++sample) {
      std::vector<float> z(k);
      for (float& v : z) v = pick();
      std::vector<float> label;
      if (kind == LossKind::kSoftmaxCrossEntropy) {
        label = {static_cast<float>(rng.below(k))};
      } else {
        for (int64_t j = 0; j < k; ++j) {
          const float v = pick();
          label.push_back(std::isnan(v) ? 0.5f : v / 2.0f);  // targets and BCE labels in [0, 1]
        }
      }
      const float cpu = run_cpu_loss(kind, 1, k, z, label, 1.0f).correct;
      EXPECT_EQ(km::prediction_correct(kind, z.data(), label.data(), k) ? 1.0f : 0.0f, cpu)
          << to_string(kind) << " sample " << sample;
    }
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
