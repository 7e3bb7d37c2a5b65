#include "reports/html/compression_chart.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "reports/html/svg.h"

namespace scalescope::html {

std::string compression_color(GradCompression compression) {
  return kSeriesColors[static_cast<size_t>(compression) % kSeriesColors.size()];
}

CompressionChartData prepare_compression(const ModelView& m) {
  CompressionChartData d;
  d.model = m.name;
  std::set<GradCompression> compressions;
  double y_max = 1.0;
  for (const CompressionEffect* e : m.compression_effects) {
    CompressionChartData::Group g;
    g.label = fmt::format("{}:{}, {}", e->device_kind, e->devices, batch_label(e->mode, e->batch));
    if (e->cap_mb != kDefaultBucketCapMb || e->first_mb != kDefaultFirstBucketMb) {
      g.label += ", bucket " + bucket_caps_text(e->cap_mb, e->first_mb);
    }
    std::vector<std::string> missing;
    for (const CompressionEffect::Setting& s : e->settings) {
      g.bars.push_back({s.compression, s.efficiency, s.step_ms, s.bytes_per_step});
      compressions.insert(s.compression);
      if (s.efficiency) {
        y_max = std::max(y_max, s.efficiency->high);
      } else {
        missing.push_back(to_string(s.compression));
      }
    }
    for (size_t i = 1; i < e->settings.size(); ++i) {
      d.conclusions.push_back(fmt::format("{}: {}", g.label, compression_conclusion(*e, i)));
    }
    if (!missing.empty()) {
      d.missing.push_back(
          fmt::format("{}: no bar for {}: no efficiency without a successful one-device point "
                      "of the same batch",
                      g.label, fmt::join(missing, ", ")));
    }
    d.groups.push_back(std::move(g));
  }
  d.compressions.assign(compressions.begin(), compressions.end());
  // A round top in steps of 20%.
  d.y_hi = std::ceil(y_max / 0.2 - 1e-9) * 0.2;
  return d;
}

namespace {

constexpr double kBarWidth = 30;
constexpr double kBarGap = 6;
constexpr double kGroupPad = 24;

using Frame = svg::Frame<svg::NoScale, svg::LinearScale>;

// A group's width: its bars, or its label when that is wider.
double group_width(const CompressionChartData::Group& g) {
  const double bars = static_cast<double>(g.bars.size()) * (kBarWidth + kBarGap) - kBarGap;
  return std::max(bars, svg::text_width(g.label)) + kGroupPad;
}

void draw_bar(svg::Document& doc, const Frame& f, const std::string& group,
              const CompressionChartData::Bar& b, double x) {
  const std::string name = to_string(b.compression);
  if (!b.efficiency) {
    doc.text(x + kBarWidth / 2, f.bottom - 6, "n/a",
             {{"class", "svg-note"}, {"text-anchor", "middle"}, {"data-missing", name}});
    return;
  }
  const Interval& e = *b.efficiency;
  const std::string color = compression_color(b.compression);
  const double top = f.y(std::max(e.value, 0.0));
  doc.rect(x, top, kBarWidth, f.bottom - top,
           {{"fill", color},
            {"data-compression-bar", group},
            {"data-compression", name},
            {"data-efficiency", fmt::format("{:.4f}", e.value)}},
           fmt::format("{}, {}: efficiency {} [{}, {}], step {:.2f} ms, {:.3g} MB all-reduced "
                       "per step",
                       group, name, percent(e.value, 0), percent(e.low, 0), percent(e.high, 0),
                       b.step_ms, static_cast<double>(b.bytes_per_step) / 1e6));
  const double cx = x + kBarWidth / 2;
  const double lo = f.y(std::max(e.low, 0.0));
  const double hi = std::max(f.y(e.high), f.top);  // a whisker beyond the axis ends at its top
  if (lo - hi > 1) {
    const svg::Attrs ink = {{"stroke", kInkColor}, {"stroke-width", "1.25"}};
    svg::Attrs whisker = ink;
    whisker.push_back({"data-ci", name});
    doc.line(cx, lo, cx, hi, whisker);
    doc.line(cx - 5, lo, cx + 5, lo, ink);
    doc.line(cx - 5, hi, cx + 5, hi, ink);
  }
  doc.text(cx, std::min(top, hi) - 5, percent(e.value, 0),
           {{"class", "svg-value"}, {"text-anchor", "middle"}});
}

std::vector<svg::LegendItem> legend_of(const CompressionChartData& d) {
  std::vector<svg::LegendItem> legend;
  for (GradCompression c : d.compressions) {
    legend.push_back(
        {c == GradCompression::kNone ? std::string("none (float gradients)") : compression_text(c),
         compression_color(c)});
  }
  legend.push_back({"ideal (100%)", kIdealColor, true, true, false, false});
  return legend;
}

}  // namespace

std::string draw_compression(const CompressionChartData& d) {
  const std::vector<svg::LegendItem> legend = legend_of(d);
  double plot_w = 0;
  for (const CompressionChartData::Group& g : d.groups) plot_w += group_width(g);
  // Room above the bars for their values.
  const svg::FigureBox box =
      svg::figure_box(legend, {.plot_height = 220, .plot_width = plot_w, .headroom = 14});
  svg::Document doc = svg::figure(
      box, legend, "compression",
      fmt::format("{}: scaling efficiency with and without gradient compression", d.model),
      {{"data-model", d.model}});
  const Frame f(box, {}, {0, d.y_hi});
  std::vector<svg::Tick> y_ticks;
  for (int i = 0; i <= static_cast<int>(std::lround(d.y_hi / 0.2)); ++i) {
    y_ticks.push_back({f.y(0.2 * i), percent(0.2 * i, 0)});
  }
  svg::y_axis(doc, y_ticks, f.left, f.bottom, f.top, f.right, "efficiency against one device");
  // The groups side by side, centred in the plot.
  double x = f.left + (f.right - f.left - plot_w) / 2;
  std::vector<svg::Tick> x_ticks;
  for (const CompressionChartData::Group& g : d.groups) {
    const double w = group_width(g);
    const double bars = static_cast<double>(g.bars.size()) * (kBarWidth + kBarGap) - kBarGap;
    double bx = x + (w - bars) / 2;
    for (const CompressionChartData::Bar& b : g.bars) {
      draw_bar(doc, f, g.label, b, bx);
      bx += kBarWidth + kBarGap;
    }
    x_ticks.push_back({x + w / 2, g.label});
    x += w;
  }
  svg::x_axis(doc, x_ticks, f.bottom, f.left, f.right, f.bottom, "");
  doc.line(f.left, f.y(1.0), f.right, f.y(1.0),
           {{"stroke", kIdealColor},
            {"stroke-width", "1.25"},
            {"stroke-dasharray", "5 4"},
            {"data-ideal", "true"}});
  return std::move(doc).finish();
}

}  // namespace scalescope::html
