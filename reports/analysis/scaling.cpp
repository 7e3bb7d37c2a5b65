#include "reports/analysis/scaling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "core/check.h"
#include "core/device_spec.h"
#include "reports/analysis/stats.h"

namespace scalescope {

namespace {

double percent(double share) {
  return 100.0 * share;
}

const char* two_level(double value, double high) {
  return value >= high ? kSeverityHigh : kSeverityModerate;
}

}  // namespace

const Finding& Verdict::top() const {
  SS_CHECK(!findings.empty(), "top() of a verdict with no findings");
  return findings.front();
}

namespace {

// The exposed phases of a kind, for a finding: each by its JSON key, and "label value" text.
void add_phases(Finding& f, const PhaseMedians& m, PhaseKind kind, std::string& text) {
  for (const PhaseDef& d : kPhases) {
    if (!d.exposed || d.kind != kind) continue;
    f.numbers[d.json_key()] = m[d.phase];
    text += fmt::format("{}{} {:.1f}", text.empty() ? "" : ", ", d.label, m[d.phase]);
  }
}

std::optional<Finding> input_rule(const PhaseMedians& g) {
  const double input_ms = g.exposed_ms(PhaseKind::kInput);
  const double share = input_ms / g.step_ms;
  if (share < kInputModerateShare) return std::nullopt;
  Finding f{"input-bound",
            two_level(share, kInputHighShare),
            "",
            share,
            {{"share", share}, {"step_ms", g.step_ms}}};
  std::string phases;
  add_phases(f, g, PhaseKind::kInput, phases);
  const double copy_ms = g[Phase::kH2DTotal];
  f.numbers[phase_def(Phase::kH2DTotal).json_key()] = copy_ms;
  const std::string copy = copy_ms > g[Phase::kH2D]
                               ? fmt::format(
                                     "; the copy ran {:.1f} ms in total, the rest hidden "
                                     "behind the step before",
                                     copy_ms)
                               : "";
  f.explanation = fmt::format("input wait is {:.0f}% of the step ({:.1f} of {:.1f} ms: {}{})",
                              percent(share), input_ms, g.step_ms, phases, copy);
  return f;
}

std::optional<Finding> communication_rule(const PhaseMedians& g) {
  const double exposed = g[Phase::kAllReduceExposed];
  const double total = g[Phase::kAllReduce];
  const double share = exposed / g.step_ms;
  if (share < kCommModerateShare) return std::nullopt;
  return Finding{"communication-bound",
                 two_level(share, kCommHighShare),
                 fmt::format("exposed all-reduce is {:.0f}% of the step ({:.1f} of {:.1f} ms; "
                             "{:.1f} ms in total, the rest hidden behind backward)",
                             percent(share), exposed, g.step_ms, total),
                 share,
                 {{"share", share},
                  {phase_def(Phase::kAllReduceExposed).json_key(), exposed},
                  {phase_def(Phase::kAllReduce).json_key(), total},
                  {"step_ms", g.step_ms}}};
}

std::optional<Finding> straggler_rule(const VerdictInput& input) {
  if (input.replicas.size() < 2) return std::nullopt;
  std::vector<double> compute;
  compute.reserve(input.replicas.size());
  for (const PhaseMedians& r : input.replicas) compute.push_back(r.compute_ms());
  const double typical = median(compute);
  const double slowest = *std::max_element(compute.begin(), compute.end());
  if (typical <= 0.0) return std::nullopt;
  const double ratio = slowest / typical;
  if (ratio < kStragglerRatio) return std::nullopt;
  const double step = input.group.step_ms;
  const double share = (slowest - typical) / step;
  return Finding{"straggler",
                 two_level(ratio, kStragglerHighRatio),
                 fmt::format("slowest replica computes {:.2f}x the median replica ({:.1f} vs "
                             "{:.1f} ms), {:.0f}% of the step",
                             ratio, slowest, typical, percent(share)),
                 share,
                 {{"share", share},
                  {"ratio", ratio},
                  {"slowest_compute_ms", slowest},
                  {"median_compute_ms", typical},
                  {"step_ms", step}}};
}

std::optional<Finding> host_rule(const VerdictInput& input) {
  if (!input.device_busy_ms) return std::nullopt;
  const double busy = *input.device_busy_ms;
  SS_CHECK(busy >= 0.0, "device busy time of {} ms", busy);
  const double step = input.group.step_ms;
  const double idle_share = (step - busy) / step;
  if (idle_share < kHostIdleShare) return std::nullopt;
  return Finding{"host-bound",
                 two_level(idle_share, kHostIdleHighShare),
                 fmt::format("device idle {:.0f}% of the step (busy {:.1f} of {:.1f} ms)",
                             percent(idle_share), busy, step),
                 idle_share,
                 {{"share", idle_share}, {"device_busy_ms", busy}, {"step_ms", step}}};
}

Finding compute_finding(const PhaseMedians& g) {
  const double share = g.compute_ms() / g.step_ms;
  return {"compute-bound",
          kSeverityInfo,
          fmt::format("compute is {:.0f}% of the step ({:.1f} of {:.1f} ms)", percent(share),
                      g.compute_ms(), g.step_ms),
          share,
          {{"share", share}, {"compute_ms", g.compute_ms()}, {"step_ms", g.step_ms}}};
}

}  // namespace

Verdict diagnose(const VerdictInput& input) {
  const PhaseMedians& g = input.group;
  SS_CHECK(g.step_ms > 0.0, "verdict for a group step time of {} ms", g.step_ms);
  Verdict v;
  for (std::optional<Finding> f :
       {input_rule(g), communication_rule(g), straggler_rule(input), host_rule(input)}) {
    if (f) v.findings.push_back(std::move(*f));
  }
  if (v.findings.empty()) v.findings.push_back(compute_finding(g));
  // Stable: equal shares keep the rule order above.
  std::stable_sort(v.findings.begin(), v.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.share > b.share; });
  return v;
}

namespace {

std::string thread_budget_text(const ThreadBudget& t) {
  return fmt::format(
      "; {} replicas x ({} compute + {} input + {} communication threads) = {} threads on {} "
      "usable cores",
      t.replicas, t.compute_per_replica, t.input_per_replica, t.communication_per_replica,
      t.total(), t.usable_cores);
}

Finding loss_finding(const char* kind, double share, std::string explanation,
                     std::map<std::string, double> numbers) {
  numbers["share"] = share;
  return {kind, two_level(share, kLossHighShare), std::move(explanation), share,
          std::move(numbers)};
}

Finding contention_finding(const ScalingInput& in, double share) {
  const LossBreakdown& l = in.loss;
  const double ratio = l.ideal_compute_ms > 0.0 ? l.compute_ms / l.ideal_compute_ms : 0.0;
  std::map<std::string, double> numbers{{"ratio", ratio},
                                        {"compute_ms", l.compute_ms},
                                        {"one_device_compute_ms", l.ideal_compute_ms}};
  std::string budget;
  if (in.threads) {
    numbers["threads"] = in.threads->total();
    numbers["usable_cores"] = in.threads->usable_cores;
    budget = thread_budget_text(*in.threads);
  }
  return loss_finding(loss_cause_def(LossCause::kContention).finding, share,
                      fmt::format("each replica computes {:.2f}x as long as one device alone "
                                  "({:.1f} vs {:.1f} ms), {:.0f}% of the step: the replicas "
                                  "slow each other down (shared cores, memory bandwidth, "
                                  "communication threads){}",
                                  ratio, l.compute_ms, l.ideal_compute_ms, percent(share), budget),
                      std::move(numbers));
}

std::vector<Finding> loss_findings(const ScalingInput& in) {
  std::vector<Finding> out;
  for (const LossComponent& c : loss_components(in.loss)) {
    // A component is a finding when it is large enough and not within measurement noise.
    if (c.share < kLossModerateShare || !c.beyond_noise()) continue;
    if (c.def->cause == LossCause::kContention) {
      out.push_back(contention_finding(in, c.share));
      continue;
    }
    out.push_back(loss_finding(c.def->finding, c.share,
                               fmt::format("{} {:.0f}% of the step ({:.0f}% lost against ideal "
                                           "in all)",
                                           c.def->costs, percent(c.share), percent(in.loss.lost)),
                               {}));
  }
  for (Finding& f : out) f.numbers["step_ms"] = in.step_ms;
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.share > b.share; });
  return out;
}

// Replicas whose compute threads outnumber the cores take turns on them: what the point lost
// is that sharing's first. The threshold is the one by which a sweep refuses such a point
// unless --oversubscribe is given.
std::optional<Finding> oversubscription_finding(const ScalingInput& in) {
  if (!in.threads) return std::nullopt;
  const ThreadBudget& t = *in.threads;
  if (!oversubscribed(t.replicas, t.compute_per_replica, t.usable_cores)) return std::nullopt;
  const int64_t compute = compute_threads(t.replicas, t.compute_per_replica);
  Finding f = loss_finding(
      "oversubscribed", in.loss.lost,
      fmt::format("{} replicas x {} compute threads = {} threads on {} usable cores: the "
                  "replicas take turns on the cores, so this point measures that sharing more "
                  "than how the devices scale, and every other share of its loss is partly the "
                  "sharing's (a sweep runs it only with --oversubscribe)",
                  t.replicas, t.compute_per_replica, compute, t.usable_cores),
      {{"threads", compute}, {"usable_cores", t.usable_cores}, {"step_ms", in.step_ms}});
  f.severity = kSeverityHigh;  // whatever it lost: its figures are not the devices'
  return f;
}

}  // namespace

Verdict explain_scaling(const Verdict& step_verdict, const ScalingInput& input) {
  Verdict v;
  v.findings = loss_findings(input);
  const auto named = [&](const std::string& kind) {
    return std::any_of(v.findings.begin(), v.findings.end(),
                       [&](const Finding& f) { return f.kind == kind; });
  };
  const size_t from_loss = v.findings.size();
  for (const Finding& f : step_verdict.findings) {
    if (f.kind == "compute-bound" && from_loss > 0) continue;
    if (!named(f.kind)) v.findings.push_back(f);
  }
  if (std::optional<Finding> f = oversubscription_finding(input)) {
    v.findings.insert(v.findings.begin(), std::move(*f));
  }
  return v;
}

void add_statistical_finding(Verdict& verdict, const LossBreakdown& loss,
                             const StatisticalScaling& s) {
  const double share = 1.0 - s.efficiency;
  const double largest_phase = *std::max_element(loss.shares.begin(), loss.shares.end());
  if (share < kLossModerateShare || share <= largest_phase) return;
  Finding f = loss_finding(
      "statistically-limited", share,
      fmt::format("statistically limited: the global batch {} is {:.1f}x the noise scale "
                  "B_noise {:.3g}; expect at most {:.2f}x fewer steps than at batch {} "
                  "(statistical efficiency {:.0f}%), which bounds the time to a target more than "
                  "any phase",
                  s.big, static_cast<double>(s.big) / s.b_noise, s.b_noise, s.steps_saved, s.small,
                  percent(s.efficiency)),
      {{"b_noise", s.b_noise},
       {"global_batch", static_cast<double>(s.big)},
       {"baseline_batch", static_cast<double>(s.small)},
       {"steps_saved", s.steps_saved},
       {"statistical_efficiency", s.efficiency}});
  verdict.findings.insert(verdict.findings.begin(), std::move(f));
}

LossBreakdown efficiency_loss(const PhaseMedians& one_device,
                              const std::vector<PhaseMedians>& replicas_at_n,
                              const PhaseMedians& group_at_n, double ideal_step_ms) {
  SS_CHECK(one_device.step_ms > 0.0, "one-device step time of {} ms", one_device.step_ms);
  SS_CHECK(group_at_n.step_ms > 0.0, "group step time of {} ms", group_at_n.step_ms);
  SS_CHECK(ideal_step_ms > 0.0, "ideal step time of {} ms", ideal_step_ms);
  SS_CHECK(!replicas_at_n.empty(), "efficiency loss with no replicas at N");
  const double scale = ideal_step_ms / one_device.step_ms;
  const double step = group_at_n.step_ms;

  std::vector<double> compute;
  compute.reserve(replicas_at_n.size());
  for (const PhaseMedians& r : replicas_at_n) compute.push_back(r.compute_ms());
  const double typical_compute = median(compute);

  LossBreakdown b;
  b.efficiency = ideal_step_ms / step;
  b.lost = 1.0 - b.efficiency;
  const auto extra = [&](PhaseKind kind) {
    return (group_at_n.exposed_ms(kind) - scale * one_device.exposed_ms(kind)) / step;
  };
  b.share(LossCause::kAllReduce) = extra(PhaseKind::kCommunication);
  b.share(LossCause::kInput) = extra(PhaseKind::kInput);
  b.compute_ms = typical_compute;
  b.ideal_compute_ms = scale * one_device.compute_ms();
  b.share(LossCause::kContention) = (b.compute_ms - b.ideal_compute_ms) / step;
  b.share(LossCause::kStragglers) = (group_at_n.compute_ms() - typical_compute) / step;
  // The rest (still 0 in the sum), so that the shares sum to lost exactly.
  b.share(LossCause::kOther) = b.lost - std::accumulate(b.shares.begin(), b.shares.end(), 0.0);
  return b;
}

std::string unreliable_fit_reason(const AlphaBetaFit& fit) {
  if (fit.samples < kMinProjectionSamples) {
    return fmt::format(
        "not reliable: {} bucket samples, and a line passes through any two (a "
        "projection needs at least {})",
        fit.samples, kMinProjectionSamples);
  }
  if (fit.r_squared < kMinProjectionRSquared) {
    return fmt::format(
        "not reliable: r² {:.3f}, below the {} a projection needs (the fit does "
        "not explain the measured all-reduce times)",
        fit.r_squared, kMinProjectionRSquared);
  }
  if (fit.beta_ms_per_byte < 0.0) {
    return "not reliable: the all-reduce took less time on more bytes (a negative per-byte "
           "cost), which describes noise, not a link";
  }
  return "";
}

std::array<LossComponent, kLossCauseCount> loss_components(const LossBreakdown& l) {
  std::array<LossComponent, kLossCauseCount> out;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].def = &kLossCauses[i];
    out[i].share = l.shares[i];
    if (l.intervals) out[i].interval = (*l.intervals)[i];
  }
  return out;
}

AlphaBetaFit fit_alpha_beta(std::span<const AllReduceSample> samples) {
  std::vector<double> xs;
  std::vector<double> ys;
  for (const AllReduceSample& s : samples) {
    SS_CHECK(s.bytes >= 0, "all-reduce sample of {} bytes", s.bytes);
    SS_CHECK(std::isfinite(s.ms), "all-reduce sample with a time of {} ms", s.ms);
    if (s.devices < 2) continue;
    xs.push_back(static_cast<double>(s.bytes) * bus_factor(s.devices));
    ys.push_back(s.ms);
  }
  const auto [x_min, x_max] = std::minmax_element(xs.begin(), xs.end());
  SS_CHECK(!xs.empty() && *x_min != *x_max,
           "alpha-beta fit needs all-reduce samples of at least 2 distinct sizes "
           "(bytes * 2(N-1)/N) on >= 2 devices; got {} such samples of {} in all, {} distinct",
           xs.size(), samples.size(), xs.empty() ? 0 : 1);

  // Centred sums: bytes reach 1e9, so raw sums of x^2 would lose the small end.
  const double x_mean = mean(xs);
  const double y_mean = mean(ys);
  double sxx = 0;
  double sxy = 0;
  double syy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double dx = xs[i] - x_mean;
    const double dy = ys[i] - y_mean;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  AlphaBetaFit fit;
  fit.beta_ms_per_byte = sxy / sxx;
  fit.alpha_ms = y_mean - fit.beta_ms_per_byte * x_mean;
  if (fit.alpha_ms < 0.0 && fit.beta_ms_per_byte > 0.0) {
    // No call costs less than nothing: the best line through the origin instead (a negative
    // alpha would make small buckets' projected times negative).
    double sxx0 = 0;
    double sxy0 = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      sxx0 += xs[i] * xs[i];
      sxy0 += xs[i] * ys[i];
    }
    fit.alpha_ms = 0.0;
    fit.beta_ms_per_byte = sxy0 / sxx0;
  }
  double ss_res = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double r = ys[i] - (fit.alpha_ms + fit.beta_ms_per_byte * xs[i]);
    ss_res += r * r;
  }
  fit.r_squared = syy > 0.0 ? 1.0 - ss_res / syy : 1.0;
  // beta ms/byte -> 1/beta bytes/ms = 1e3/beta bytes/s = 1e-6/beta GB/s.
  fit.bus_bandwidth_gbps = fit.beta_ms_per_byte > 0.0 ? 1e-6 / fit.beta_ms_per_byte : 0.0;
  fit.samples = static_cast<int64_t>(xs.size());
  return fit;
}

double bus_factor(int devices) {
  SS_CHECK(devices >= 1, "bus factor of {} devices", devices);
  return 2.0 * static_cast<double>(devices - 1) / static_cast<double>(devices);
}

double algorithm_bandwidth_gbps(int64_t bytes, double ms) {
  SS_CHECK(bytes >= 0, "bandwidth of {} bytes", bytes);
  SS_CHECK(ms > 0.0, "bandwidth over {} ms", ms);
  return static_cast<double>(bytes) / (ms * 1e6);  // bytes / (ms * 1e-3 s) / 1e9
}

double bus_bandwidth_gbps(int64_t bytes, double ms, int devices) {
  SS_CHECK(devices >= 1, "bus bandwidth on {} devices", devices);
  return algorithm_bandwidth_gbps(bytes, ms) * bus_factor(devices);
}

double projected_allreduce_ms(const AlphaBetaFit& fit, std::span<const int64_t> bucket_bytes,
                              int devices) {
  SS_CHECK(devices >= 1, "projection to {} devices", devices);
  if (devices == 1) return 0.0;
  double total = 0;
  for (const int64_t b : bucket_bytes) {
    SS_CHECK(b >= 0, "gradient bucket of {} bytes", b);
    total += fit.alpha_ms + fit.beta_ms_per_byte * static_cast<double>(b) * bus_factor(devices);
  }
  return total;
}

double overlap_capacity_ms(const PhaseMedians& measured) {
  return std::max(0.0, measured[Phase::kAllReduce] - measured[Phase::kAllReduceExposed]);
}

namespace {

Projection project_one(const AlphaBetaFit& fit, std::span<const int64_t> bucket_bytes, int devices,
                       double compute_ms, double input_ms, double overlap_capacity_ms) {
  SS_CHECK(compute_ms >= 0.0 && input_ms >= 0.0 && overlap_capacity_ms >= 0.0,
           "projection with compute {} ms, input {} ms, overlap capacity {} ms", compute_ms,
           input_ms, overlap_capacity_ms);
  Projection p;
  p.devices = devices;
  p.allreduce_ms = projected_allreduce_ms(fit, bucket_bytes, devices);
  p.exposed_ms = std::max(0.0, p.allreduce_ms - overlap_capacity_ms);
  p.step_ms = compute_ms + input_ms + p.exposed_ms;
  return p;
}

}  // namespace

double projected_step_ms(const AlphaBetaFit& fit, std::span<const int64_t> bucket_bytes,
                         int devices, double compute_ms, double input_ms,
                         double overlap_capacity_ms) {
  return project_one(fit, bucket_bytes, devices, compute_ms, input_ms, overlap_capacity_ms).step_ms;
}

std::vector<Projection> project_efficiency(const AlphaBetaFit& fit,
                                           std::span<const int64_t> bucket_bytes,
                                           std::span<const int> device_counts,
                                           double one_device_step_ms, double compute_ms,
                                           double input_ms, double overlap_capacity_ms) {
  SS_CHECK(one_device_step_ms > 0.0, "one-device step time of {} ms", one_device_step_ms);
  std::vector<Projection> out;
  out.reserve(device_counts.size());
  for (const int n : device_counts) {
    Projection p = project_one(fit, bucket_bytes, n, compute_ms, input_ms, overlap_capacity_ms);
    SS_CHECK(p.step_ms > 0.0, "projected step time of {} ms at {} devices", p.step_ms, n);
    p.efficiency = one_device_step_ms / p.step_ms;
    out.push_back(p);
  }
  return out;
}

}  // namespace scalescope
