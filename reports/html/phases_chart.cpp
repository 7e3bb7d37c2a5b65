#include "reports/html/phases_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/nvtx.h"
#include "reports/html/svg.h"
#include "reports/phases.h"

namespace scalescope::html {

PhasesData prepare_phases(const ModelView& m) {
  PhasesData d;
  d.model = m.name;
  // The exposed phases; those only some runs have (the batch-norm sync) where a point has them.
  std::vector<Phase> shown;
  for (const PhaseDef& p : kPhases) {
    if (!p.exposed) continue;
    bool used = !absent_means_zero(p.phase);
    for (int64_t b : m.batches) {
      for (const SweepPoint* point : m.series(b)) {
        used = used || (point->ok() && point->summary.group[p.phase] > 0.0);
      }
    }
    if (!used) continue;
    shown.push_back(p.phase);
    d.segments.push_back({p.key, p.label, hex(phase_color(p.phase))});
  }
  // The step's colour: what the step spent outside the named phases.
  d.segments.push_back({"other", "other", hex(nvtx::kStep.color)});
  double x_max = 0;
  for (int64_t b : m.batches) {
    const std::vector<const SweepPoint*> series = m.series(b);
    for (const SweepPoint* p : series) {
      PhasesData::Row& row = d.rows.emplace_back();
      row.label = p->label();
      row.name = fmt::format("{}:{} \u00b7 {}", p->device_kind, p->devices, m.batch_text(b));
      if (!p->precision_default) row.name += fmt::format(" \u00b7 {}", to_string(p->precision));
      row.batch_starts = p == series.front();
      row.ok = p->ok();
      if (!p->ok()) {
        row.error = p->error;
        continue;
      }
      const PhaseMedians& g = p->summary.group;
      for (const Phase phase : shown) row.ms.push_back(g[phase]);
      row.ms.push_back(std::max(0.0, g.step_ms - g.exposed_sum_ms()));
      row.step_ms = g.step_ms;
      double sum = 0;
      for (double ms : row.ms) sum += ms;
      x_max = std::max({x_max, sum, g.step_ms});
    }
  }
  d.x_max = x_max > 0 ? x_max : 1;
  return d;
}

namespace {

constexpr double kRowHeight = 26;
constexpr double kBatchGap = 10;

// One point's bar from x = 0, with its step marker and time.
void draw_bar(svg::Document& doc, const PhasesData& d, const PhasesData::Row& row,
              const svg::LinearScale& x, double y) {
  doc.open_group({{"data-bar", row.label}});
  double at = 0;
  for (size_t i = 0; i < d.segments.size(); ++i) {
    const PhasesData::Segment& s = d.segments[i];
    const double ms = row.ms[i];
    if (ms <= 0) continue;
    doc.rect(x(at), y + 4, x(at + ms) - x(at), kRowHeight - 8,
             {{"fill", s.color}, {"data-phase", s.key}},
             fmt::format("{}: {} {:.3f} ms ({} of the step)", row.label, s.label, ms,
                         row.step_ms > 0 ? percent(ms / row.step_ms) : std::string("-")));
    at += ms;
  }
  // Medians of phases need not add up to the median step: mark the step where they overrun.
  if (at > row.step_ms * 1.005) {
    doc.line(x(row.step_ms), y + 1, x(row.step_ms), y + kRowHeight - 1,
             {{"stroke", kInkColor}, {"stroke-width", "2"}, {"data-step-marker", "true"}});
  }
  doc.close_group();
  doc.text(x(std::max(at, row.step_ms)) + 6, y + kRowHeight / 2 + 4,
           fmt::format("{} ms", short_number(row.step_ms)), {{"class", "svg-value"}});
}

void draw_failed(svg::Document& doc, const PhasesData::Row& row, double left, double y) {
  doc.open_group({{"data-failed", row.label}}, fmt::format("{} failed: {}", row.label, row.error));
  doc.text(left + 6, y + kRowHeight / 2 + 4, "failed: " + row.error, {{"class", "svg-error"}});
  doc.close_group();
}

}  // namespace

std::string draw_phases(const PhasesData& d) {
  const std::vector<double> probe = svg::LinearScale(0, d.x_max, 0, 1).ticks(6);
  const double tick = probe.size() > 1 ? probe[1] - probe[0] : d.x_max;
  const double x_end = std::ceil(d.x_max / tick - 1e-9) * tick;
  std::vector<svg::LegendItem> legend;
  for (const PhasesData::Segment& s : d.segments) legend.push_back({s.label, s.color});

  const double width = 1080;
  double label_w = 0;
  size_t batches = 0;
  for (const PhasesData::Row& row : d.rows) {
    label_w = std::max(label_w, svg::text_width(row.name, 12));
    batches += row.batch_starts ? 1 : 0;
  }
  const double left = std::max(150.0, label_w + 20);
  const double right = width - 80;
  const double top = 12 + svg::legend_rows(legend, left, right) * svg::kLegendRowHeight + 10;
  const double plot_h = kRowHeight * static_cast<double>(d.rows.size()) +
                        kBatchGap * static_cast<double>(std::max<size_t>(batches, 1) - 1);
  const double bottom = top + plot_h + 4;
  svg::Document doc(width, bottom + 46, "phases",
                    fmt::format("{}: phases of the step per point (milliseconds)", d.model),
                    {{"data-model", d.model}});
  svg::legend(doc, legend, left, 16, right);
  const svg::LinearScale x(0, x_end, left, right);
  std::vector<svg::Tick> ticks;
  for (double v : x.ticks(6)) ticks.push_back({x(v), tick_label(v)});
  svg::x_axis(doc, ticks, bottom, left, right, top, "median step time of the slowest replica (ms)");
  double y = top;
  for (size_t i = 0; i < d.rows.size(); ++i) {
    const PhasesData::Row& row = d.rows[i];
    if (i > 0 && row.batch_starts) y += kBatchGap;
    doc.text(left - 10, y + kRowHeight / 2 + 4, row.name,
             {{"class", "svg-label"}, {"text-anchor", "end"}});
    if (row.ok) {
      draw_bar(doc, d, row, x, y);
    } else {
      draw_failed(doc, row, left, y);
    }
    y += kRowHeight;
  }
  return std::move(doc).finish();
}

}  // namespace scalescope::html
