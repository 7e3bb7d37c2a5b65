// Analysis of a sweep's measurements: where the step time goes (a bottleneck verdict), why
// efficiency at N devices falls short of ideal (a loss breakdown), the alpha-beta cost model
// of all-reduce, and a projection of efficiency to device counts not measured. Plain numbers
// in, numbers out: nothing here touches a device. Times are milliseconds.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/nvtx.h"
#include "core/phases.h"
#include "reports/analysis/noise_scale.h"
#include "reports/phases.h"

namespace scalescope {

// Median over measured steps of one replica (or of the group: per step, the phases of the
// slowest replica, since that replica sets the step time), per phase of the schema.
struct PhaseMedians : PhaseValues {
  double step_ms = 0;
  double compute_ms() const { return exposed_ms(PhaseKind::kCompute); }
};

// ---------------------------------------------------------------------------------------
// Bottleneck verdict.

// Thresholds, as shares of the group's step time unless said otherwise. The input ones are
// the TensorFlow input-pipeline analyzer's (>= 20% "highly input-bound", >= 5% "moderately").
inline constexpr double kInputHighShare = 0.20;
inline constexpr double kInputModerateShare = 0.05;
inline constexpr double kCommHighShare = 0.20;  // exposed all-reduce
inline constexpr double kCommModerateShare = 0.05;
// Slowest replica's compute / median replica's compute.
inline constexpr double kStragglerRatio = 1.10;
inline constexpr double kStragglerHighRatio = 1.25;
// Device idle share (step - device busy) / step; known only on GPUs.
inline constexpr double kHostIdleShare = 0.20;
inline constexpr double kHostIdleHighShare = 0.50;

inline constexpr const char* kSeverityHigh = "high";
inline constexpr const char* kSeverityModerate = "moderate";
// Severity of the compute-bound fallback: the healthy state, nothing to fix upstream.
inline constexpr const char* kSeverityInfo = "info";

struct Finding {
  std::string kind;         // "input-bound", "communication-bound", "straggler", "host-bound",
                            // "compute-bound"; at N devices also "contention", "unattributed",
                            // "oversubscribed", "statistically-limited"
  std::string severity;     // kSeverityHigh, kSeverityModerate, kSeverityInfo
  std::string explanation;  // one line with the numbers, for a terminal or a report
  double share = 0;         // fraction of the step this finding explains (the ranking key)
  std::map<std::string, double> numbers;  // the figures behind it, by name
};

struct Verdict {
  // Every finding that fired, most of the step explained first; never empty ("compute-bound"
  // alone when nothing fired).
  std::vector<Finding> findings;
  const Finding& top() const;
};

struct VerdictInput {
  PhaseMedians group;
  std::vector<PhaseMedians> replicas;    // may be empty (no straggler rule then)
  std::optional<double> device_busy_ms;  // GPU only: time the device ran kernels per step
};

// Rules (each fires at or above its threshold):
//   input-bound          input wait / step >= kInputModerateShare; high at kInputHighShare
//   communication-bound  exposed all-reduce / step >= kCommModerateShare; high at kCommHighShare
//   straggler            max replica compute / median replica compute >= kStragglerRatio
//                        (high at kStragglerHighRatio); needs >= 2 replicas; share explained
//                        = (max - median replica compute) / step
//   host-bound           (step - device busy) / step >= kHostIdleShare (high at
//                        kHostIdleHighShare); only when device_busy_ms is known
//   compute-bound        when nothing else fires; share = compute / step
// Input wait, compute and exposed all-reduce are the exposed phases of each PhaseKind.
// REQUIRES: group.step_ms > 0.
Verdict diagnose(const VerdictInput& input);

// ---------------------------------------------------------------------------------------
// Efficiency-loss breakdown.

// What efficiency at N devices is lost to: the components of a loss breakdown.
enum class LossCause { kAllReduce, kInput, kContention, kStragglers, kOther };

struct LossCauseDef {
  LossCause cause;
  const char* key;    // in the JSON ("efficiency_loss") and the HTML (data-step)
  const char* label;  // tables' columns and charts' bars
  // The finding it is (explain_scaling), and how that finding's explanation begins (null:
  // contention's finding explains itself, with its compute times and thread budget).
  const char* finding;
  const char* costs;
  Rgb color;  // in charts: the colour of the phases whose excess it measures, where it has any
};

// The components, in the order of the JSON, tables, charts and bootstrap intervals (row i
// describes LossCause i).
inline constexpr auto kLossCauses = std::to_array<LossCauseDef>({
    {LossCause::kAllReduce, "allreduce", "all-reduce", "communication-bound",
     "exposed all-reduce costs", phase_color(Phase::kAllReduceExposed)},
    {LossCause::kInput, "input", "input", "input-bound", "input wait beyond one device's costs",
     phase_color(Phase::kInput)},
    {LossCause::kContention, "compute_slowdown", "contention", "contention", nullptr,
     phase_color(Phase::kBackward)},
    {LossCause::kStragglers,
     "stragglers",
     "stragglers",
     "straggler",
     "waiting for the slowest replica costs",
     {0x7b, 0x5e, 0xa7}},
    {LossCause::kOther, "other", "other", "unattributed", "time outside the timed phases costs",
     nvtx::kStep.color},
});
inline constexpr size_t kLossCauseCount = kLossCauses.size();
constexpr size_t index_of(LossCause cause) {
  return static_cast<size_t>(cause);
}
constexpr const LossCauseDef& loss_cause_def(LossCause cause) {
  return kLossCauses[index_of(cause)];
}
static_assert(
    [] {
      for (size_t i = 0; i < kLossCauseCount; ++i) {
        if (index_of(kLossCauses[i].cause) != i) return false;
      }
      return true;
    }(),
    "kLossCauses: row i describes LossCause i");

// efficiency = ideal_step_ms / group_at_n.step_ms. The caller picks the ideal: weak scaling
// (same per-replica batch) ideal = one-device step; strong scaling (same global batch) ideal =
// one-device step / N. Let s = ideal_step_ms / one_device.step_ms: the ideal run is the
// one-device run with every phase scaled by s (s = 1 under weak scaling). Each share is extra
// milliseconds at N over that ideal, divided by group_at_n.step_ms:
//   kAllReduce  = (exposed all-reduce at N - s * exposed at 1) / step_N
//   kInput      = (input wait at N - s * input wait at 1) / step_N
//   kContention = (median replica compute at N - s * compute at 1) / step_N
//                 (per-replica slowdown: contention, clocks, memory bandwidth)
//   kStragglers = (group compute at N - median replica compute at N) / step_N
//                 (the group's phases are the slowest replica's per step, so this is the
//                 compute the step waited for beyond a typical replica; it catches both a
//                 persistently slow replica and a different one lagging each step)
//   kOther      = lost - the four above (phases the timer does not split out, and rounding),
//                 so the shares sum to lost exactly.
// Components may be negative (a phase got faster at N); none is clamped.
struct LossBreakdown {
  double efficiency = 0;
  double lost = 0;                               // 1 - efficiency
  std::array<double, kLossCauseCount> shares{};  // by LossCause
  double share(LossCause cause) const { return shares[index_of(cause)]; }
  double& share(LossCause cause) { return shares[index_of(cause)]; }
  // The compute behind the contention share, for its finding (not in the JSON).
  double compute_ms = 0;        // median replica compute at N
  double ideal_compute_ms = 0;  // s * compute at one device
  // Each share's 95% bootstrap interval over the measured steps of both points, when computed
  // (the sweep analysis does: loss_intervals), by LossCause.
  struct Range {
    double low = 0;
    double high = 0;
  };
  std::optional<std::array<Range, kLossCauseCount>> intervals;
};
// REQUIRES: one_device.step_ms > 0, group_at_n.step_ms > 0, ideal_step_ms > 0, replicas_at_n
// non-empty.
LossBreakdown efficiency_loss(const PhaseMedians& one_device,
                              const std::vector<PhaseMedians>& replicas_at_n,
                              const PhaseMedians& group_at_n, double ideal_step_ms);

// One share of a loss breakdown, as tables, charts, the JSON and the verdict read it.
struct LossComponent {
  const LossCauseDef* def = &kLossCauses[0];
  double share = 0;
  std::optional<LossBreakdown::Range> interval;
  // A loss beyond measurement noise: the whole interval above 0 (without one, a positive
  // share). Anything else — an interval that reaches 0, a negative share — is no finding.
  bool beyond_noise() const { return interval ? interval->low > 0.0 : share > 0.0; }
  // The interval holds 0: the share cannot be told from none.
  bool within_noise() const { return interval && interval->low <= 0.0 && interval->high >= 0.0; }
};
// The shares in kLossCauses' order, with their intervals when computed.
std::array<LossComponent, kLossCauseCount> loss_components(const LossBreakdown& loss);

// ---------------------------------------------------------------------------------------
// Scaling verdict: why a point at N devices falls short of its one-device baseline.

// Thresholds on a component of the loss breakdown, as a share of the step at N.
inline constexpr double kLossModerateShare = 0.05;
inline constexpr double kLossHighShare = 0.20;

// The threads a point's CPU replicas run against the cores the process may use: replicas
// that together run more threads than there are cores take turns on them.
struct ThreadBudget {
  int replicas = 0;
  int compute_per_replica = 0;        // OpenMP threads of each device
  int input_per_replica = 0;          // input pipeline workers
  int communication_per_replica = 0;  // the reducer's thread, Gloo's event loop (as run)
  int usable_cores = 0;
  int total() const {
    return replicas * (compute_per_replica + input_per_replica + communication_per_replica);
  }
};

struct ScalingInput {
  LossBreakdown loss;
  double step_ms = 0;                   // the group's step at N
  std::optional<ThreadBudget> threads;  // CPU devices only
};

// The verdict of a point at N devices, led by its loss breakdown so that the verdict names
// what the efficiency was lost to. Each component at or above kLossModerateShare of the step
// and beyond measurement noise (LossComponent::beyond_noise) is the finding of its row of
// kLossCauses (high at kLossHighShare), the largest first; contention (each replica computes
// slower than one device alone) says by how much, and with a thread budget, why.
// The findings of the step rules (`step_verdict`, from diagnose) of kinds not already named
// follow in their order (an input pipeline already slow on one device, a host-bound GPU);
// compute-bound stays only when nothing else is left. With a thread budget whose replicas run
// more compute threads than there are usable cores, an "oversubscribed" finding (high, its
// share all that was lost) goes first: the other shares are then partly the cores' sharing.
Verdict explain_scaling(const Verdict& step_verdict, const ScalingInput& input);

// Time to accuracy: when the statistical efficiency of the point's larger global batch
// (reports/analysis/noise_scale.h) loses more than kLossModerateShare and more than any component
// of the loss breakdown, a "statistically-limited" finding goes first (high at kLossHighShare): the
// time to a target is then bounded by the samples each step wastes more than by any phase. Its
// share is 1 - efficiency, the fraction of the samples beyond what one device would need.
void add_statistical_finding(Verdict& verdict, const LossBreakdown& loss,
                             const StatisticalScaling& statistics);

// ---------------------------------------------------------------------------------------
// Alpha-beta model of all-reduce: ms = alpha + beta * bytes * 2(N-1)/N. A ring all-reduce
// moves 2(N-1)/N times the buffer over each link, so beta is the inverse bus bandwidth and
// alpha the fixed cost (launch, latency) per call.

struct AllReduceSample {
  int64_t bytes = 0;  // buffer size of one all-reduce (one bucket)
  int devices = 0;
  double ms = 0;
};

struct AlphaBetaFit {
  double alpha_ms = 0;
  double beta_ms_per_byte = 0;
  double r_squared = 0;  // 1 when the fit is exact (including all times equal)
  // 1 / beta in GB/s (1e9 bytes); 0 when beta <= 0 (no per-byte cost found: bandwidth not
  // determined by these samples).
  double bus_bandwidth_gbps = 0;
  int64_t samples = 0;  // samples used (those with devices >= 2)
};

// Ordinary least squares of ms on x = bytes * 2(N-1)/N over the samples with devices >= 2
// (a one-device "all-reduce" moves nothing), alpha at least 0: where the least-squares line
// meets the time axis below 0 (noise on times that a per-byte cost dominates), the least-squares
// line through the origin, r² that line's.
// Throws Error when fewer than 2 distinct x values remain, or on negative bytes or a
// non-finite time.
AlphaBetaFit fit_alpha_beta(std::span<const AllReduceSample> samples);

// A fit is projected from only when it explains the measured all-reduce times: r² (the share
// of their variance the line accounts for) at least kMinProjectionRSquared, over at least
// kMinProjectionSamples buckets (a line passes through any two points), and a per-byte cost
// that is not negative (times that fall as buffers grow describe noise, not a link).
inline constexpr double kMinProjectionRSquared = 0.9;
inline constexpr int64_t kMinProjectionSamples = 3;
// "" when `fit` may be projected from, otherwise why not: "not reliable: r² 0.007 ...".
std::string unreliable_fit_reason(const AlphaBetaFit& fit);

// 2(N-1)/N: how many times a ring all-reduce moves the buffer over each link; 0 at N = 1 (a
// one-device "all-reduce" moves nothing). REQUIRES: devices >= 1.
double bus_factor(int devices);

// nccl-tests definitions. algbw = bytes / time; busbw = algbw * 2(N-1)/N, comparable with
// the link's bandwidth whatever N. GB/s are 1e9 bytes per second.
// REQUIRES: ms > 0, bytes >= 0; devices >= 1.
double algorithm_bandwidth_gbps(int64_t bytes, double ms);
double bus_bandwidth_gbps(int64_t bytes, double ms, int devices);

// ---------------------------------------------------------------------------------------
// Projection beyond the measured device counts.

// Predicted total all-reduce time per step at N devices: sum over buckets of
// alpha + beta * b * 2(N-1)/N; 0 at N = 1 (no collective runs).
// REQUIRES: devices >= 1, bucket sizes >= 0.
double projected_allreduce_ms(const AlphaBetaFit& fit, std::span<const int64_t> bucket_bytes,
                              int devices);

// The all-reduce time backward can hide, taken from a measurement (normally the group at the
// largest measured N): total - exposed, at least 0. Assumes it does not depend on N: backward
// per replica is the same under weak scaling, so the window for overlap is too.
double overlap_capacity_ms(const PhaseMedians& measured);

// step = compute_ms + input_ms + exposed, exposed = max(0, predicted total all-reduce -
// overlap_capacity_ms). input_ms is what the step waits for input (input + h2d).
// REQUIRES: as projected_allreduce_ms; compute_ms, input_ms, overlap_capacity_ms >= 0.
double projected_step_ms(const AlphaBetaFit& fit, std::span<const int64_t> bucket_bytes,
                         int devices, double compute_ms, double input_ms,
                         double overlap_capacity_ms);

struct Projection {
  int devices = 0;
  double allreduce_ms = 0;  // predicted total
  double exposed_ms = 0;    // predicted exposed
  double step_ms = 0;
  double efficiency = 0;  // weak scaling: one_device_step_ms / step_ms
};

// projected_step_ms for each device count, with weak-scaling efficiency against the
// measured one-device step. REQUIRES: one_device_step_ms > 0, and as projected_step_ms.
std::vector<Projection> project_efficiency(const AlphaBetaFit& fit,
                                           std::span<const int64_t> bucket_bytes,
                                           std::span<const int> device_counts,
                                           double one_device_step_ms, double compute_ms,
                                           double input_ms, double overlap_capacity_ms);

}  // namespace scalescope
