// The gradient noise scale of McCandlish et al., "An Empirical Model of Large-Batch Training"
// (2018), appendix A, from what data-parallel training computes anyway: every step has each
// replica's gradient of a small batch and their average, the gradient of the global batch.
//
// A gradient of a batch of B samples drawn from the data has E|G_B|² = |G|² + tr(Σ)/B, where G
// is the true gradient and Σ the per-sample gradients' covariance. Two batch sizes give two
// equations, hence unbiased estimates of |G|² and tr(Σ) per step; their ratio
// B_noise = tr(Σ)/|G|² is the batch beyond which a larger batch stops cutting the steps to a
// target proportionally: the steps S needed at batch B follow S/S_min = 1 + B_noise/B.
//
// Single steps are noisy (the |G|² estimate is often negative), so the ratio is taken only of
// smoothed estimates, as the paper does: per run, exponential moving averages of each estimate
// separately; per point of a sweep, the means over its measured steps, with a bootstrap
// interval over the steps.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reports/analysis/stats.h"

namespace scalescope {

// One step's squared gradient norms: `small`, the mean over the replicas of their micro-batch
// gradient's; `big`, the averaged (global batch) gradient's.
struct GradSqNorms {
  double small = 0.0;
  double big = 0.0;
};

// The two batch sizes: the micro-batch of one replica, and the global batch.
struct NoiseBatches {
  int64_t small = 0;
  int64_t big = 0;
};
// Whether the noise scale can be estimated: two different batch sizes (more than one replica,
// or accumulation over micro-batches).
inline bool estimable(NoiseBatches b) {
  return b.small > 0 && b.big > b.small;
}

struct NoiseEstimate {
  double grad_sq = 0.0;  // |G|²
  double trace = 0.0;    // tr(Σ)
};
// The unbiased estimates of one step (either may be negative). REQUIRES: estimable(b).
NoiseEstimate estimate_noise(GradSqNorms norms, NoiseBatches b);

// tr(Σ)/|G|², or nothing when |G|²'s estimate is not positive (the gradient is all noise as
// far as the estimate can tell).
std::optional<double> noise_scale_of(NoiseEstimate e);

// How much each step's estimate weighs in the moving averages: about the last 1/weight steps.
inline constexpr double kNoiseSmoothing = 0.05;

struct NoiseStep {
  NoiseEstimate raw;
  NoiseEstimate smoothed;         // moving averages, corrected for their start at zero (as Adam's)
  std::optional<double> b_noise;  // of `smoothed`
};
// Per step, in order. REQUIRES: estimable(b), 0 < weight <= 1.
std::vector<NoiseStep> smooth_noise(std::span<const GradSqNorms> steps, NoiseBatches b,
                                    double weight = kNoiseSmoothing);

// Over a set of steps (a run's measured steps, a sweep point's repeats).
struct NoiseScale {
  NoiseBatches batches;
  int64_t steps = 0;
  NoiseEstimate mean;  // means of the steps' estimates
  // mean.trace / mean.grad_sq with a 95% bootstrap interval over the steps; absent when
  // mean.grad_sq is not positive. `high` is infinite when some resamples had no positive
  // |G|² estimate: the data bound B_noise from below only.
  std::optional<Interval> b_noise;
};
// REQUIRES: estimable(b), steps non-empty.
NoiseScale summarize_noise(std::span<const GradSqNorms> steps, NoiseBatches b);

// {"batch_small", "batch_big", "steps", "grad_sq", "trace", "b_noise", "b_noise_low",
// "b_noise_high", "steps_over_minimum"}: the B_noise figures null when absent or unbounded;
// steps_over_minimum at the big batch.
nlohmann::json to_json(const NoiseScale& s);
// One step's {"grad_sq", "trace", "b_noise"} (null when absent).
nlohmann::json to_json(const NoiseEstimate& e);

// What the noise scale predicts for training at global batch `batch`: the steps to a target
// relative to the fewest any batch could need, 1 + B_noise/batch.
double steps_over_minimum(double b_noise, int64_t batch);

// What a larger global batch costs in samples: training at `big` against training at `small`
// to the same target, as the noise scale predicts. Samples to a target at batch B are
// E_min·(1 + B/B_noise), so
//   steps_saved  = steps at `small` / steps at `big` = (1 + B_noise/small) / (1 + B_noise/big),
//                  between 1 and big/small (no more than the batch grew);
//   efficiency   = samples at `small` / samples at `big` = (small + B_noise) / (big + B_noise),
//                  the statistical efficiency, steps_saved / (big/small), in (small/big, 1].
// A time-to-accuracy speedup is then the throughput speedup × efficiency.
struct StatisticalScaling {
  double b_noise = 0.0;
  int64_t small = 0;
  int64_t big = 0;
  double steps_saved = 1.0;
  double efficiency = 1.0;
};
// REQUIRES: 0 < small <= big, b_noise >= 0.
StatisticalScaling statistical_scaling(double b_noise, int64_t small, int64_t big);

// Why a run that asked for the noise scale has none: one replica without accumulation gives
// only one batch size.
const char* noise_scale_unavailable_reason();

}  // namespace scalescope
