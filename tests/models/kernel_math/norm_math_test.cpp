// kernel_math/norm_math.h: batch normalization as the CUDA kernels compute it (the host mirror
// of their passes and order of additions) against float64 references of PyTorch's
// BatchNorm2d — forward values, the saved statistics, the running-statistic update, and
// backward, whose float64 formula is itself checked against finite differences; and the
// synchronized stages (--sync-batchnorm) over a batch split among replicas against the
// reference of the whole batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/norm_math.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;

std::vector<float> uniform(int64_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// max |got - want| / max(max |want|, floor), so that values near zero do not make it
// meaningless.
template <class Got>
double relative_error(const std::vector<Got>& got, const std::vector<double>& want,
                      double floor = 0.0) {
  double diff = 0.0;
  double scale = floor;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

// The layer's tensors for one case, [rows, channels] with x's values around `offset`.
struct Case {
  int64_t rows, channels;
  std::vector<float> x, dy, gamma, beta, running_mean, running_var;
};

Case make_case(int64_t rows, int64_t channels, float offset, uint64_t seed) {
  Case c{rows,
         channels,
         uniform(rows * channels, seed, offset - 1.0f, offset + 1.0f),
         uniform(rows * channels, seed + 1, -1.0f, 1.0f),
         uniform(channels, seed + 2, -2.0f, 2.0f),
         uniform(channels, seed + 3, -1.0f, 1.0f),
         uniform(channels, seed + 4, -1.0f, 1.0f),
         uniform(channels, seed + 5, 0.5f, 1.5f)};
  return c;
}

// PyTorch's BatchNorm2d in float64, from the float inputs.
struct Reference {
  std::vector<double> y, mean, invstd, running_mean, running_var, dgamma, dbeta, dx;
};

Reference reference(const Case& k) {
  const auto m = static_cast<double>(k.rows);
  const auto n = static_cast<size_t>(k.channels);
  Reference r{std::vector<double>(k.x.size()), std::vector<double>(n),
              std::vector<double>(n),          std::vector<double>(n),
              std::vector<double>(n),          std::vector<double>(n),
              std::vector<double>(n),          std::vector<double>(k.x.size())};
  const auto at = [&](int64_t row, size_t c) { return static_cast<size_t>(row) * n + c; };
  for (size_t c = 0; c < n; ++c) {
    double sum = 0.0;
    for (int64_t i = 0; i < k.rows; ++i) sum += k.x[at(i, c)];
    const double mean = sum / m;
    double squares = 0.0;
    for (int64_t i = 0; i < k.rows; ++i) squares += (k.x[at(i, c)] - mean) * (k.x[at(i, c)] - mean);
    const double var = squares / m;
    const double invstd = 1.0 / std::sqrt(var + static_cast<double>(kEps));
    const double mom = kMomentum;
    r.mean[c] = mean;
    r.invstd[c] = invstd;
    r.running_mean[c] = (1.0 - mom) * k.running_mean[c] + mom * mean;
    r.running_var[c] = (1.0 - mom) * k.running_var[c] + mom * var * m / (m - 1.0);
    double dbeta = 0.0;
    double dgamma = 0.0;
    for (int64_t i = 0; i < k.rows; ++i) {
      const double xhat = (k.x[at(i, c)] - mean) * invstd;
      r.y[at(i, c)] = k.gamma[c] * xhat + k.beta[c];
      dbeta += k.dy[at(i, c)];
      dgamma += k.dy[at(i, c)] * xhat;
    }
    r.dbeta[c] = dbeta;
    r.dgamma[c] = dgamma;
    for (int64_t i = 0; i < k.rows; ++i) {
      const double xhat = (k.x[at(i, c)] - mean) * invstd;
      r.dx[at(i, c)] = k.gamma[c] * invstd * (k.dy[at(i, c)] - dbeta / m - xhat * dgamma / m);
    }
  }
  return r;
}

// The host mirror's results for a case.
struct Mirror {
  std::vector<float> y, mean, invstd, running_mean, running_var, dgamma, dbeta, dx;
  float num_batches_tracked = 0.0f;
};

// Before a forward over `rows` rows: the case's running statistics, num_batches_tracked 4.
Mirror blank_mirror(const Case& k, int64_t rows) {
  const auto n = static_cast<size_t>(k.channels);
  const auto values = static_cast<size_t>(rows * k.channels);
  return Mirror{std::vector<float>(values),
                std::vector<float>(n),
                std::vector<float>(n),
                k.running_mean,
                k.running_var,
                std::vector<float>(n),
                std::vector<float>(n),
                std::vector<float>(values),
                4.0f};
}

Mirror mirror(const Case& k) {
  Mirror m = blank_mirror(k, k.rows);
  km::norm_forward_on_host(k.x.data(), k.rows, k.channels, k.gamma.data(), k.beta.data(), kEps,
                           kMomentum, m.y.data(), m.running_mean.data(), m.running_var.data(),
                           &m.num_batches_tracked, m.mean.data(), m.invstd.data());
  km::norm_backward_on_host(k.x.data(), k.dy.data(), k.rows, k.channels, k.gamma.data(),
                            m.mean.data(), m.invstd.data(), m.dgamma.data(), m.dbeta.data(),
                            m.dx.data());
  return m;
}

// max |gamma·invstd·dy|: the size of the terms whose difference dx is.
double dx_terms(const Case& k, const Reference& r) {
  double scale = 0.0;
  for (size_t i = 0; i < k.dy.size(); ++i) {
    const size_t c = i % static_cast<size_t>(k.channels);
    scale = std::max(scale, std::abs(k.gamma[c] * r.invstd[c] * k.dy[i]));
  }
  return scale;
}

// Two rows (the fewest training takes), rows within one part of the sums, rows over several
// parts (bias_math.h's plan splits from 513), more channels than one tile of threads, and
// values far from zero, where a one-pass variance would cancel its digits.
TEST(KernelMathNorm, MatchesAFloat64ReferenceOfPyTorchsBatchNorm) {
  struct Shape {
    int64_t rows, channels;
    float offset;
  };
  for (const Shape& s : {Shape{2, 3, 0.0f}, Shape{50, 4, 0.0f}, Shape{1300, 5, 0.3f},
                         Shape{70, 40, 0.0f}, Shape{600, 3, 100.0f}}) {
    SCOPED_TRACE(testing::Message()
                 << s.rows << " rows, " << s.channels << " channels, offset " << s.offset);
    const Case k = make_case(s.rows, s.channels, s.offset, 17);
    const Reference want = reference(k);
    const Mirror got = mirror(k);
    // At offset 100, x - mean inherits the rounding of the mean (an ulp of 100 against a
    // spread of 0.6): y and dgamma are off by ~3e-6 there, 1e-7 elsewhere.
    const double tol = 1e-5;
    EXPECT_LE(relative_error(got.mean, want.mean), 1e-6);
    EXPECT_LE(relative_error(got.invstd, want.invstd), tol);
    EXPECT_LE(relative_error(got.y, want.y), tol);
    EXPECT_LE(relative_error(got.running_mean, want.running_mean), 1e-6);
    EXPECT_LE(relative_error(got.running_var, want.running_var), tol);
    EXPECT_EQ(got.num_batches_tracked, 5.0f);
    EXPECT_LE(relative_error(got.dbeta, want.dbeta), 1e-5);
    EXPECT_LE(relative_error(got.dgamma, want.dgamma), tol);
    // dx is a difference of terms as large as gamma·invstd·dy, which may nearly cancel (with
    // two rows, they cancel but for eps): its error is relative to them.
    EXPECT_LE(relative_error(got.dx, want.dx, dx_terms(k, want)), tol);
  }
}

// The loss Σ w·y of the float64 forward, for finite differences of the reference's backward.
double weighted_output(const Case& k) {
  const Reference r = reference(k);
  double loss = 0.0;
  for (size_t i = 0; i < r.y.size(); ++i) loss += k.dy[i] * r.y[i];
  return loss;
}

// Central differences in float64, divided by the step the float inputs actually took.
double finite_difference(Case k, std::vector<float> Case::*tensor, size_t i) {
  const float h = 1.0f / 1024.0f;
  const float saved = (k.*tensor)[i];
  const float high = saved + h;
  const float low = saved - h;
  (k.*tensor)[i] = high;
  const double up = weighted_output(k);
  (k.*tensor)[i] = low;
  const double down = weighted_output(k);
  return (up - down) / (static_cast<double>(high) - static_cast<double>(low));
}

TEST(KernelMathNorm, TheReferenceBackwardIsTheForwardsDerivative) {
  const Case k = make_case(6, 3, 0.0f, 5);
  const Reference r = reference(k);
  const Mirror got = mirror(k);
  std::vector<double> dx(k.x.size());
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = finite_difference(k, &Case::x, i);
  std::vector<double> dgamma(k.gamma.size());
  std::vector<double> dbeta(k.beta.size());
  for (size_t c = 0; c < dgamma.size(); ++c) {
    dgamma[c] = finite_difference(k, &Case::gamma, c);
    dbeta[c] = finite_difference(k, &Case::beta, c);
  }
  // Second-order differences of a smooth function: error ~ h² times its third derivative.
  EXPECT_LE(relative_error(r.dx, dx), 1e-5);
  EXPECT_LE(relative_error(r.dgamma, dgamma), 1e-6);
  EXPECT_LE(relative_error(r.dbeta, dbeta), 1e-9);
  EXPECT_LE(relative_error(got.dx, dx), 1e-5);
}

// A ReLU fused into the batch norm (the CUDA kernels' fusion) is the batch norm followed by the
// ReLU layer's functions, bit for bit: forward writes the ReLU's output, and backward masks dy
// with it in both the channel sums and dx. About half the outputs are zeroed, so a mask read in
// one of the passes only would show.
TEST(KernelMathNorm, AFusedReluIsTheBatchNormThenTheReluLayerBitForBit) {
  const Case k = make_case(1300, 5, 0.3f, 23);
  const Mirror unfused = mirror(k);
  std::vector<float> relu_y(unfused.y.size());
  std::vector<float> relu_dy(relu_y.size());
  for (size_t i = 0; i < relu_y.size(); ++i) {
    relu_y[i] = km::activation_forward(Activation::kRelu, unfused.y[i]);
    relu_dy[i] = km::activation_backward(Activation::kRelu, 0.0f, relu_y[i], k.dy[i]);
  }
  EXPECT_GT(std::count(relu_y.begin(), relu_y.end(), 0.0f), k.rows);
  Mirror want = unfused;
  km::norm_backward_on_host(k.x.data(), relu_dy.data(), k.rows, k.channels, k.gamma.data(),
                            unfused.mean.data(), unfused.invstd.data(), want.dgamma.data(),
                            want.dbeta.data(), want.dx.data());
  ASSERT_NE(want.dx, unfused.dx);

  Mirror got = blank_mirror(k, k.rows);
  km::norm_forward_on_host(k.x.data(), k.rows, k.channels, k.gamma.data(), k.beta.data(), kEps,
                           kMomentum, got.y.data(), got.running_mean.data(), got.running_var.data(),
                           &got.num_batches_tracked, got.mean.data(), got.invstd.data(), true);
  km::norm_backward_on_host(k.x.data(), k.dy.data(), k.rows, k.channels, k.gamma.data(),
                            got.mean.data(), got.invstd.data(), got.dgamma.data(), got.dbeta.data(),
                            got.dx.data(), got.y.data());
  EXPECT_EQ(got.y, relu_y);
  EXPECT_EQ(got.running_mean, want.running_mean);
  EXPECT_EQ(got.running_var, want.running_var);
  EXPECT_EQ(got.dgamma, want.dgamma);
  EXPECT_EQ(got.dbeta, want.dbeta);
  EXPECT_EQ(got.dx, want.dx);
}

// Under bf16 and fp16 the CUDA passes read the model's saved 16-bit copies of x and of the fused
// ReLU's output in place (HalfValues): the bits of the same passes on their restores, with the
// ReLU's mask and without it.
TEST(KernelMathNorm, TheSavedSixteenBitCopiesAreReadAsTheirRestores) {
  const Case k = make_case(1300, 5, 0.3f, 23);
  for (const km::HalfFormat format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
    SCOPED_TRACE(format == km::HalfFormat::kBf16 ? "bf16" : "fp16");
    std::vector<uint16_t> x16;
    std::vector<float> x;
    for (const float v : k.x) {
      x16.push_back(km::to_half(v, format));
      x.push_back(km::from_half(x16.back(), format));
    }
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(relu ? "with the ReLU" : "alone");
      Mirror want = blank_mirror(k, k.rows);
      km::norm_forward_on_host(x.data(), k.rows, k.channels, k.gamma.data(), k.beta.data(), kEps,
                               kMomentum, want.y.data(), want.running_mean.data(),
                               want.running_var.data(), &want.num_batches_tracked, want.mean.data(),
                               want.invstd.data(), relu);
      std::vector<uint16_t> y16;
      std::vector<float> y;
      for (const float v : want.y) {
        y16.push_back(km::to_half(v, format));
        y.push_back(km::from_half(y16.back(), format));
      }
      km::norm_backward_on_host(x.data(), k.dy.data(), k.rows, k.channels, k.gamma.data(),
                                want.mean.data(), want.invstd.data(), want.dgamma.data(),
                                want.dbeta.data(), want.dx.data(), relu ? y.data() : nullptr);
      // Read with the format known at run time (HalfValues) and at compile time (HalfValuesIn,
      // as the CUDA kernels read them).
      const auto passes_on = [&](auto saved_x, auto saved_y) {
        Mirror got = blank_mirror(k, k.rows);
        km::norm_forward_on_host(saved_x, k.rows, k.channels, k.gamma.data(), k.beta.data(), kEps,
                                 kMomentum, got.y.data(), got.running_mean.data(),
                                 got.running_var.data(), &got.num_batches_tracked, got.mean.data(),
                                 got.invstd.data(), relu);
        km::norm_backward_on_host(saved_x, k.dy.data(), k.rows, k.channels, k.gamma.data(),
                                  got.mean.data(), got.invstd.data(), got.dgamma.data(),
                                  got.dbeta.data(), got.dx.data(), saved_y);
        EXPECT_EQ(got.y, want.y);
        EXPECT_EQ(got.running_var, want.running_var);
        EXPECT_EQ(got.dgamma, want.dgamma);
        EXPECT_EQ(got.dbeta, want.dbeta);
        EXPECT_EQ(got.dx, want.dx);
      };
      const uint16_t* saved_y = relu ? y16.data() : nullptr;
      passes_on(km::HalfValues{x16.data(), format}, km::HalfValues{saved_y, format});
      km::with_half_format(format, [&](auto f) {
        passes_on(km::HalfValuesIn<f()>{x16.data()}, km::HalfValuesIn<f()>{saved_y});
      });
    }
  }
}

// Without dx, backward writes the parameter gradients alone.
TEST(KernelMathNorm, BackwardWithoutTheInputsGradientWritesOnlyTheParameters) {
  const Case k = make_case(9, 2, 0.0f, 8);
  const Mirror m = mirror(k);
  std::vector<float> dgamma(2, 7.0f);
  std::vector<float> dbeta(2, 7.0f);
  km::norm_backward_on_host(k.x.data(), k.dy.data(), k.rows, k.channels, k.gamma.data(),
                            m.mean.data(), m.invstd.data(), dgamma.data(), dbeta.data(), nullptr);
  EXPECT_EQ(dgamma, m.dgamma);
  EXPECT_EQ(dbeta, m.dbeta);
}

// The host mirror adds a channel's values in the bias gradient's GPU order (bias_math.h), bit
// for bit: the order norm_ops.cu's reduction kernel shares with bias_grad_kernel (its terms
// here x itself, as the bias gradient's are).
TEST(KernelMathNorm, ChannelSumsFollowTheBiasGradientsOrder) {
  struct ValueTerm {
    const float* x;
    int64_t channels;
    km::SumPair operator()(int64_t r, int64_t c) const { return {x[r * channels + c], 0.0f}; }
  };
  for (const int64_t rows : {1, 7, 512, 513, 5000, 70001}) {
    const int64_t channels = 3;
    const std::vector<float> x = uniform(rows * channels, 40, -1.0f, 1.0f);
    const km::BiasGradPlan plan = km::bias_grad_plan(rows);
    for (int64_t c = 0; c < channels; ++c) {
      std::vector<float> parts;
      for (int64_t p = 0; p < plan.parts; ++p) {
        const km::IndexRange part = km::bias_grad_part_rows(plan, rows, p);
        float threads[km::kBiasTileRows];
        for (int t = 0; t < km::kBiasTileRows; ++t) {
          threads[t] = km::strided_column_sum(x.data(), channels, c, part.begin + t, part.end,
                                              km::kBiasTileRows);
        }
        parts.push_back(km::ordered_sum(threads, km::kBiasTileRows, 1));
      }
      const float want = km::ordered_sum(parts.data(), plan.parts, 1);
      const km::SumPair got = km::norm_channel_sum_on_host(ValueTerm{x.data(), channels}, rows, c);
      EXPECT_EQ(got.a, want) << rows << " rows, channel " << c;
      EXPECT_EQ(got.b, 0.0f);
    }
  }
}

// The forward's statistics from one read of x (norm_math.h's moments) at row counts where
// row-threads have no rows (fewer than kBiasTileRows), where a thread's last batch is short of
// kTermsAhead, and over many parts (bias_math.h's plan): the count, mean and Σ(x - mean)² of the
// channel, against float64, around a mean far from zero.
TEST(KernelMathNorm, TheMomentsOfAnyRowCountAreTheChannelsMeanAndSquaredDeviations) {
  for (const int64_t rows : {1, 2, 7, 9, 65, 513, 5000, 70001}) {
    const int64_t channels = 2;
    const std::vector<float> x = uniform(rows * channels, 41, 49.0f, 51.0f);
    for (int64_t c = 0; c < channels; ++c) {
      SCOPED_TRACE(testing::Message() << rows << " rows, channel " << c);
      double sum = 0.0;
      for (int64_t r = 0; r < rows; ++r) sum += x[static_cast<size_t>(r * channels + c)];
      const double mean = sum / static_cast<double>(rows);
      double m2 = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        const double d = x[static_cast<size_t>(r * channels + c)] - mean;
        m2 += d * d;
      }
      const km::Moments got = km::norm_channel_moments_on_host(x.data(), rows, channels, c);
      EXPECT_EQ(got.count, rows);
      EXPECT_NEAR(got.mean, mean, 1e-6 * 50.0);
      // M2 is n·var with var about 1/3: a few float roundings of x - mean, relative to it.
      EXPECT_NEAR(got.m2, m2, 1e-5 * std::max(m2, 1.0));
    }
  }
}

// --sync-batchnorm on the host: the case's rows split into `replicas` equal batches, each
// running the mirror of the CUDA stages, with the sync values summed over the replicas in rank
// order between two stages, as the all-reduce does. One Mirror per replica.
std::vector<Mirror> synchronized_mirrors(const Case& k, int replicas) {
  const int64_t rows = k.rows / replicas;
  const int64_t cs = k.channels;
  std::vector<Mirror> m(static_cast<size_t>(replicas), blank_mirror(k, rows));
  const int64_t floats = km::norm_sync_buffer_floats(cs, replicas);
  // NaN where no stage wrote: a value the all-reduce would sum without a replica writing it.
  std::vector<std::vector<float>> sync(m.size(), std::vector<float>(static_cast<size_t>(floats)));
  const auto all_reduce = [&](int64_t count) {
    std::vector<float> total(static_cast<size_t>(count), 0.0f);
    for (const std::vector<float>& s : sync) {
      for (size_t i = 0; i < total.size(); ++i) total[i] += s[i];
    }
    for (std::vector<float>& s : sync) std::copy(total.begin(), total.end(), s.begin());
  };
  const auto each = [&](const auto& stage) {
    for (size_t r = 0; r < m.size(); ++r) {
      const size_t first = r * static_cast<size_t>(rows * cs);
      stage(static_cast<int>(r), k.x.data() + first, k.dy.data() + first, m[r], sync[r].data());
    }
  };
  for (std::vector<float>& s : sync) std::fill(s.begin(), s.end(), NAN);
  each([&](int rank, const float* x, const float*, Mirror&, float* s) {
    km::norm_forward_stage0_on_host(x, rows, cs, rank, replicas, s);
  });
  all_reduce(km::norm_forward_sync_floats(cs, replicas));
  each([&](int, const float* x, const float*, Mirror& r, float* s) {
    km::norm_forward_stage1_on_host(x, rows, cs, replicas, k.gamma.data(), k.beta.data(), kEps,
                                    kMomentum, s, r.y.data(), r.running_mean.data(),
                                    r.running_var.data(), &r.num_batches_tracked, r.mean.data(),
                                    r.invstd.data());
  });
  each([&](int, const float* x, const float* dy, Mirror& r, float* s) {
    km::norm_backward_stage0_on_host(x, dy, rows, cs, r.mean.data(), r.invstd.data(),
                                     r.dgamma.data(), r.dbeta.data(), s);
  });
  all_reduce(km::norm_backward_sync_floats(cs));
  each([&](int, const float* x, const float* dy, Mirror& r, float* s) {
    km::norm_backward_stage1_on_host(x, dy, rows, cs, replicas, k.gamma.data(), r.mean.data(),
                                     r.invstd.data(), s, r.dx.data());
  });
  return m;
}

// The replicas' `part` of the batch, concatenated in rank order; or summed (gradients).
std::vector<float> concatenated(const std::vector<Mirror>& m, std::vector<float> Mirror::*part) {
  std::vector<float> all;
  for (const Mirror& r : m) all.insert(all.end(), (r.*part).begin(), (r.*part).end());
  return all;
}
std::vector<double> summed(const std::vector<Mirror>& m, std::vector<float> Mirror::*part) {
  std::vector<double> sum((m[0].*part).size(), 0.0);
  for (const Mirror& r : m) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += (r.*part)[i];
  }
  return sum;
}

// Two and three replicas, down to two rows each, over the shapes of the unsynchronized test:
// every replica's output and input gradient are the whole batch's, its statistics are the
// whole batch's and the same on every replica, and its parameter gradients are its share of
// the whole batch's (the gradient all-reduce adds them).
TEST(KernelMathNorm, SynchronizedStagesOverReplicasAreTheWholeBatchsBatchNorm) {
  struct Shape {
    int64_t rows, channels;
    float offset;
  };
  for (const int replicas : {2, 3}) {
    for (const Shape& s : {Shape{6, 3, 0.0f}, Shape{60, 4, 0.0f}, Shape{1302, 5, 0.3f},
                           Shape{72, 40, 0.0f}, Shape{600, 3, 100.0f}}) {
      SCOPED_TRACE(testing::Message() << replicas << " replicas, " << s.rows << " rows, "
                                      << s.channels << " channels, offset " << s.offset);
      const Case k = make_case(s.rows, s.channels, s.offset, 23);
      const Reference want = reference(k);
      const std::vector<Mirror> got = synchronized_mirrors(k, replicas);
      const double tol = 1e-5;  // as unsynchronized, offset 100 the worst case
      for (const Mirror& r : got) {
        EXPECT_EQ(r.mean, got[0].mean);
        EXPECT_EQ(r.invstd, got[0].invstd);
        EXPECT_EQ(r.running_mean, got[0].running_mean);
        EXPECT_EQ(r.running_var, got[0].running_var);
        EXPECT_EQ(r.num_batches_tracked, 5.0f);
      }
      EXPECT_LE(relative_error(got[0].mean, want.mean), 1e-6);
      EXPECT_LE(relative_error(got[0].invstd, want.invstd), tol);
      EXPECT_LE(relative_error(got[0].running_mean, want.running_mean), 1e-6);
      // The unbiased variance divides by rows·replicas - 1, not by a replica's rows - 1.
      EXPECT_LE(relative_error(got[0].running_var, want.running_var), tol);
      EXPECT_LE(relative_error(concatenated(got, &Mirror::y), want.y), tol);
      EXPECT_LE(relative_error(summed(got, &Mirror::dbeta), want.dbeta), tol);
      EXPECT_LE(relative_error(summed(got, &Mirror::dgamma), want.dgamma), tol);
      EXPECT_LE(relative_error(concatenated(got, &Mirror::dx), want.dx, dx_terms(k, want)), tol);
    }
  }
}

// One replica's stages are the unsynchronized passes, bit for bit: its moments gathered into
// its slot and merged alone are the moments, and dx reads the same Σdy and Σdy·x̂.
TEST(KernelMathNorm, OneReplicasStagesAreTheUnsynchronizedPasses) {
  for (const int64_t rows : {2, 50, 1300}) {
    for (const float offset : {0.3f, 100.0f}) {
      SCOPED_TRACE(testing::Message() << rows << " rows, offset " << offset);
      const Case k = make_case(rows, 5, offset, 31);
      const Mirror want = mirror(k);
      const std::vector<Mirror> got = synchronized_mirrors(k, 1);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].mean, want.mean);
      EXPECT_EQ(got[0].invstd, want.invstd);
      EXPECT_EQ(got[0].running_mean, want.running_mean);
      EXPECT_EQ(got[0].running_var, want.running_var);
      EXPECT_EQ(got[0].num_batches_tracked, want.num_batches_tracked);
      EXPECT_EQ(got[0].y, want.y);
      EXPECT_EQ(got[0].dgamma, want.dgamma);
      EXPECT_EQ(got[0].dbeta, want.dbeta);
      EXPECT_EQ(got[0].dx, want.dx);
    }
  }
}

// The gathered moments: each replica's in its own slot and zeros in the others', so that the
// all-reduce's sum holds every replica's as it wrote them; merged in rank order, the same on
// every replica whatever order the all-reduce added in.
TEST(KernelMathNorm, GatheredMomentsAreEachReplicasInItsSlot) {
  const int replicas = 3;
  const int64_t channels = 2;
  std::vector<float> total(static_cast<size_t>(km::norm_forward_sync_floats(channels, replicas)),
                           0.0f);
  const km::Moments mine[replicas] = {{7, 1.5f, 2.25f}, {7, -3.0f, 0.5f}, {7, 4.0f, 8.0f}};
  for (int rank = replicas - 1; rank >= 0; --rank) {  // the sum in reverse rank order
    std::vector<float> slots(total.size(), NAN);
    for (int64_t c = 0; c < channels; ++c) {
      km::norm_gather_moments(mine[rank], rank, replicas, channels, c, slots.data());
    }
    for (size_t i = 0; i < total.size(); ++i) total[i] += slots[i];
  }
  for (int rank = 0; rank < replicas; ++rank) {
    for (int64_t c = 0; c < channels; ++c) {
      EXPECT_EQ(total[static_cast<size_t>(2 * channels * rank + c)], mine[rank].mean);
      EXPECT_EQ(total[static_cast<size_t>(2 * channels * rank + channels + c)], mine[rank].m2);
    }
  }
  const km::Moments want = km::merge_moments(km::merge_moments(mine[0], mine[1]), mine[2]);
  const km::Moments got = km::norm_merge_gathered_moments(total.data(), replicas, 7, channels, 1);
  EXPECT_EQ(got.count, 21);
  EXPECT_EQ(got.mean, want.mean);
  EXPECT_EQ(got.m2, want.m2);
}

// Evaluation normalizes with the running statistics: the same element function, fed them.
TEST(KernelMathNorm, EvaluationNormalizesWithTheRunningStatistics) {
  const std::vector<float> x = uniform(64, 3, -3.0f, 3.0f);
  const float rm = 0.25f;
  const float rv = 2.5f;
  const float gamma = -1.5f;
  const float beta = 0.75f;
  for (const float v : x) {
    const double want =
        gamma * (v - rm) / std::sqrt(static_cast<double>(rv) + static_cast<double>(kEps)) + beta;
    const float got = km::norm_forward_element(v, rm, km::norm_invstd(rv, kEps), gamma, beta);
    EXPECT_NEAR(got, want, 1e-6 * std::max(1.0, std::abs(want))) << v;
  }
}

TEST(KernelMathNorm, MomentumZeroKeepsAndOneReplacesTheRunningStatistic) {
  EXPECT_EQ(km::norm_running_update(0.3f, 0.9f, 0.0f), 0.3f);
  EXPECT_EQ(km::norm_running_update(0.3f, 0.9f, 1.0f), 0.9f);
  // The unbiased variance of the two values 1 and 3: 2, where the biased one is 1.
  const km::NormVariance v = km::norm_variance(2.0f, 2, kEps);
  EXPECT_EQ(v.biased, 1.0f);
  EXPECT_EQ(v.unbiased, 2.0f);
  EXPECT_FLOAT_EQ(v.invstd, 1.0f / std::sqrt(1.0f + kEps));
}

}  // namespace
}  // namespace scalescope::kernel_math_test
