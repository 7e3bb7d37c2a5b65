#include "reports/writers/table.h"

#include "reports/analysis/precision_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <string_view>

#include "reports/analysis/precision_analysis.h"
#include "reports/writers/layer_profile.h"

namespace scalescope {
namespace {

std::string interval(const std::optional<Interval>& i, const char* format, double scale = 1.0) {
  if (!i) return "-";
  return fmt::format(fmt::runtime(format), i->value * scale, i->low * scale, i->high * scale);
}

// fmt 9 has no '%' presentation.
std::string percent(double fraction, int decimals = 1) {
  return fmt::format("{:.{}f}%", 100.0 * fraction, decimals);
}

// The bucket caps of a multi-device point, when the model's points ran more than the default.
std::string bucket_cell(const SweepPoint& p, bool shown) {
  if (!shown) return "";
  return fmt::format(" {:>18}", p.devices > 1 ? p.buckets_text() : "-");
}

// The gradient compression of a multi-device point, when the model's points compressed any.
std::string compression_cell(const SweepPoint& p, bool shown) {
  if (!shown) return "";
  return fmt::format(" {:>11}", p.devices > 1 ? to_string(p.grad_compression) : "-");
}

// The precision of a point, when the model's points ran more than the devices' default.
std::string precision_cell(const SweepPoint& p, bool shown) {
  if (!shown) return "";
  return fmt::format(" {:>9}", to_string(p.precision));
}

void model_table(std::string& out, const SweepReport& report, const std::string& model) {
  bool simulated = false;
  bool buckets = false;
  bool compression = false;
  bool precision = false;
  const SweepPoint* any = nullptr;
  for (const SweepPoint& p : report.points) {
    if (p.model != model) continue;
    if (any == nullptr) any = &p;
    buckets = buckets || (p.devices > 1 && !p.default_buckets());
    compression = compression || (p.devices > 1 && p.compressed());
    precision = precision || !p.precision_default;
  }
  fmt::format_to(std::back_inserter(out), "\n{} ({} scaling{})\n", model, to_string(any->mode),
                 any->params > 0 ? fmt::format(", {} parameters", any->params) : "");
  fmt::format_to(std::back_inserter(out),
                 "{:>8} {:>7} {:>9}{}{}{} {:>24} {:>10} {:>20} {:>18}  {}\n", "devices", "batch",
                 "global", buckets ? fmt::format(" {:>18}", "buckets") : "",
                 compression ? fmt::format(" {:>11}", "compression") : "",
                 precision ? fmt::format(" {:>9}", "precision") : "", "samples/s [95% CI]",
                 "step ms", "speedup [CI]", "efficiency", "bottleneck");
  for (const SweepPoint& p : report.points) {
    if (p.model != model) continue;
    simulated = simulated || p.simulated();
    const std::string devices = fmt::format("{}:{}", p.device_kind, p.devices);
    if (!p.ok()) {
      fmt::format_to(std::back_inserter(out), "{:>8} {:>7} {:>9}{}{}{}  FAILED: {}\n", devices,
                     p.batch, p.global_batch, bucket_cell(p, buckets),
                     compression_cell(p, compression), precision_cell(p, precision), p.error);
      continue;
    }
    const PointSummary& s = p.summary;
    const Finding& top = s.verdict.top();
    fmt::format_to(
        std::back_inserter(out), "{:>8} {:>7} {:>9}{}{}{} {:>24} {:>10.2f} {:>20} {:>18}  {}{}\n",
        devices, p.batch, p.global_batch, bucket_cell(p, buckets), compression_cell(p, compression),
        precision_cell(p, precision), interval(s.throughput, "{:.0f} [{:.0f}, {:.0f}]"),
        s.step_ms_median, interval(s.speedup, "{:.2f} [{:.2f}, {:.2f}]"),
        interval(s.efficiency, "{:.0f}% [{:.0f}, {:.0f}]", 100.0), top.kind,
        top.severity == kSeverityInfo ? "" : fmt::format(" ({})", top.severity));
  }
  if (simulated) fmt::format_to(std::back_inserter(out), "note: {}\n", kSimulatedDevicesNote);
}

// A share of the loss breakdown, in parentheses when it is no loss beyond measurement noise
// (and never "-0.0%": the sum's rounding is no sign).
std::string share_cell(const LossComponent& c, double share) {
  const std::string text = percent(std::abs(share) < 5e-4 ? 0.0 : share);
  return c.beyond_noise() ? text : fmt::format("({})", text);
}

// A loss column's width: its label's and a space, at least 8.
int loss_width(const LossCauseDef& d) {
  return std::max(8, static_cast<int>(std::string_view(d.label).size()) + 1);
}

// Runs across nodes split the all-reduce share by what stayed inside a node (the JSON's
// allreduce_intra_node / allreduce_inter_node): two more columns after it, "-" for a point
// within one node.
void loss_cells(std::string& out, const PointSummary& s, bool split) {
  for (const LossComponent& c : loss_components(*s.loss)) {
    fmt::format_to(std::back_inserter(out), " {:>{}}", share_cell(c, c.share), loss_width(*c.def));
    if (!split || c.def->cause != LossCause::kAllReduce) continue;
    if (!s.intra_node_fraction) {
      fmt::format_to(std::back_inserter(out), " {:>7} {:>7}", "-", "-");
    } else {
      fmt::format_to(std::back_inserter(out), " {:>7} {:>7}",
                     share_cell(c, c.share * *s.intra_node_fraction),
                     share_cell(c, c.share * (1.0 - *s.intra_node_fraction)));
    }
  }
}

void loss_header(std::string& out, size_t width, bool split) {
  fmt::format_to(std::back_inserter(out),
                 "\nefficiency lost against ideal (shares of the step at N devices)\n{:<{}} {:>7}",
                 "point", width, "lost");
  for (const LossCauseDef& d : kLossCauses) {
    fmt::format_to(std::back_inserter(out), " {:>{}}", d.label, loss_width(d));
    if (split && d.cause == LossCause::kAllReduce) {
      fmt::format_to(std::back_inserter(out), " {:>7} {:>7}", "intra", "inter");
    }
  }
  out += "\n";
}

void loss_table(std::string& out, const SweepReport& report) {
  bool split = false;
  size_t width = 32;  // labels grow with bucket settings
  for (const SweepPoint& p : report.points) {
    split = split || (p.ok() && p.summary.loss && p.summary.intra_node_fraction);
    if (p.ok() && p.summary.loss) width = std::max(width, p.label().size());
  }
  bool header = false;
  bool marked = false;
  for (const SweepPoint& p : report.points) {
    if (!p.ok() || !p.summary.loss) continue;
    if (!header) loss_header(out, width, split);
    header = true;
    for (const LossComponent& each : loss_components(*p.summary.loss)) {
      marked = marked || !each.beyond_noise();
    }
    fmt::format_to(std::back_inserter(out), "{:<{}} {:>7}", p.label(), width,
                   percent(p.summary.loss->lost));
    loss_cells(out, p.summary, split);
    out += "\n";
  }
  if (marked) {
    out +=
        "(in parentheses: no finding; the share's 95% bootstrap interval over the steps "
        "holds 0 (within measurement noise) or lies below it)\n";
  }
}

void communication_table(std::string& out, const SweepReport& report) {
  for (const CommunicationAnalysis& c : report.communication) {
    if (!c.fit) {
      fmt::format_to(std::back_inserter(out), "\n{} all-reduce model: not fitted ({})\n", c.model,
                     c.fit_error);
      continue;
    }
    // A slope at or below zero has no bandwidth to print (the JSON's 0 says the same).
    const std::string per_byte =
        c.fit->bus_bandwidth_gbps > 0
            ? fmt::format(" + bytes·2(N-1)/N / {:.2f} GB/s", c.fit->bus_bandwidth_gbps)
            : std::string(", no cost per byte (the times do not grow with the buckets' size)");
    fmt::format_to(std::back_inserter(out),
                   "\n{} all-reduce model{}: {:.3f} ms{} (r² {:.3f}, {} bucket samples)\n", c.model,
                   c.across_nodes ? " (points across nodes)" : "", c.fit->alpha_ms, per_byte,
                   c.fit->r_squared, c.fit->samples);
    if (!c.projection_note.empty()) {
      fmt::format_to(std::back_inserter(out), "  {}\n", c.projection_note);
    }
    for (const CommunicationAnalysis::Series& s : c.series) {
      std::string line;
      for (const Projection& p : s.projections) {
        line += fmt::format("  {} devices {}", p.devices, percent(p.efficiency, 0));
      }
      fmt::format_to(std::back_inserter(out), "  projected efficiency, batch {}{}:{}\n", s.batch,
                     precision_text(s.precision, s.precision_default), line);
    }
  }
}

void bucket_table(std::string& out, const SweepReport& report) {
  if (report.bucket_choices.empty()) return;
  out += "\nbucket caps (medians per step; the best throughput against the default)\n";
  for (const BucketChoice& c : report.bucket_choices) {
    fmt::format_to(std::back_inserter(out), "{}\n",
                   c.label(c.compression == GradCompression::kNone
                               ? ""
                               : fmt::format(" {}", compression_text(c.compression))));
    fmt::format_to(std::back_inserter(out), "  {:>8} {:>9} {:>12} {:>14} {:>12}\n", "cap MB",
                   "first MB", "samples/s", "all-reduce ms", "exposed ms");
    for (const BucketChoice::Setting& s : c.settings) {
      fmt::format_to(std::back_inserter(out), "  {:>8} {:>9} {:>12.0f} {:>14.2f} {:>12.2f}\n",
                     s.cap_mb, s.first_mb, s.throughput, s.allreduce_ms, s.exposed_ms);
    }
    fmt::format_to(std::back_inserter(out), "  {}\n", bucket_conclusion(c));
  }
}

void compression_table(std::string& out, const SweepReport& report) {
  if (report.compression_effects.empty()) return;
  out += "\ngradient compression (medians per step; each compression against none)\n";
  for (const CompressionEffect& e : report.compression_effects) {
    const bool default_caps =
        e.cap_mb == kDefaultBucketCapMb && e.first_mb == kDefaultFirstBucketMb;
    fmt::format_to(
        std::back_inserter(out), "{}\n",
        e.label(default_caps ? "" : " bucket " + bucket_caps_text(e.cap_mb, e.first_mb)));
    fmt::format_to(std::back_inserter(out), "  {:>11} {:>14} {:>10} {:>8} {:>8}  {}\n",
                   "compression", "MB all-reduced", "exposed ms", "cast ms", "step ms",
                   "efficiency [CI]");
    for (const CompressionEffect::Setting& s : e.settings) {
      fmt::format_to(
          std::back_inserter(out), "  {:>11} {:>14.3f} {:>10.2f} {:>8.2f} {:>8.2f}  {}\n",
          to_string(s.compression), static_cast<double>(s.bytes_per_step) / 1e6, s.exposed_ms,
          s.cast_ms, s.step_ms, interval(s.efficiency, "{:.0f}% [{:.0f}, {:.0f}]", 100.0));
    }
    for (size_t i = 1; i < e.settings.size(); ++i) {
      fmt::format_to(std::back_inserter(out), "  {}\n", compression_conclusion(e, i));
    }
  }
}

// "21.1 [16.2, 28.3]", "21.1 [16.2, unbounded]".
std::string b_noise_cell(const Interval& b) {
  const std::string high = std::isinf(b.high) ? "unbounded" : fmt::format("{:.3g}", b.high);
  return fmt::format("{:.3g} [{:.3g}, {}]", b.value, b.low, high);
}

void noise_table(std::string& out, const SweepReport& report) {
  const bool any = std::any_of(report.points.begin(), report.points.end(),
                               [](const SweepPoint& p) { return p.ok() && p.summary.noise; });
  if (!any) return;
  out +=
      "\ngradient noise scale B_noise (past it, a larger global batch stops cutting the steps to "
      "a target in proportion)\n";
  fmt::format_to(std::back_inserter(out), "{:<34} {:>7} {:>26} {:>12} {:>10} {:>12}\n", "point",
                 "global", "B_noise [95% CI]", "steps/fewest", "stat. eff.", "time-to-acc.");
  for (const SweepPoint& p : report.points) {
    if (!p.ok() || !p.summary.noise) continue;
    const NoiseScale& n = *p.summary.noise;
    const std::optional<StatisticalScaling>& s = p.summary.statistics;
    fmt::format_to(
        std::back_inserter(out), "{:<34} {:>7} {:>26} {:>12} {:>10} {:>12}\n", p.label(),
        p.global_batch, n.b_noise ? b_noise_cell(*n.b_noise) : "none (|G|² <= 0)",
        n.b_noise ? fmt::format("{:.2f}", steps_over_minimum(n.b_noise->value, p.global_batch))
                  : "-",
        s ? percent(s->efficiency, 0) : "-",
        s && p.summary.speedup ? fmt::format("{:.2f}x", p.summary.speedup->value * s->efficiency)
                               : "-");
  }
  out +=
      "  steps/fewest: steps to a target over the fewest any batch could need (1 + B_noise / "
      "global); stat. eff.: the samples one device needs over these; time-to-acc.: the "
      "speedup in time to a target, throughput speedup x stat. eff.\n";
}

void target_table(std::string& out, const SweepReport& report) {
  const auto with =
      std::find_if(report.points.begin(), report.points.end(),
                   [](const SweepPoint& p) { return p.ok() && p.summary.time_to_target; });
  if (with == report.points.end()) return;
  const TimeToTarget& first = *with->summary.time_to_target;
  fmt::format_to(std::back_inserter(out),
                 "\ntime to {} {:.4g} (medians over the repeats that reached it; the speedup "
                 "against one device = hardware x statistical)\n",
                 first.metric, first.value);
  fmt::format_to(std::back_inserter(out), "{:<34} {:>7} {:>7} {:>7} {:>8} {:>8}  {}\n", "point",
                 "reached", "steps", "epochs", "train s", "wall s", "speedup");
  for (const SweepPoint& p : report.points) {
    if (!p.ok() || !p.summary.time_to_target) continue;
    const TimeToTarget& t = *p.summary.time_to_target;
    fmt::format_to(std::back_inserter(out),
                   "{:<34} {:>7} {:>7.0f} {:>7.2f} {:>8.2f} {:>8.2f}  {}\n", p.label(),
                   fmt::format("{}/{}", t.reached, t.repeats), t.steps, t.epochs, t.train_s,
                   t.wall_s, p.devices == 1 ? "-" : speedup_text(t));
  }
}

}  // namespace

// One line per point whose GPU kernels were not all deterministic although they were preferred
// (a workspace limit no deterministic algorithm fits): its results may vary in the last bits
// from run to run.
void fallback_lines(std::string& out, const SweepReport& report) {
  for (const SweepPoint& p : report.points) {
    if (p.nondeterministic_fallbacks.empty()) continue;
    out += fmt::format("{}: {}: {}\n", p.label(), kFallbackLead,
                       fmt::join(p.nondeterministic_fallbacks, "; "));
  }
}

// Where a faster precision made the all-reduce the bottleneck
// (reports/analysis/precision_analysis.h).
void precision_lines(std::string& out, const SweepReport& report) {
  for (const PrecisionShift& s : communication_bound_by_precision(report.points)) {
    fmt::format_to(std::back_inserter(out),
                   "{} turns communication-bound: exposed all-reduce {} of the step against "
                   "{} in {} ({:.2f}x the throughput)\n",
                   s.point->label(), percent(s.exposed_share), percent(s.reference_exposed_share),
                   to_string(s.reference->precision), s.throughput_ratio);
  }
}

// fp16 repeats whose loss scaling skipped steps: timed like the others, they updated nothing.
void loss_scaling_lines(std::string& out, const SweepReport& report) {
  for (const SweepPoint& p : report.points) {
    for (size_t i = 0; i < p.repeats.size(); ++i) {
      const RepeatRecord& r = p.repeats[i];
      if (!r.loss_scaling || r.loss_scaling->skipped_steps.empty()) continue;
      const std::vector<int64_t>& skipped = r.loss_scaling->skipped_steps;
      const auto measured = std::count_if(skipped.begin(), skipped.end(),
                                          [&](int64_t n) { return n > r.warmup_steps; });
      fmt::format_to(std::back_inserter(out),
                     "{} (repeat {}): fp16's loss scaling skipped step {} ({} of them measured); "
                     "the scale ended at {:g}\n",
                     p.label(), i + 1, fmt::join(skipped, ", "), measured,
                     r.loss_scaling->final_scale);
    }
  }
}

std::string format_sweep_tables(const SweepReport& report) {
  // As the HTML page says it: printing nothing looked like a failure to read the file.
  if (report.points.empty()) return "This report has no points yet.\n";
  std::string out;
  std::set<std::string> seen;
  for (const SweepPoint& p : report.points) {
    if (seen.insert(p.model).second) model_table(out, report, p.model);
  }
  fallback_lines(out, report);
  precision_lines(out, report);
  loss_scaling_lines(out, report);
  out += format_point_layers(report);
  loss_table(out, report);
  communication_table(out, report);
  bucket_table(out, report);
  compression_table(out, report);
  noise_table(out, report);
  target_table(out, report);
  if (!report.complete) out += "\n(incomplete sweep: not every point has run)\n";
  return out;
}

}  // namespace scalescope
