#include "reports/html/speedup_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "reports/html/svg.h"

namespace scalescope::html {
namespace {

SpeedupData::Series series_of(const ModelView& m, size_t i) {
  SpeedupData::Series s;
  s.batch = m.batches[i];
  s.batch_text = m.batch_text(s.batch);
  s.color = kSeriesColors[i % kSeriesColors.size()];
  for (const SweepPoint* p : m.series(s.batch)) {
    if (!p->ok()) {
      s.failed.push_back({p->devices, p->label(), p->error});
    } else if (!p->summary.speedup) {
      s.unknown = true;
    } else {
      std::optional<double> efficiency;
      if (p->summary.efficiency) efficiency = p->summary.efficiency->value;
      s.measured.push_back({p->devices, *p->summary.speedup, efficiency, p->label()});
    }
  }
  if (m.communication == nullptr || m.mode != ScalingMode::kWeak) return s;
  for (const CommunicationAnalysis::Series& c : m.communication->series) {
    if (c.batch != s.batch || c.precision != m.precision || c.projections.empty()) continue;
    for (const SpeedupData::Measured& p : s.measured) {
      if (p.devices == c.measured_devices) s.projected_from = p;
    }
    for (const Projection& p : c.projections) {
      s.projected.push_back(
          {p.devices, p.efficiency * p.devices, p.efficiency, p.step_ms, p.exposed_ms});
    }
  }
  return s;
}

}  // namespace

SpeedupData prepare_speedup(const ModelView& m) {
  SpeedupData d;
  d.model = m.name;
  d.device_kind = m.device_kind;
  double x_max = 2;
  for (const SweepPoint* p : m.points) x_max = std::max(x_max, static_cast<double>(p->devices));
  double s_min = 1;
  double s_max = 1;
  for (size_t i = 0; i < m.batches.size(); ++i) {
    SpeedupData::Series s = series_of(m, i);
    for (const SpeedupData::Measured& p : s.measured) {
      d.measured_max = std::max(d.measured_max, p.devices);
      s_min = std::min(s_min, p.speedup.low);
      s_max = std::max(s_max, p.speedup.high);
    }
    for (const SpeedupData::Projected& p : s.projected) {
      x_max = std::max(x_max, static_cast<double>(p.devices));
      s_min = std::min(s_min, p.speedup);
      s_max = std::max(s_max, p.speedup);
    }
    d.any_projection = d.any_projection || !s.projected.empty();
    d.any_failed = d.any_failed || !s.failed.empty();
    if (s.unknown) {
      d.notes.push_back(
          fmt::format("{}: no one-device point to compare with, so no speedup", s.batch_text));
    }
    d.series.push_back(std::move(s));
  }
  if (d.any_failed)
    d.notes.push_back("\u00d7 on the axis: a point that failed (see Failed points)");
  d.x_hi = std::exp2(std::ceil(std::log2(x_max) - 1e-9));
  d.y_lo = std::exp2(std::floor(std::log2(std::max(s_min, 1.0 / 64)) + 1e-9));
  d.y_hi = std::exp2(std::ceil(std::log2(std::max(s_max, d.x_hi)) - 1e-9));
  return d;
}

namespace {

std::vector<svg::LegendItem> legend_of(const SpeedupData& d) {
  std::vector<svg::LegendItem> legend;
  for (const SpeedupData::Series& s : d.series) {
    if (s.measured.empty() && s.projected.empty()) continue;  // nothing of it drawn
    legend.push_back({s.batch_text, s.color, true, false, true, false});
  }
  legend.push_back({"ideal (y = N)", kIdealColor, true, false, false, false});
  if (d.any_projection) {
    legend.push_back({"projected (all-reduce model)", "#555555", true, true, true, true});
  }
  return legend;
}

using Frame = svg::Frame<svg::Log2Scale, svg::Log2Scale>;

void draw_projection(svg::Document& doc, const Frame& f, const SpeedupData::Series& s) {
  std::vector<svg::Point> line;
  if (s.projected_from) {
    line.push_back({f.x(s.projected_from->devices), f.y(s.projected_from->speedup.value)});
  }
  for (const SpeedupData::Projected& p : s.projected)
    line.push_back({f.x(p.devices), f.y(p.speedup)});
  doc.polyline(line, {{"stroke", s.color},
                      {"stroke-width", "2"},
                      {"stroke-dasharray", "6 4"},
                      {"data-projected", "true"},
                      {"data-batch", std::to_string(s.batch)}});
  for (const SpeedupData::Projected& p : s.projected) {
    doc.circle(f.x(p.devices), f.y(p.speedup), 3.5,
               {{"fill", "#ffffff"},
                {"stroke", s.color},
                {"stroke-width", "1.5"},
                {"data-projected", std::to_string(p.devices)}},
               fmt::format("projected, {}, {} devices: speedup {:.2f}, efficiency {} "
                           "(step {:.2f} ms, exposed all-reduce {:.2f} ms)",
                           s.batch_text, p.devices, p.speedup, percent(p.efficiency), p.step_ms,
                           p.exposed_ms));
  }
}

void draw_measured(svg::Document& doc, const Frame& f, const SpeedupData::Series& s) {
  std::vector<svg::Point> line;
  for (const SpeedupData::Measured& p : s.measured) {
    line.push_back({f.x(p.devices), f.y(p.speedup.value)});
  }
  doc.polyline(line, {{"stroke", s.color},
                      {"stroke-width", "2.25"},
                      {"data-series", "measured"},
                      {"data-batch", std::to_string(s.batch)}});
  for (const SpeedupData::Measured& p : s.measured) {
    const Interval& v = p.speedup;
    const double cx = f.x(p.devices);
    if (f.y(v.low) - f.y(v.high) > 2) {
      doc.line(cx, f.y(v.low), cx, f.y(v.high), {{"stroke", s.color}, {"stroke-width", "1.25"}});
    }
    doc.circle(
        cx, f.y(v.value), 4.5, {{"fill", s.color}, {"stroke", "#ffffff"}, {"data-point", p.label}},
        fmt::format("{}: speedup {:.2f} [{:.2f}, {:.2f}], efficiency {}", p.label, v.value, v.low,
                    v.high, p.efficiency ? percent(*p.efficiency) : std::string("-")));
  }
}

void draw_failed(svg::Document& doc, const Frame& f, const SpeedupData::Series& s) {
  for (const SpeedupData::Failed& p : s.failed) {
    doc.open_group({{"data-failed", p.label}}, fmt::format("{} failed: {}", p.label, p.error));
    doc.text(f.x(p.devices), f.bottom - 5, "\u00d7",
             {{"fill", s.color},
              {"font-size", "16"},
              {"font-weight", "700"},
              {"text-anchor", "middle"}});
    doc.close_group();
  }
}

void draw_axes(svg::Document& doc, const Frame& f, const SpeedupData& d, double pad) {
  if (d.any_projection && d.measured_max < d.x_hi) {
    // Shaded from halfway (in log terms) between the last measured count and the next one.
    const double from = f.x(d.measured_max * std::sqrt(2.0));
    doc.rect(from, f.top, f.right - from, f.bottom - f.top, {{"fill", "#f3f4f6"}});
    doc.text(f.right - 6, f.top + 14, "projected",
             {{"class", "svg-note"}, {"text-anchor", "end"}, {"font-style", "italic"}});
  }
  std::vector<svg::Tick> x_ticks;
  for (double v : f.x.ticks(10)) x_ticks.push_back({f.x(v), tick_label(v)});
  std::vector<svg::Tick> y_ticks;
  for (double v : f.y.ticks(8)) y_ticks.push_back({f.y(v), tick_label(v)});
  svg::x_axis(doc, x_ticks, f.bottom, f.left, f.right, f.top,
              fmt::format("devices ({})", d.device_kind));
  svg::y_axis(doc, y_ticks, f.left, f.bottom, f.top, f.right, "speedup (\u00d7 one device)");
  doc.polyline({{f.x(1 / pad), f.y(1 / pad)}, {f.x(d.x_hi * pad), f.y(d.x_hi * pad)}},
               {{"stroke", kIdealColor}, {"stroke-width", "2"}, {"data-ideal", "true"}});
}

}  // namespace

std::string draw_speedup(const SpeedupData& d) {
  const std::vector<svg::LegendItem> legend = legend_of(d);
  const svg::FigureBox box =
      svg::figure_box(legend, {.plot_height = 270, .note_lines = d.notes.size()});
  svg::Document doc =
      svg::figure(box, legend, "speedup", fmt::format("{}: speedup against devices", d.model),
                  {{"data-model", d.model}});
  // A little room beyond the first and last ticks, so that markers there are not cut by the
  // axes.
  const double pad = std::exp2(0.12);
  const Frame f(box, {1 / pad, d.x_hi * pad}, {d.y_lo / pad, d.y_hi * pad});
  draw_axes(doc, f, d, pad);
  for (const SpeedupData::Series& s : d.series) {
    if (!s.projected.empty()) draw_projection(doc, f, s);
    if (!s.measured.empty()) draw_measured(doc, f, s);
    draw_failed(doc, f, s);
  }
  svg::figure_notes(doc, box, d.notes);
  return std::move(doc).finish();
}

}  // namespace scalescope::html
