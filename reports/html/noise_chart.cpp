#include "reports/html/noise_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "reports/analysis/noise_scale.h"
#include "reports/html/svg.h"

namespace scalescope::html {
namespace {

// How far beyond the middle B_noise a CI end may reach before the axis stops following it
// (the end is then drawn open): an interval of a few steps can span decades, and a y axis
// that spans them all would squeeze every marker into one corner.
constexpr double kMaxReach = 16;

// "1.16x"; a small ratio keeps two significant digits ("0.012x", not "0.01x").
std::string times(double ratio) {
  return std::abs(ratio) >= 0.1 ? fmt::format("{:.2f}x", ratio) : fmt::format("{:.2g}x", ratio);
}

std::string b_noise_text(const Interval& b) {
  return fmt::format("{} [{}, {}]", short_number(b.value), short_number(b.low),
                     std::isfinite(b.high) ? short_number(b.high) : std::string("unbounded"));
}

// "cpu:4, batch 32/device (global 128): B_noise 16.3 [13.8, 21.6]; 1.13x the fewest steps
// ...": what the point's noise scale means for it, with the parts its summary has.
std::string sentence_of(const NoiseChartData::Point& p, ScalingMode mode) {
  std::string s = p.label;
  if (mode == ScalingMode::kWeak) s += fmt::format(" (global {})", p.global_batch);
  if (!p.b_noise) {
    return s + fmt::format(
                   ": no B_noise: over its {} steps the mean |G|\u00b2 estimate was not "
                   "positive (the gradient looks all noise; more steps may bound it).",
                   p.steps);
  }
  s += ": B_noise " + b_noise_text(*p.b_noise);
  if (!p.drawn) return s + ": not above zero, so not on the chart (too few steps to tell).";
  s += fmt::format("; {} the fewest steps any batch could need", times(p.steps_over_minimum));
  if (p.efficiency) {
    s += "; statistical efficiency against one device " + percent(*p.efficiency, 0);
    if (p.speedup && p.time_speedup) {
      s += fmt::format(", so the throughput speedup {} becomes about {} in time to a target",
                       times(*p.speedup), times(*p.time_speedup));
    }
  }
  return s + ".";
}

NoiseChartData::Point point_of(const ModelView& m, const SweepPoint& p, const std::string& color) {
  const PointSummary& s = p.summary;
  NoiseChartData::Point out;
  out.label = m.point_text(p);
  out.devices = p.devices;
  out.global_batch = p.global_batch;
  out.steps = s.noise->steps;
  out.color = color;
  out.b_noise = s.noise->b_noise;
  out.drawn = out.b_noise && out.b_noise->value > 0;
  if (out.b_noise) out.steps_over_minimum = steps_over_minimum(out.b_noise->value, p.global_batch);
  if (s.statistics) out.efficiency = s.statistics->efficiency;
  if (s.speedup) out.speedup = s.speedup->value;
  if (out.efficiency && out.speedup) out.time_speedup = *out.speedup * *out.efficiency;
  out.sentence = sentence_of(out, m.mode);
  return out;
}

double floor_pow2(double v) {
  return std::exp2(std::floor(std::log2(v) + 1e-9));
}
double ceil_pow2(double v) {
  return std::exp2(std::ceil(std::log2(v) - 1e-9));
}

// The axes' domains, and which CI ends lie beyond them.
void fit_axes(NoiseChartData& d, const ModelView& m) {
  // Every point's global batch, the one-device baseline's among them: the statistical
  // efficiency is against it.
  std::set<int64_t> batches;
  for (const SweepPoint* p : m.points) {
    if (p->ok()) batches.insert(p->global_batch);
  }
  double v_min = std::numeric_limits<double>::infinity();
  double v_max = 0;
  for (const NoiseChartData::Point& p : d.points) {
    if (!p.drawn) continue;
    v_min = std::min(v_min, p.b_noise->value);
    v_max = std::max(v_max, p.b_noise->value);
  }
  d.x_ticks.assign(batches.begin(), batches.end());
  d.x_lo = floor_pow2(static_cast<double>(d.x_ticks.front()));
  d.x_hi = ceil_pow2(static_cast<double>(d.x_ticks.back()));
  if (d.x_hi <= d.x_lo) {
    d.x_lo /= 2;
    d.x_hi *= 2;
  }
  // The diagonal spans the x domain, so the y domain holds it.
  double lo = std::min(d.x_lo, v_min);
  double hi = std::max(d.x_hi, v_max);
  for (const NoiseChartData::Point& p : d.points) {
    if (!p.drawn) continue;
    if (p.b_noise->low > 0) lo = std::min(lo, std::max(p.b_noise->low, v_min / kMaxReach));
    if (std::isfinite(p.b_noise->high)) {
      hi = std::max(hi, std::min(p.b_noise->high, v_max * kMaxReach));
    }
  }
  d.y_lo = floor_pow2(lo);
  d.y_hi = ceil_pow2(hi);
  for (const NoiseChartData::Point& p : d.points) {
    if (!p.drawn) continue;
    const bool unbounded = !std::isfinite(p.b_noise->high);
    d.any_unbounded = d.any_unbounded || unbounded;
    d.any_clipped =
        d.any_clipped || p.b_noise->low < d.y_lo || (!unbounded && p.b_noise->high > d.y_hi);
  }
}

// Points that share a global batch are spread sideways, in report order, about their batch.
void dodge(NoiseChartData& d) {
  std::map<int64_t, int> count;
  for (const NoiseChartData::Point& p : d.points) count[p.global_batch] += p.drawn ? 1 : 0;
  std::map<int64_t, int> seen;
  for (NoiseChartData::Point& p : d.points) {
    if (!p.drawn) continue;
    const int rank = seen[p.global_batch]++;
    p.dodge = rank - (count[p.global_batch] - 1) / 2.0;
  }
}

}  // namespace

bool has_noise(const ModelView& m) {
  return std::any_of(m.points.begin(), m.points.end(),
                     [](const SweepPoint* p) { return p->ok() && p->summary.noise; });
}

NoiseChartData prepare_noise(const ModelView& m) {
  NoiseChartData d;
  d.model = m.name;
  std::vector<std::string> not_drawn;
  for (size_t i = 0; i < m.batches.size(); ++i) {
    const std::string color = kSeriesColors[i % kSeriesColors.size()];
    bool drawn = false;
    for (const SweepPoint* p : m.series(m.batches[i])) {
      if (!p->ok() || !p->summary.noise) continue;
      d.points.push_back(point_of(m, *p, color));
      drawn = drawn || d.points.back().drawn;
      if (!d.points.back().drawn) not_drawn.push_back(d.points.back().label);
    }
    if (drawn) d.series.push_back({m.batch_text(m.batches[i]), color});
  }
  fit_axes(d, m);
  dodge(d);
  if (d.any_unbounded) {
    d.notes.push_back(
        "\u2191 no upper bound: in some resamples of the steps |G|\u00b2 was not positive");
  }
  if (d.any_clipped) d.notes.push_back("\u2195 open end: the 95% CI reaches beyond the axis");
  for (const std::string& label : not_drawn) {
    d.notes.push_back(label + ": no positive B_noise to draw (see below)");
  }
  return d;
}

namespace {

// Markers that share a global batch sit this far apart.
constexpr double kDodgePx = 11;

using Frame = svg::Frame<svg::Log2Scale, svg::Log2Scale>;

std::vector<svg::LegendItem> legend_of(const NoiseChartData& d) {
  std::vector<svg::LegendItem> legend;
  for (const NoiseChartData::Series& s : d.series) legend.push_back({s.label, s.color});
  legend.push_back({"global batch = B_noise (below it: past the noise scale)", kIdealColor, true,
                    true, false, false});
  return legend;
}

// The global batches as x ticks, leaving out one whose label would run into the last one's.
std::vector<svg::Tick> x_ticks_of(const NoiseChartData& d, const Frame& f) {
  std::vector<svg::Tick> ticks;
  for (int64_t b : d.x_ticks) {
    const svg::Tick t{f.x(static_cast<double>(b)), std::to_string(b)};
    if (!ticks.empty() &&
        t.position - ticks.back().position <
            (svg::text_width(t.label) + svg::text_width(ticks.back().label)) / 2 + 6) {
      continue;
    }
    ticks.push_back(t);
  }
  return ticks;
}

void draw_axes(svg::Document& doc, const Frame& f, const NoiseChartData& d, double pad) {
  std::vector<svg::Tick> y_ticks;
  for (double v : f.y.ticks(8)) y_ticks.push_back({f.y(v), tick_label(v)});
  svg::x_axis(doc, x_ticks_of(d, f), f.bottom, f.left, f.right, f.top, "global batch (samples)");
  svg::y_axis(doc, y_ticks, f.left, f.bottom, f.top, f.right, "noise scale B_noise (samples)");
  const double from = std::max(d.x_lo / pad, d.y_lo / pad);
  const double to = std::min(d.x_hi * pad, d.y_hi * pad);
  doc.polyline({{f.x(from), f.y(from)}, {f.x(to), f.y(to)}}, {{"stroke", kIdealColor},
                                                              {"stroke-width", "1.5"},
                                                              {"stroke-dasharray", "5 4"},
                                                              {"data-diagonal", "true"}});
}

// A whisker's end: a cap where the interval ends on the chart, an open arrow where it goes on
// beyond the axis (`up`: at the top).
void whisker_end(svg::Document& doc, double cx, double y, bool open, bool up,
                 const std::string& color) {
  const svg::Attrs ink = {{"stroke", color}, {"stroke-width", "1.5"}};
  if (!open) {
    doc.line(cx - 4, y, cx + 4, y, ink);
    return;
  }
  const double back = up ? 6 : -6;
  svg::Attrs arrow = ink;
  arrow.push_back({"data-open", up ? "high" : "low"});
  doc.polyline({{cx - 4, y + back}, {cx, y}, {cx + 4, y + back}}, arrow);
}

void draw_point(svg::Document& doc, const Frame& f, const NoiseChartData::Point& p) {
  const Interval& b = *p.b_noise;
  const bool unbounded = !std::isfinite(b.high);
  const double cx = f.x(static_cast<double>(p.global_batch)) + p.dodge * kDodgePx;
  const double cy = f.y(b.value);
  const bool open_low = b.low <= 0 || f.y(b.low) > f.bottom;
  const bool open_high = unbounded || f.y(b.high) < f.top;
  const double lo = open_low ? f.bottom : f.y(b.low);
  const double hi = open_high ? f.top : f.y(b.high);
  svg::Attrs attrs = {{"data-noise-point", p.label},
                      {"data-global-batch", std::to_string(p.global_batch)},
                      {"data-b-noise", fmt::format("{:.4g}", b.value)},
                      {"data-b-noise-low", fmt::format("{:.4g}", b.low)},
                      {"data-b-noise-high", unbounded ? "inf" : fmt::format("{:.4g}", b.high)}};
  if (unbounded) attrs.push_back({"data-unbounded", "true"});
  doc.open_group(attrs, fmt::format("{} Pooled over {} measured steps.", p.sentence, p.steps));
  if (lo - hi > 2) {
    doc.line(cx, lo, cx, hi, {{"stroke", p.color}, {"stroke-width", "1.5"}, {"data-ci", p.label}});
    whisker_end(doc, cx, lo, open_low, false, p.color);
    whisker_end(doc, cx, hi, open_high, true, p.color);
  }
  doc.circle(cx, cy, 4.5, {{"fill", p.color}, {"stroke", "#ffffff"}});
  doc.close_group();
}

}  // namespace

std::string draw_noise(const NoiseChartData& d) {
  const std::vector<svg::LegendItem> legend = legend_of(d);
  const svg::FigureBox box =
      svg::figure_box(legend, {.plot_height = 270, .note_lines = d.notes.size()});
  svg::Document doc =
      svg::figure(box, legend, "noise-scale",
                  fmt::format("{}: gradient noise scale against global batch", d.model),
                  {{"data-model", d.model}});
  // Room beyond the first and last ticks for the markers spread sideways and the arrows.
  const double pad = std::exp2(0.25);
  const Frame f(box, {d.x_lo / pad, d.x_hi * pad}, {d.y_lo / pad, d.y_hi * pad});
  draw_axes(doc, f, d, pad);
  for (const NoiseChartData::Point& p : d.points) {
    if (p.drawn) draw_point(doc, f, p);
  }
  svg::figure_notes(doc, box, d.notes);
  return std::move(doc).finish();
}

}  // namespace scalescope::html
