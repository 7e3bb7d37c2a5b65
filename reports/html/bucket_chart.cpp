#include "reports/html/bucket_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "reports/html/svg.h"

namespace scalescope::html {

BucketChartData prepare_buckets(const ModelView& m) {
  BucketChartData d;
  d.model = m.name;
  std::set<double> caps;
  double y_max = 0;
  for (const BucketChoice* c : m.bucket_choices) {
    // A line per first-bucket cap: the x axis is the cap of the others.
    std::map<double, BucketChartData::Series> by_first;
    for (const BucketChoice::Setting& s : c->settings) {
      BucketChartData::Series& series = by_first[s.first_mb];
      series.settings.push_back(s);
      caps.insert(s.cap_mb);
      y_max = std::max({y_max, s.exposed_ms, s.allreduce_ms});
    }
    const BucketChoice::Setting& best = c->settings[c->best];
    // Choices are per compression: the compressed ones say which.
    const std::string group =
        fmt::format("{}:{}, {}{}", c->device_kind, c->devices, batch_label(c->mode, c->batch),
                    c->compression == GradCompression::kNone
                        ? ""
                        : fmt::format(", {}", compression_text(c->compression)));
    for (auto& [first, series] : by_first) {
      series.label = group;
      if (by_first.size() > 1 || first != kDefaultFirstBucketMb) {
        series.label += fmt::format(", first {} MB", first);
      }
      series.color = kSeriesColors[d.series.size() % kSeriesColors.size()];
      if (best.first_mb == first) series.best_cap_mb = best.cap_mb;
      d.series.push_back(std::move(series));
    }
    d.conclusions.push_back(fmt::format("{}: {}", group, bucket_conclusion(*c)));
  }
  d.caps.assign(caps.begin(), caps.end());
  // A round top: 1, 2 or 5 times a power of ten.
  const double scale = std::pow(10.0, std::floor(std::log10(std::max(y_max, 1e-3))));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    d.y_hi = step * scale;
    if (d.y_hi >= y_max * 1.05) break;
  }
  return d;
}

namespace {

using Frame = svg::Frame<svg::Log2Scale, svg::LinearScale>;

void draw_series(svg::Document& doc, const Frame& f, const BucketChartData::Series& s) {
  std::vector<svg::Point> exposed;
  std::vector<svg::Point> total;
  for (const BucketChoice::Setting& p : s.settings) {
    exposed.push_back({f.x(p.cap_mb), f.y(p.exposed_ms)});
    total.push_back({f.x(p.cap_mb), f.y(p.allreduce_ms)});
  }
  doc.polyline(total, {{"stroke", s.color},
                       {"stroke-width", "1.25"},
                       {"stroke-dasharray", "4 3"},
                       {"data-series", "allreduce"}});
  doc.polyline(exposed,
               {{"stroke", s.color}, {"stroke-width", "2.25"}, {"data-series", "exposed"}});
  for (const BucketChoice::Setting& p : s.settings) {
    const bool best = p.cap_mb == s.best_cap_mb;
    if (best) {
      doc.circle(
          f.x(p.cap_mb), f.y(p.exposed_ms), 8,
          {{"fill", "none"}, {"stroke", s.color}, {"stroke-width", "1.5"}, {"data-best", "true"}});
    }
    doc.circle(f.x(p.cap_mb), f.y(p.exposed_ms), 4.5,
               {{"fill", s.color}, {"stroke", "#ffffff"}, {"data-bucket", p.text()}},
               fmt::format("{}, bucket {}: exposed all-reduce {:.2f} ms of {:.2f} ms, {:.0f} "
                           "samples/s{}",
                           s.label, p.text(), p.exposed_ms, p.allreduce_ms, p.throughput,
                           best ? " (best throughput)" : ""));
  }
}

std::vector<svg::LegendItem> legend_of(const BucketChartData& d) {
  std::vector<svg::LegendItem> legend;
  for (const BucketChartData::Series& s : d.series) {
    legend.push_back({s.label, s.color, true, false, true, false});
  }
  legend.push_back({"all-reduce, overlapped or not", "#555555", true, true, false, false});
  legend.push_back({"best throughput (ringed)", "#555555", true, false, true, true});
  return legend;
}

}  // namespace

std::string draw_buckets(const BucketChartData& d) {
  const std::vector<svg::LegendItem> legend = legend_of(d);
  const svg::FigureBox box = svg::figure_box(legend, {.plot_height = 240});
  svg::Document doc = svg::figure(box, legend, "buckets",
                                  fmt::format("{}: exposed all-reduce against bucket cap", d.model),
                                  {{"data-model", d.model}});
  // Half a power of two beyond the first and last caps, so their markers clear the axes.
  const double pad = std::sqrt(2.0);
  const Frame f(box, {d.caps.front() / pad, d.caps.back() * pad}, {0, d.y_hi});
  std::vector<svg::Tick> x_ticks;
  for (double cap : d.caps) x_ticks.push_back({f.x(cap), tick_label(cap)});
  std::vector<svg::Tick> y_ticks;
  for (int i = 0; i <= 5; ++i) {
    const double v = d.y_hi * i / 5;
    y_ticks.push_back({f.y(v), tick_label(v)});
  }
  svg::x_axis(doc, x_ticks, f.bottom, f.left, f.right, f.top, "bucket cap (MB)");
  svg::y_axis(doc, y_ticks, f.left, f.bottom, f.top, f.right, "all-reduce per step (ms)");
  for (const BucketChartData::Series& s : d.series) draw_series(doc, f, s);
  return std::move(doc).finish();
}

}  // namespace scalescope::html
