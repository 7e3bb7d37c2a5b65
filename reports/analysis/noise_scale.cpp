#include "reports/analysis/noise_scale.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace scalescope {

NoiseEstimate estimate_noise(GradSqNorms norms, NoiseBatches b) {
  SS_CHECK(estimable(b), "a noise scale from batches of {} and {} samples", b.small, b.big);
  const auto small = static_cast<double>(b.small);
  const auto big = static_cast<double>(b.big);
  // Solving E|G_B|² = |G|² + tr(Σ)/B for the two batch sizes (the paper's eq. A.2 and A.3).
  return {.grad_sq = (big * norms.big - small * norms.small) / (big - small),
          .trace = (norms.small - norms.big) / (1.0 / small - 1.0 / big)};
}

std::optional<double> noise_scale_of(NoiseEstimate e) {
  if (!(e.grad_sq > 0.0)) return std::nullopt;
  return e.trace / e.grad_sq;
}

std::vector<NoiseStep> smooth_noise(std::span<const GradSqNorms> steps, NoiseBatches b,
                                    double weight) {
  SS_CHECK(weight > 0.0 && weight <= 1.0, "a moving average weight of {}", weight);
  std::vector<NoiseStep> out;
  out.reserve(steps.size());
  NoiseEstimate average;
  double kept = 1.0;  // (1 - weight)^t: what the zero start still weighs
  for (const GradSqNorms& norms : steps) {
    NoiseStep s;
    s.raw = estimate_noise(norms, b);
    average.grad_sq += weight * (s.raw.grad_sq - average.grad_sq);
    average.trace += weight * (s.raw.trace - average.trace);
    kept *= 1.0 - weight;
    s.smoothed = {average.grad_sq / (1.0 - kept), average.trace / (1.0 - kept)};
    s.b_noise = noise_scale_of(s.smoothed);
    out.push_back(s);
  }
  return out;
}

namespace {

// Resamples with no positive |G|² estimate: B_noise is unbounded. The largest double rather
// than infinity keeps percentile()'s interpolation finite; it turns back into infinity below.
constexpr double kUnbounded = std::numeric_limits<double>::max();

double unbounded_to_infinity(double v) {
  return v >= kUnbounded / 2 ? std::numeric_limits<double>::infinity() : v;
}

}  // namespace

NoiseScale summarize_noise(std::span<const GradSqNorms> steps, NoiseBatches b) {
  SS_CHECK(!steps.empty(), "a noise scale over no steps");
  std::vector<NoiseEstimate> estimates;
  estimates.reserve(steps.size());
  for (const GradSqNorms& norms : steps) estimates.push_back(estimate_noise(norms, b));
  // The ratio of the means over a set of steps, given by their indices: a paired bootstrap
  // resamples steps, each with both of its estimates.
  const auto ratio = [&](std::span<const double> indices) {
    NoiseEstimate sum;
    for (const double i : indices) {
      sum.grad_sq += estimates[static_cast<size_t>(i)].grad_sq;
      sum.trace += estimates[static_cast<size_t>(i)].trace;
    }
    return sum.grad_sq > 0.0 ? sum.trace / sum.grad_sq : kUnbounded;
  };
  NoiseScale s;
  s.batches = b;
  s.steps = static_cast<int64_t>(steps.size());
  for (const NoiseEstimate& e : estimates) {
    s.mean.grad_sq += e.grad_sq / static_cast<double>(steps.size());
    s.mean.trace += e.trace / static_cast<double>(steps.size());
  }
  if (!noise_scale_of(s.mean)) return s;
  std::vector<double> indices(steps.size());
  std::iota(indices.begin(), indices.end(), 0.0);
  Interval ci = bootstrap_ci(indices, ratio);
  ci.value = *noise_scale_of(s.mean);
  ci.low = unbounded_to_infinity(ci.low);
  ci.high = unbounded_to_infinity(ci.high);
  s.b_noise = ci;
  return s;
}

namespace {

nlohmann::json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const NoiseScale& s) {
  nlohmann::json j = {{"batch_small", s.batches.small},
                      {"batch_big", s.batches.big},
                      {"steps", s.steps},
                      {"grad_sq", s.mean.grad_sq},
                      {"trace", s.mean.trace},
                      {"b_noise", nullptr},
                      {"b_noise_low", nullptr},
                      {"b_noise_high", nullptr},
                      {"steps_over_minimum", nullptr}};
  if (s.b_noise) {
    j["b_noise"] = s.b_noise->value;
    j["b_noise_low"] = finite_or_null(s.b_noise->low);
    j["b_noise_high"] = finite_or_null(s.b_noise->high);
    j["steps_over_minimum"] = steps_over_minimum(s.b_noise->value, s.batches.big);
  }
  return j;
}

nlohmann::json to_json(const NoiseEstimate& e) {
  const std::optional<double> b = noise_scale_of(e);
  return {{"grad_sq", e.grad_sq},
          {"trace", e.trace},
          {"b_noise", b ? nlohmann::json(*b) : nlohmann::json(nullptr)}};
}

double steps_over_minimum(double b_noise, int64_t batch) {
  SS_CHECK(batch > 0, "steps at a batch of {}", batch);
  return 1.0 + b_noise / static_cast<double>(batch);
}

StatisticalScaling statistical_scaling(double b_noise, int64_t small, int64_t big) {
  SS_CHECK(small > 0 && big >= small && b_noise >= 0.0,
           "statistical scaling from batch {} to {} at a noise scale of {}", small, big, b_noise);
  StatisticalScaling s{.b_noise = b_noise, .small = small, .big = big};
  s.steps_saved = steps_over_minimum(b_noise, small) / steps_over_minimum(b_noise, big);
  s.efficiency = (static_cast<double>(small) + b_noise) / (static_cast<double>(big) + b_noise);
  return s;
}

const char* noise_scale_unavailable_reason() {
  return "one replica without accumulation computes the gradient of one batch size only, and "
         "the noise scale compares two: run on more devices, or with --accumulate 2 or more";
}

}  // namespace scalescope
