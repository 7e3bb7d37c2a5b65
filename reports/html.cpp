#include "reports/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "core/fs.h"
#include "core/nvtx.h"
#include "reports/svg.h"

namespace scalescope {
namespace {

using svg::Attrs;
using svg::escape;
using svg::num;

// ---------------------------------------------------------------------------------------
// Formatting.

// fmt 9 has no '%' presentation.
std::string percent(double fraction, int decimals = 1) {
  return fmt::format("{:.{}f}%", 100.0 * fraction, decimals);
}

// A share lost (positive) or gained (negative) in the waterfall: "−12.3%", "+2.0%". The
// typographic minus keeps the columns of a table aligned with the plus.
std::string signed_loss(double share) {
  const std::string magnitude = fmt::format("{:.1f}%", 100.0 * std::abs(share));
  if (magnitude == "0.0%") return magnitude;
  return (share > 0 ? "\u2212" : "+") + magnitude;
}

// Three significant figures or so, without exponent: 0.123, 1.23, 12.3, 1234.
std::string short_number(double v) {
  const double a = std::abs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string gib(int64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string count_with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string hex(nvtx::PhaseColor c) {
  return fmt::format("#{:02x}{:02x}{:02x}", c.red, c.green, c.blue);
}

// ---------------------------------------------------------------------------------------
// Colours. Phases take the NVTX timeline's colours, so that a bar here and a range in Nsight
// Systems read the same; the loss waterfall reuses them for the losses a phase explains.

struct PhaseSegment {
  const char* key;  // data-phase
  const char* label;
  std::string color;
  double (*ms)(const PhaseMedians&);
};

const std::array<PhaseSegment, 7>& phase_segments() {
  static const std::array<PhaseSegment, 7> segments = {{
      {"input", "input", hex(nvtx::phase_color(nvtx::Phase::kInput)),
       [](const PhaseMedians& m) { return m.input_ms; }},
      {"h2d", "h2d", hex(nvtx::phase_color(nvtx::Phase::kH2D)),
       [](const PhaseMedians& m) { return m.h2d_ms; }},
      {"forward", "forward", hex(nvtx::phase_color(nvtx::Phase::kForward)),
       [](const PhaseMedians& m) { return m.forward_ms; }},
      {"backward", "backward", hex(nvtx::phase_color(nvtx::Phase::kBackward)),
       [](const PhaseMedians& m) { return m.backward_ms; }},
      {"allreduce-exposed", "exposed all-reduce", hex(nvtx::phase_color(nvtx::Phase::kAllReduce)),
       [](const PhaseMedians& m) { return m.allreduce_exposed_ms; }},
      {"optimizer", "optimizer", hex(nvtx::phase_color(nvtx::Phase::kOptimizer)),
       [](const PhaseMedians& m) { return m.optimizer_ms; }},
      // The step's colour: what the step spent outside the named phases.
      {"other", "other", hex(nvtx::phase_color(nvtx::Phase::kStep)),
       [](const PhaseMedians& m) {
         return std::max(0.0, m.step_ms - (m.input_ms + m.h2d_ms + m.forward_ms + m.backward_ms +
                                           m.allreduce_exposed_ms + m.optimizer_ms));
       }},
  }};
  return segments;
}

// One colour per batch size in the speedup chart; distinct from one another in hue and
// lightness, and readable on white.
constexpr std::array<const char*, 7> kSeriesColors = {"#1f4e79", "#c2185b", "#2e7d32", "#6a3d9a",
                                                      "#b15928", "#00838f", "#4d4d4d"};
constexpr const char* kIdealColor = "#9aa0a6";
constexpr const char* kInkColor = "#1f2933";

// Efficiency → cell colour: red (0%) through yellow (50%) to green (100% and above). Every
// cell carries its number too, so the hue is a reading aid, not the only channel.
std::string efficiency_color(double e) {
  struct Stop {
    double at;
    int r, g, b;
  };
  static constexpr std::array<Stop, 5> stops = {{{0.0, 0xc6, 0x2a, 0x2a},
                                                 {0.5, 0xf0, 0x9a, 0x3e},
                                                 {0.75, 0xf4, 0xd1, 0x66},
                                                 {0.9, 0x9c, 0xcf, 0x6a},
                                                 {1.0, 0x2e, 0x9e, 0x55}}};
  const double x = std::clamp(e, 0.0, 1.0);
  for (size_t i = 1; i < stops.size(); ++i) {
    if (x <= stops[i].at) {
      const Stop& a = stops[i - 1];
      const Stop& b = stops[i];
      const double t = (x - a.at) / (b.at - a.at);
      const auto mix = [t](int u, int v) { return static_cast<int>(std::lround(u + (v - u) * t)); };
      return fmt::format("#{:02x}{:02x}{:02x}", mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b));
    }
  }
  return "#2e9e55";
}

// ---------------------------------------------------------------------------------------
// The points of one model, and its axes.

int64_t batch_key(const SweepPoint& p) {
  return p.mode == ScalingMode::kWeak ? p.batch : p.global_batch;
}

std::string batch_label(ScalingMode mode, int64_t batch) {
  return mode == ScalingMode::kWeak ? fmt::format("batch {}/device", batch)
                                    : fmt::format("global batch {}", batch);
}

struct ModelView {
  std::string name;
  int index = 0;  // for page anchors
  ScalingMode mode = ScalingMode::kWeak;
  std::string device_kind;
  std::vector<const SweepPoint*> points;  // report order
  std::vector<int> devices;               // ascending
  std::vector<int64_t> batches;           // ascending (weak: per device; strong: global)
  const CommunicationAnalysis* communication = nullptr;

  const SweepPoint* at(int d, int64_t b) const {
    for (const SweepPoint* p : points) {
      if (p->devices == d && batch_key(*p) == b) return p;
    }
    return nullptr;
  }
  // The points of one batch, by device count.
  std::vector<const SweepPoint*> series(int64_t b) const {
    std::vector<const SweepPoint*> out;
    for (const SweepPoint* p : points) {
      if (batch_key(*p) == b) out.push_back(p);
    }
    std::stable_sort(out.begin(), out.end(), [](const SweepPoint* x, const SweepPoint* y) {
      return x->devices < y->devices;
    });
    return out;
  }
  std::string batch_text(int64_t b) const { return batch_label(mode, b); }
};

std::vector<ModelView> models_of(const SweepReport& report) {
  std::vector<ModelView> out;
  for (const SweepPoint& p : report.points) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const ModelView& m) { return m.name == p.model; });
    if (it == out.end()) {
      ModelView m;
      m.name = p.model;
      m.index = static_cast<int>(out.size());
      m.mode = p.mode;
      m.device_kind = p.device_kind;
      out.push_back(std::move(m));
      it = out.end() - 1;
    }
    it->points.push_back(&p);
  }
  for (ModelView& m : out) {
    std::set<int> devices;
    std::set<int64_t> batches;
    for (const SweepPoint* p : m.points) {
      devices.insert(p->devices);
      batches.insert(batch_key(*p));
    }
    m.devices.assign(devices.begin(), devices.end());
    m.batches.assign(batches.begin(), batches.end());
    for (const CommunicationAnalysis& c : report.communication) {
      if (c.model == m.name) m.communication = &c;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Legends: items laid out left to right, wrapping at max_x.

double legend_width(const svg::LegendItem& item) {
  return (item.line ? 22.0 : 11.0) + 5 + svg::text_width(item.label) + 14;
}

int legend_rows(const std::vector<svg::LegendItem>& items, double x0, double max_x) {
  int rows = items.empty() ? 0 : 1;
  double x = x0;
  for (const svg::LegendItem& item : items) {
    if (x > x0 && x + legend_width(item) > max_x) {
      ++rows;
      x = x0;
    }
    x += legend_width(item);
  }
  return rows;
}

constexpr double kLegendRow = 18;

void draw_legend(svg::Document& doc, const std::vector<svg::LegendItem>& items, double x0,
                 double y0, double max_x) {
  double x = x0;
  double y = y0;
  for (const svg::LegendItem& item : items) {
    if (x > x0 && x + legend_width(item) > max_x) {
      y += kLegendRow;
      x = x0;
    }
    x = svg::legend_item(doc, x, y, item);
  }
}

// 3 significant digits at most: 0.0156, not 0.015625.
std::string tick_label(double v) {
  return fmt::format("{:.3g}", v);
}

// ---------------------------------------------------------------------------------------
// Speedup against devices: per batch, the measured speedups (with their 95% intervals), the
// ideal y = N, and the all-reduce model's projection dashed in a shaded "projected" band.

std::string speedup_chart(const ModelView& m) {
  struct Series {
    int64_t batch;
    std::string color;
    std::vector<const SweepPoint*> measured;  // ok, with a speedup
    std::vector<const SweepPoint*> failed;
    bool unknown = false;  // ok points without a speedup (no one-device baseline)
    const CommunicationAnalysis::Series* projection = nullptr;
  };
  std::vector<Series> series;
  double x_max = 2;
  double s_min = 1;
  double s_max = 1;
  int measured_max = 1;
  for (size_t i = 0; i < m.batches.size(); ++i) {
    Series s{m.batches[i], kSeriesColors[i % kSeriesColors.size()], {}, {}, false, nullptr};
    for (const SweepPoint* p : m.series(s.batch)) {
      x_max = std::max(x_max, static_cast<double>(p->devices));
      if (!p->ok()) {
        s.failed.push_back(p);
      } else if (!p->summary.speedup) {
        s.unknown = true;
      } else {
        s.measured.push_back(p);
        measured_max = std::max(measured_max, p->devices);
        s_min = std::min(s_min, p->summary.speedup->low);
        s_max = std::max(s_max, p->summary.speedup->high);
      }
    }
    if (m.communication != nullptr && m.mode == ScalingMode::kWeak) {
      for (const CommunicationAnalysis::Series& c : m.communication->series) {
        if (c.batch != s.batch || c.projections.empty()) continue;
        s.projection = &c;
        for (const Projection& p : c.projections) {
          x_max = std::max(x_max, static_cast<double>(p.devices));
          s_min = std::min(s_min, p.efficiency * p.devices);
          s_max = std::max(s_max, p.efficiency * p.devices);
        }
      }
    }
    series.push_back(std::move(s));
  }
  const bool any_projection = std::any_of(series.begin(), series.end(),
                                          [](const Series& s) { return s.projection != nullptr; });
  const bool any_failed =
      std::any_of(series.begin(), series.end(), [](const Series& s) { return !s.failed.empty(); });

  // Log-log: the ideal line is the diagonal, and equal ratios of devices are equal steps.
  const double x_hi = std::exp2(std::ceil(std::log2(x_max) - 1e-9));
  const double y_lo = std::exp2(std::floor(std::log2(std::max(s_min, 1.0 / 64)) + 1e-9));
  const double y_hi = std::exp2(std::ceil(std::log2(std::max(s_max, x_hi)) - 1e-9));

  std::vector<svg::LegendItem> legend;
  for (const Series& s : series) {
    if (s.measured.empty() && s.projection == nullptr) continue;  // nothing of it drawn
    legend.push_back({m.batch_text(s.batch), s.color, true, false, true, false});
  }
  legend.push_back({"ideal (y = N)", kIdealColor, true, false, false, false});
  if (any_projection) {
    legend.push_back({"projected (all-reduce model)", "#555555", true, true, true, true});
  }
  std::vector<std::string> notes;
  for (const Series& s : series) {
    if (s.unknown) {
      notes.push_back(fmt::format("{}: no one-device point to compare with, so no speedup",
                                  m.batch_text(s.batch)));
    }
  }
  if (any_failed) notes.push_back("\u00d7 on the axis: a point that failed (see Failed points)");

  const double width = 560;
  const double left = 62;
  const double right = width - 22;
  const double top = 12 + legend_rows(legend, left, right) * kLegendRow + 8;
  const double plot_h = 270;
  const double bottom = top + plot_h;
  const double height = bottom + 48 + static_cast<double>(notes.size()) * 15;
  svg::Document doc(width, height, "speedup", fmt::format("{}: speedup against devices", m.name),
                    {{"data-model", m.name}});
  draw_legend(doc, legend, left, 16, right);

  // A little room beyond the first and last ticks, so that markers there are not cut by the
  // axes.
  const double pad = std::exp2(0.12);
  const svg::Log2Scale x(1 / pad, x_hi * pad, left, right);
  const svg::Log2Scale y(y_lo / pad, y_hi * pad, bottom, top);
  if (any_projection && measured_max < x_hi) {
    // Shaded from halfway (in log terms) between the last measured count and the next one.
    const double from = x(measured_max * std::sqrt(2.0));
    doc.rect(from, top, right - from, plot_h, {{"fill", "#f3f4f6"}});
    doc.text(right - 6, top + 14, "projected",
             {{"class", "svg-note"}, {"text-anchor", "end"}, {"font-style", "italic"}});
  }
  std::vector<svg::Tick> x_ticks;
  for (double v : x.ticks(10)) x_ticks.push_back({x(v), tick_label(v)});
  std::vector<svg::Tick> y_ticks;
  for (double v : y.ticks(8)) y_ticks.push_back({y(v), tick_label(v)});
  svg::x_axis(doc, x_ticks, bottom, left, right, top, fmt::format("devices ({})", m.device_kind));
  svg::y_axis(doc, y_ticks, left, bottom, top, right, "speedup (\u00d7 one device)");

  doc.polyline({{x(1 / pad), y(1 / pad)}, {x(x_hi * pad), y(x_hi * pad)}},
               {{"stroke", kIdealColor}, {"stroke-width", "2"}, {"data-ideal", "true"}});

  for (const Series& s : series) {
    const std::string batch = std::to_string(s.batch);
    if (s.projection != nullptr) {
      std::vector<svg::Point> line;
      for (const SweepPoint* p : s.measured) {
        if (p->devices == s.projection->measured_devices) {
          line.push_back({x(p->devices), y(p->summary.speedup->value)});
        }
      }
      for (const Projection& p : s.projection->projections) {
        line.push_back({x(p.devices), y(p.efficiency * p.devices)});
      }
      doc.polyline(line, {{"stroke", s.color},
                          {"stroke-width", "2"},
                          {"stroke-dasharray", "6 4"},
                          {"data-projected", "true"},
                          {"data-batch", batch}});
      for (const Projection& p : s.projection->projections) {
        doc.circle(x(p.devices), y(p.efficiency * p.devices), 3.5,
                   {{"fill", "#ffffff"},
                    {"stroke", s.color},
                    {"stroke-width", "1.5"},
                    {"data-projected", std::to_string(p.devices)}},
                   fmt::format("projected, {}, {} devices: speedup {:.2f}, efficiency {} "
                               "(step {:.2f} ms, exposed all-reduce {:.2f} ms)",
                               m.batch_text(s.batch), p.devices, p.efficiency * p.devices,
                               percent(p.efficiency), p.step_ms, p.exposed_ms));
      }
    }
    if (!s.measured.empty()) {
      std::vector<svg::Point> line;
      for (const SweepPoint* p : s.measured) {
        line.push_back({x(p->devices), y(p->summary.speedup->value)});
      }
      doc.polyline(line, {{"stroke", s.color},
                          {"stroke-width", "2.25"},
                          {"data-series", "measured"},
                          {"data-batch", batch}});
      for (const SweepPoint* p : s.measured) {
        const Interval& v = *p->summary.speedup;
        const double cx = x(p->devices);
        if (y(v.low) - y(v.high) > 2) {
          doc.line(cx, y(v.low), cx, y(v.high), {{"stroke", s.color}, {"stroke-width", "1.25"}});
        }
        doc.circle(cx, y(v.value), 4.5,
                   {{"fill", s.color}, {"stroke", "#ffffff"}, {"data-point", p->label()}},
                   fmt::format("{}: speedup {:.2f} [{:.2f}, {:.2f}], efficiency {}", p->label(),
                               v.value, v.low, v.high,
                               p->summary.efficiency ? percent(p->summary.efficiency->value)
                                                     : std::string("-")));
      }
    }
    for (const SweepPoint* p : s.failed) {
      doc.open_group({{"data-failed", p->label()}},
                     fmt::format("{} failed: {}", p->label(), p->error));
      doc.text(x(p->devices), bottom - 5, "\u00d7",
               {{"fill", s.color},
                {"font-size", "16"},
                {"font-weight", "700"},
                {"text-anchor", "middle"}});
      doc.close_group();
    }
  }
  double note_y = bottom + 50;
  for (const std::string& n : notes) {
    doc.text(left, note_y, n, {{"class", "svg-note"}});
    note_y += 15;
  }
  return std::move(doc).finish();
}

// ---------------------------------------------------------------------------------------
// Efficiency heat map: rows batches, columns device counts, a labelled cell per point.

std::string heatmap_chart(const ModelView& m) {
  const double cell_w = 84;
  const double cell_h = 44;
  double label_w = 0;
  for (int64_t b : m.batches) label_w = std::max(label_w, svg::text_width(m.batch_text(b), 12));
  const double left = std::max(96.0, label_w + 22);
  const double top = 50;
  const double grid_w = cell_w * static_cast<double>(m.devices.size());
  const double grid_h = cell_h * static_cast<double>(m.batches.size());
  const double width = std::max(400.0, left + grid_w + 24);
  const double height = top + grid_h + 62;
  svg::Document doc(width, height, "efficiency-heatmap",
                    fmt::format("{}: efficiency by devices and batch", m.name),
                    {{"data-model", m.name}});
  doc.text(left + grid_w / 2, 18, fmt::format("devices ({})", m.device_kind),
           {{"class", "svg-label"}, {"text-anchor", "middle"}});
  for (size_t c = 0; c < m.devices.size(); ++c) {
    doc.text(left + cell_w * (static_cast<double>(c) + 0.5), top - 10, std::to_string(m.devices[c]),
             {{"class", "svg-tick"}, {"text-anchor", "middle"}, {"font-weight", "600"}});
  }
  for (size_t r = 0; r < m.batches.size(); ++r) {
    const double y0 = top + cell_h * static_cast<double>(r);
    doc.text(left - 10, y0 + cell_h / 2 + 4, m.batch_text(m.batches[r]),
             {{"class", "svg-label"}, {"text-anchor", "end"}});
    for (size_t c = 0; c < m.devices.size(); ++c) {
      const double x0 = left + cell_w * static_cast<double>(c);
      const double cx = x0 + cell_w / 2;
      const SweepPoint* p = m.at(m.devices[c], m.batches[r]);
      if (p == nullptr) {
        // Not in the grid (e.g. a sweep stopped early): an empty slot, not a point.
        doc.rect(x0 + 1, y0 + 1, cell_w - 2, cell_h - 2,
                 {{"fill", "#fafafa"}, {"stroke", "#e3e5e8"}, {"stroke-dasharray", "3 3"}});
        continue;
      }
      std::string fill = "#eef0f2";
      std::string text_color = "#5f6b76";
      std::string main_text;
      std::string sub_text;
      std::string tooltip;
      std::string state;
      if (!p->ok()) {
        state = "failed";
        main_text = "failed";
        text_color = "#b42318";
        tooltip = fmt::format("{} failed: {}", p->label(), p->error);
      } else if (!p->summary.efficiency) {
        state = "unknown";
        main_text = "n/a";
        sub_text = "no baseline";
        tooltip = fmt::format("{}: no one-device point to compare with", p->label());
      } else {
        const Interval& e = *p->summary.efficiency;
        state = "ok";
        fill = efficiency_color(e.value);
        text_color = e.value < 0.2 ? "#ffffff" : kInkColor;
        main_text = percent(e.value, 0);
        if (p->summary.speedup) sub_text = fmt::format("\u00d7{:.2f}", p->summary.speedup->value);
        tooltip = fmt::format("{}: efficiency {} [{}, {}], speedup {}", p->label(),
                              percent(e.value), percent(e.low), percent(e.high),
                              p->summary.speedup ? fmt::format("{:.2f}", p->summary.speedup->value)
                                                 : std::string("-"));
      }
      doc.open_group({{"data-cell", p->label()}, {"data-state", state}}, tooltip);
      doc.rect(x0 + 1, y0 + 1, cell_w - 2, cell_h - 2, {{"fill", fill}, {"rx", "3"}});
      doc.text(cx, sub_text.empty() ? y0 + cell_h / 2 + 5 : y0 + cell_h / 2 + 1, main_text,
               {{"text-anchor", "middle"},
                {"fill", text_color},
                {"font-size", "14"},
                {"font-weight", "700"}});
      if (!sub_text.empty()) {
        doc.text(cx, y0 + cell_h / 2 + 15, sub_text,
                 {{"text-anchor", "middle"}, {"fill", text_color}, {"font-size", "10.5"}});
      }
      doc.close_group();
    }
  }
  // Colour scale: eleven steps from 0% to 100%.
  const double sw = 18;
  const double scale_x = left;
  const double scale_y = top + grid_h + 24;
  doc.text(scale_x, scale_y - 6, "efficiency", {{"class", "svg-tick"}});
  for (int i = 0; i <= 10; ++i) {
    doc.rect(scale_x + sw * i, scale_y, sw, 10, {{"fill", efficiency_color(i / 10.0)}});
  }
  doc.text(scale_x, scale_y + 24, "0%", {{"class", "svg-tick"}, {"text-anchor", "start"}});
  doc.text(scale_x + sw * 11, scale_y + 24, "\u2265100%",
           {{"class", "svg-tick"}, {"text-anchor", "end"}});
  return std::move(doc).finish();
}

// ---------------------------------------------------------------------------------------
// Phase breakdown: a horizontal stacked bar per point (the slowest replica's phases, medians
// over the measured steps), grouped by batch.

std::string phases_chart(const ModelView& m) {
  std::vector<const SweepPoint*> rows;
  for (int64_t b : m.batches) {
    for (const SweepPoint* p : m.series(b)) rows.push_back(p);
  }
  double x_max = 0;
  for (const SweepPoint* p : rows) {
    if (!p->ok()) continue;
    double sum = 0;
    for (const PhaseSegment& s : phase_segments()) sum += s.ms(p->summary.group);
    x_max = std::max({x_max, sum, p->summary.group.step_ms});
  }
  if (x_max <= 0) x_max = 1;
  const std::vector<double> probe = svg::LinearScale(0, x_max, 0, 1).ticks(6);
  const double step = probe.size() > 1 ? probe[1] - probe[0] : x_max;
  const double x_end = std::ceil(x_max / step - 1e-9) * step;

  std::vector<svg::LegendItem> legend;
  for (const PhaseSegment& s : phase_segments()) legend.push_back({s.label, s.color});

  const double width = 1080;
  double label_w = 0;
  for (const SweepPoint* p : rows) {
    label_w =
        std::max(label_w, svg::text_width(fmt::format("{}:{} · {}", p->device_kind, p->devices,
                                                      m.batch_text(batch_key(*p))),
                                          12));
  }
  const double left = std::max(150.0, label_w + 20);
  const double right = width - 80;
  const double top = 12 + legend_rows(legend, left, right) * kLegendRow + 10;
  const double row_h = 26;
  const double gap = 10;  // between batch groups
  const double plot_h = row_h * static_cast<double>(rows.size()) +
                        gap * static_cast<double>(std::max<size_t>(m.batches.size(), 1) - 1);
  const double bottom = top + plot_h + 4;
  const double height = bottom + 46;
  svg::Document doc(width, height, "phases",
                    fmt::format("{}: phases of the step per point (milliseconds)", m.name),
                    {{"data-model", m.name}});
  draw_legend(doc, legend, left, 16, right);
  const svg::LinearScale x(0, x_end, left, right);
  std::vector<svg::Tick> ticks;
  for (double v : x.ticks(6)) ticks.push_back({x(v), tick_label(v)});
  svg::x_axis(doc, ticks, bottom, left, right, top, "median step time of the slowest replica (ms)");

  double y = top;
  int64_t previous_batch = rows.empty() ? 0 : batch_key(*rows.front());
  for (const SweepPoint* p : rows) {
    if (batch_key(*p) != previous_batch) {
      y += gap;
      previous_batch = batch_key(*p);
    }
    const double mid = y + row_h / 2;
    doc.text(left - 10, mid + 4,
             fmt::format("{}:{} · {}", p->device_kind, p->devices, m.batch_text(batch_key(*p))),
             {{"class", "svg-label"}, {"text-anchor", "end"}});
    if (!p->ok()) {
      doc.open_group({{"data-failed", p->label()}},
                     fmt::format("{} failed: {}", p->label(), p->error));
      doc.text(left + 6, mid + 4, "failed: " + p->error, {{"class", "svg-error"}});
      doc.close_group();
      y += row_h;
      continue;
    }
    const PhaseMedians& g = p->summary.group;
    doc.open_group({{"data-bar", p->label()}});
    double at = 0;
    for (const PhaseSegment& s : phase_segments()) {
      const double ms = s.ms(g);
      if (ms <= 0) continue;
      doc.rect(x(at), y + 4, x(at + ms) - x(at), row_h - 8,
               {{"fill", s.color}, {"data-phase", s.key}},
               fmt::format("{}: {} {:.3f} ms ({} of the step)", p->label(), s.label, ms,
                           g.step_ms > 0 ? percent(ms / g.step_ms) : std::string("-")));
      at += ms;
    }
    // Medians of phases need not add up to the median step: mark the step where they overrun.
    if (at > g.step_ms * 1.005) {
      doc.line(x(g.step_ms), y + 1, x(g.step_ms), y + row_h - 1,
               {{"stroke", kInkColor}, {"stroke-width", "2"}, {"data-step-marker", "true"}});
    }
    doc.close_group();
    doc.text(x(std::max(at, g.step_ms)) + 6, mid + 4, fmt::format("{} ms", short_number(g.step_ms)),
             {{"class", "svg-value"}});
    y += row_h;
  }
  return std::move(doc).finish();
}

// ---------------------------------------------------------------------------------------
// Efficiency-loss waterfall at the largest device count of one batch: ideal 100%, minus each
// share the loss breakdown attributes, down to the measured efficiency.

std::string waterfall_chart(const ModelView& m, const SweepPoint& p) {
  const LossBreakdown& l = *p.summary.loss;
  struct Step {
    const char* key;
    const char* line1;
    const char* line2;
    double share;  // lost (positive) or gained (negative)
    std::string color;
  };
  const std::array<Step, 5> losses = {{
      {"allreduce", "all-reduce", "", l.allreduce_share,
       hex(nvtx::phase_color(nvtx::Phase::kAllReduce))},
      {"input", "input", "", l.input_share, hex(nvtx::phase_color(nvtx::Phase::kInput))},
      {"compute", "compute", "slowdown", l.compute_share,
       hex(nvtx::phase_color(nvtx::Phase::kBackward))},
      {"stragglers", "stragglers", "", l.straggler_share, "#7b5ea7"},
      {"other", "other", "", l.other_share, hex(nvtx::phase_color(nvtx::Phase::kStep))},
  }};
  double lo = 0;
  double hi = 1;
  double level = 1;
  for (const Step& s : losses) {
    level -= s.share;
    lo = std::min(lo, level);
    hi = std::max(hi, level);
  }
  lo = std::min(lo, l.efficiency);
  hi = std::max(hi, l.efficiency);
  const double step = hi - lo > 1.5 ? 0.5 : 0.2;
  // A bar may overrun the last gridline by 1% (into the margin) rather than add a gridline
  // of empty space: losses slightly negative leave the level just above 100%.
  const double d_lo = std::floor(lo / step + 0.05) * step;
  const double d_hi = std::ceil(hi / step - 0.05) * step;

  const double width = 520;
  const double left = 60;
  const double right = width - 14;
  const double top = 26;
  const double plot_h = 200;
  const double bottom = top + plot_h;
  const double height = bottom + 46;
  svg::Document doc(width, height, "waterfall",
                    fmt::format("{}: efficiency lost at {}:{}, {}", m.name, p.device_kind,
                                p.devices, m.batch_text(batch_key(p))),
                    {{"data-model", m.name},
                     {"data-batch", std::to_string(batch_key(p))},
                     {"data-devices", std::to_string(p.devices)}});
  const svg::LinearScale y(d_lo, d_hi, bottom, top);
  std::vector<svg::Tick> ticks;
  for (double v = d_lo; v <= d_hi + step / 2; v += step) {
    ticks.push_back({y(v), percent(std::abs(v) < step / 2 ? 0.0 : v, 0)});
  }
  svg::y_axis(doc, ticks, left, bottom, top, right, "efficiency");
  if (d_lo < 0) doc.line(left, y(0), right, y(0), {{"class", "svg-axis"}});

  const double slot = (right - left) / 7;
  const double bar_w = slot * 0.62;
  const auto bar = [&](int i, const char* key, double from, double to, const std::string& color,
                       const std::string& value, const char* line1, const char* line2,
                       const std::string& tooltip) {
    const double cx = left + slot * (i + 0.5);
    const double y_top = y(std::max(from, to));
    doc.rect(cx - bar_w / 2, y_top, bar_w, std::max(1.0, std::abs(y(from) - y(to))),
             {{"fill", color}, {"data-step", key}}, tooltip);
    doc.text(cx, y_top - 5, value, {{"class", "svg-value"}, {"text-anchor", "middle"}});
    doc.text(cx, bottom + 16, line1, {{"class", "svg-tick"}, {"text-anchor", "middle"}});
    if (line2[0] != '\0') {
      doc.text(cx, bottom + 29, line2, {{"class", "svg-tick"}, {"text-anchor", "middle"}});
    }
  };
  const auto connector = [&](int i, double at) {
    doc.line(left + slot * (i + 0.5) + bar_w / 2, y(at), left + slot * (i + 1.5) - bar_w / 2, y(at),
             {{"stroke", "#9aa0a6"}, {"stroke-width", "1"}});
  };
  bar(0, "ideal", 0, 1, "#52606d", "100%", "ideal", "",
      fmt::format("ideal: each of the {} devices as fast as one device alone", p.devices));
  level = 1;
  for (size_t i = 0; i < losses.size(); ++i) {
    const Step& s = losses[i];
    connector(static_cast<int>(i), level);
    bar(static_cast<int>(i) + 1, s.key, level, level - s.share, s.color, signed_loss(s.share),
        s.line1, s.line2,
        fmt::format("{}{}{}: {} of the step at {} devices", s.line1, s.line2[0] ? " " : "", s.line2,
                    s.share >= 0 ? "lost " + percent(s.share) : "gained " + percent(-s.share),
                    p.devices));
    level -= s.share;
  }
  connector(5, level);
  bar(6, "measured", 0, l.efficiency, kInkColor, percent(l.efficiency), "measured", "",
      fmt::format("measured efficiency {} ({} lost)", percent(l.efficiency), percent(l.lost)));
  return std::move(doc).finish();
}

// ---------------------------------------------------------------------------------------
// HTML around the charts.

constexpr const char* kStyle = R"css(
:root { --ink: #1f2933; --muted: #5f6b76; --line: #e3e5e8; --panel: #ffffff; --bg: #f5f6f8;
        --accent: #1f4e79; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
             sans-serif; }
main { max-width: 1160px; margin: 0 auto; padding: 24px 20px 48px; }
header.page { background: var(--accent); color: #fff; }
header.page .inner { max-width: 1160px; margin: 0 auto; padding: 22px 20px 18px; }
header.page h1 { margin: 0 0 4px; font-size: 24px; font-weight: 650; letter-spacing: .2px; }
header.page .meta { opacity: .9; font-size: 13px; }
header.page .meta span + span::before { content: "·"; margin: 0 8px; opacity: .7; }
nav.toc { margin-top: 12px; font-size: 13px; }
nav.toc a { color: #fff; opacity: .92; margin-right: 14px; text-decoration: none;
            border-bottom: 1px solid rgba(255,255,255,.45); }
.pill { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px;
        font-weight: 600; }
.pill.ok { background: #d7f0df; color: #17613a; }
.pill.warn { background: #fde7c7; color: #8a4b08; }
.pill.bad { background: #fbd9d6; color: #a4231a; }
.pill.info { background: #e7ebef; color: #45505b; }
section { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
          padding: 18px 20px 20px; margin: 18px 0; }
h2 { font-size: 19px; margin: 0 0 2px; }
h2 code { font-size: 18px; }
h3 { font-size: 14px; margin: 18px 0 8px; color: var(--muted); text-transform: uppercase;
     letter-spacing: .6px; font-weight: 650; }
.sub { color: var(--muted); font-size: 13px; margin-bottom: 6px; }
.charts { display: flex; flex-wrap: wrap; gap: 18px 28px; align-items: flex-start; }
figure { margin: 0; }
figcaption { font-weight: 600; font-size: 13px; margin: 4px 0 6px; }
figcaption .hint { font-weight: 400; color: var(--muted); }
svg { display: block; max-width: 100%; height: auto; font-family: inherit; }
svg .svg-grid { stroke: #eceef1; stroke-width: 1; }
svg .svg-axis { stroke: #8a939c; stroke-width: 1; }
svg .svg-tick { font-size: 11px; fill: #5f6b76; }
svg .svg-label { font-size: 12px; fill: #3e4852; }
svg .svg-legend { font-size: 11px; fill: #3e4852; }
svg .svg-value { font-size: 11px; font-weight: 600; fill: #1f2933; }
svg .svg-note { font-size: 11px; fill: #6b7580; }
svg .svg-error { font-size: 11.5px; fill: #b42318; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { color: var(--muted); font-weight: 600; background: #fafbfc; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td { color: #a4231a; }
table.kv th { width: 38%; background: none; white-space: normal; }
table.kv td { overflow-wrap: anywhere; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr));
         gap: 8px 28px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
            monospace; font-size: 12.5px; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 0; }
.note { color: var(--muted); font-size: 13px; }
details summary { cursor: pointer; color: var(--accent); font-weight: 600; }
footer { color: var(--muted); font-size: 12px; text-align: center; margin-top: 24px; }
)css";

std::string severity_pill(const std::string& severity) {
  const char* cls = severity == kSeverityHigh       ? "bad"
                    : severity == kSeverityModerate ? "warn"
                                                    : "info";
  return fmt::format(R"(<span class="pill {}">{}</span>)", cls, escape(severity));
}

std::string interval_text(const std::optional<Interval>& i, bool as_percent) {
  if (!i) return "&ndash;";
  if (as_percent) {
    return fmt::format("{} <span class=\"note\">[{}, {}]</span>", percent(i->value, 0),
                       percent(i->low, 0), percent(i->high, 0));
  }
  return fmt::format("{:.2f} <span class=\"note\">[{:.2f}, {:.2f}]</span>", i->value, i->low,
                     i->high);
}

void points_table(std::string& out, const ModelView& m) {
  out +=
      "<h3>Points</h3>\n<table>\n<tr><th class=\"num\">devices</th><th class=\"num\">batch</th>"
      "<th class=\"num\">global batch</th><th class=\"num\">samples/s [95% CI]</th>"
      "<th class=\"num\">step ms (p10&ndash;p90)</th><th class=\"num\">speedup</th>"
      "<th class=\"num\">efficiency</th><th>bottleneck</th></tr>\n";
  for (int64_t b : m.batches) {
    for (const SweepPoint* p : m.series(b)) {
      const std::string devices = escape(fmt::format("{}:{}", p->device_kind, p->devices));
      if (!p->ok()) {
        fmt::format_to(std::back_inserter(out),
                       "<tr class=\"failed\"><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                       "<td class=\"num\">{}</td><td colspan=\"5\">failed: {}</td></tr>\n",
                       devices, p->batch, p->global_batch, escape(p->error));
        continue;
      }
      const PointSummary& s = p->summary;
      const Finding& top = s.verdict.top();
      fmt::format_to(
          std::back_inserter(out),
          "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
          "<td class=\"num\">{} <span class=\"note\">[{}, {}]</span></td>"
          "<td class=\"num\">{} <span class=\"note\">({}&ndash;{})</span></td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"nowrap\">{} "
          "{}</td></tr>\n",
          devices, p->batch, p->global_batch, short_number(s.throughput.value),
          short_number(s.throughput.low), short_number(s.throughput.high),
          short_number(s.step_ms_median), short_number(s.step_ms_p10), short_number(s.step_ms_p90),
          interval_text(s.speedup, false), interval_text(s.efficiency, true), escape(top.kind),
          severity_pill(top.severity));
    }
  }
  out += "</table>\n";
}

void communication_text(std::string& out, const ModelView& m) {
  if (m.communication == nullptr) return;
  const CommunicationAnalysis& c = *m.communication;
  out += "<h3>All-reduce model</h3>\n<p class=\"note\">";
  if (!c.fit) {
    out += "Not fitted: " + escape(c.fit_error) + ".";
  } else {
    fmt::format_to(std::back_inserter(out),
                   "time = {:.3f} ms + bytes &middot; 2(N&minus;1)/N &divide; {} GB/s "
                   "(r&sup2; {:.2f}, {} bucket samples). {}",
                   c.fit->alpha_ms,
                   c.fit->bus_bandwidth_gbps > 0 ? short_number(c.fit->bus_bandwidth_gbps)
                                                 : std::string("&infin;"),
                   c.fit->r_squared, c.fit->samples,
                   c.series.empty()
                       ? "No projection: it needs weak scaling and a one-device point."
                       : "The dashed lines in the speedup chart project it to more devices, with "
                         "the compute and input time of the largest measured point.");
  }
  out += "</p>\n";
}

void model_section(std::string& out, const ModelView& m) {
  const SweepPoint& any = *m.points.front();
  fmt::format_to(std::back_inserter(out), "<section id=\"model-{}\" data-model=\"{}\">\n", m.index,
                 escape(m.name));
  fmt::format_to(std::back_inserter(out), "<h2><code>{}</code></h2>\n<div class=\"sub\">",
                 escape(m.name));
  std::vector<std::string> facts;
  facts.push_back(to_string(m.mode) + " scaling");
  if (any.params > 0) facts.push_back(count_with_commas(any.params) + " parameters");
  if (any.forward_flops_per_sample > 0) {
    facts.push_back(fmt::format("{:.3g} MFLOP forward per sample",
                                static_cast<double>(any.forward_flops_per_sample) / 1e6));
  }
  facts.push_back(fmt::format("{} point{}", m.points.size(), m.points.size() == 1 ? "" : "s"));
  for (size_t i = 0; i < facts.size(); ++i) out += (i > 0 ? " &middot; " : "") + escape(facts[i]);
  out += "</div>\n<div class=\"charts\">\n";
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Speedup against devices <span class=\"hint\">(log scales; "
                 "bars: 95% CI)</span></figcaption>\n{}\n</figure>\n",
                 speedup_chart(m));
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Scaling efficiency <span class=\"hint\">(speedup &divide; "
                 "devices)</span></figcaption>\n{}\n</figure>\n",
                 heatmap_chart(m));
  out += "</div>\n";
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Where the step goes <span class=\"hint\">(median phases "
                 "of the slowest replica; other = step &minus; the phases)</span></figcaption>\n"
                 "{}\n</figure>\n",
                 phases_chart(m));

  std::string waterfalls;
  std::vector<std::string> missing;
  for (int64_t b : m.batches) {
    const SweepPoint* largest = nullptr;
    for (const SweepPoint* p : m.series(b)) {
      if (p->ok() && p->summary.loss) largest = p;
    }
    if (largest == nullptr) {
      missing.push_back(m.batch_text(b));
      continue;
    }
    fmt::format_to(std::back_inserter(waterfalls),
                   "<figure><figcaption>Efficiency lost at {}:{}, {}</figcaption>\n{}\n"
                   "</figure>\n",
                   escape(largest->device_kind), largest->devices, escape(m.batch_text(b)),
                   waterfall_chart(m, *largest));
  }
  out += "<h3>Efficiency lost at the largest device count</h3>\n";
  if (!waterfalls.empty()) out += "<div class=\"charts\">\n" + waterfalls + "</div>\n";
  if (!missing.empty()) {
    std::string list;
    for (const std::string& s : missing) list += (list.empty() ? "" : ", ") + s;
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\">No breakdown for {}: it needs a successful point on more "
                   "than one device and the one-device point to compare with.</p>\n",
                   escape(list));
  }
  communication_text(out, m);
  points_table(out, m);
  out += "</section>\n";
}

void verdicts_section(std::string& out, const SweepReport& report) {
  out +=
      "<section id=\"verdicts\">\n<h2>Verdicts</h2>\n<div class=\"sub\">Every finding of "
      "every point, the largest share of the step first.</div>\n<table data-table=\"verdicts\">"
      "\n<tr><th>point</th><th>finding</th><th>severity</th><th class=\"num\">share of "
      "step</th><th>explanation</th></tr>\n";
  bool any = false;
  for (const SweepPoint& p : report.points) {
    if (!p.ok()) continue;
    const std::vector<Finding>& findings = p.summary.verdict.findings;
    for (size_t i = 0; i < findings.size(); ++i) {
      const Finding& f = findings[i];
      any = true;
      out += "<tr>";
      if (i == 0) {
        fmt::format_to(std::back_inserter(out), "<td class=\"nowrap\" rowspan=\"{}\">{}</td>",
                       findings.size(), escape(p.label()));
      }
      fmt::format_to(std::back_inserter(out),
                     "<td class=\"nowrap\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td>"
                     "</tr>\n",
                     escape(f.kind), severity_pill(f.severity), percent(f.share),
                     escape(f.explanation));
    }
  }
  if (!any) out += "<tr><td colspan=\"5\" class=\"note\">No successful point.</td></tr>\n";
  out += "</table>\n</section>\n";
}

void failures_section(std::string& out, const SweepReport& report) {
  out += "<section id=\"failures\">\n<h2>Failed points</h2>\n";
  std::string rows;
  for (const SweepPoint& p : report.points) {
    if (p.ok()) continue;
    fmt::format_to(std::back_inserter(rows), "<tr class=\"failed\"><td>{}</td><td>{}</td></tr>\n",
                   escape(p.label()), escape(p.error));
  }
  if (rows.empty()) {
    out += "<p class=\"note\">None: every point ran.</p>\n";
  } else {
    out += "<table data-table=\"failures\">\n<tr><th>point</th><th>error</th></tr>\n" + rows +
           "</table>\n";
  }
  out += "</section>\n";
}

void kv_table(std::string& out, const char* title,
              const std::vector<std::pair<std::string, std::string>>& rows) {
  fmt::format_to(std::back_inserter(out), "<div><h3>{}</h3>\n<table class=\"kv\">\n", title);
  for (const auto& [k, v] : rows) {
    fmt::format_to(std::back_inserter(out), "<tr><th>{}</th><td>{}</td></tr>\n", escape(k),
                   v.empty() ? std::string("<span class=\"note\">&ndash;</span>") : escape(v));
  }
  out += "</table></div>\n";
}

void environment_section(std::string& out, const SweepReport& report) {
  const Environment& e = report.environment;
  out += "<section id=\"environment\">\n<h2>Environment</h2>\n";
  if (!e.captured_at.empty()) {
    out += "<div class=\"sub\">Captured " + escape(e.captured_at) + "</div>\n";
  }
  out += "<div class=\"grid2\">\n";
  kv_table(out, "Host",
           {{"hostname", e.host.hostname},
            {"CPU", e.host.cpu_model},
            {"cores", fmt::format("{} logical, {} usable by this process", e.host.logical_cores,
                                  e.host.usable_cores)},
            {"memory", gib(e.host.memory_bytes)},
            {"OS", e.host.os},
            {"kernel", e.host.kernel},
            {"architecture", e.host.arch}});
  const LibraryVersions& l = e.libraries;
  kv_table(out, "Libraries",
           {{"CUDA driver", l.cuda_driver},
            {"CUDA runtime", l.cuda_runtime},
            {"cuDNN", l.cudnn},
            {"NCCL", l.nccl},
            {"cuBLAS", l.cublas},
            {"oneDNN", l.onednn},
            {"Gloo", l.gloo},
            {"OpenMP", l.openmp}});
  const BuildInfo& b = e.build;
  kv_table(out, "Build",
           {{"scalescope", b.scalescope_version},
            {"compiler", b.compiler},
            {"build type", b.build_type},
            {"CUDA", b.with_cuda ? "yes" : "no"},
            {"CUDA architectures", b.cuda_architectures},
            {"git commit", b.git_commit},
            {"working tree", b.git_dirty ? "dirty (uncommitted changes)" : "clean"}});
  out += "<div><h3>Environment variables</h3>\n";
  if (e.env_vars.empty()) {
    out += "<p class=\"note\">None of the recorded variables was set.</p>\n";
  } else {
    out += "<table class=\"kv\">\n";
    for (const auto& [k, v] : e.env_vars) {
      fmt::format_to(std::back_inserter(out),
                     "<tr><th><code>{}</code></th><td><code>{}</code>"
                     "</td></tr>\n",
                     escape(k), escape(v));
    }
    out += "</table>\n";
  }
  out += "</div>\n</div>\n<h3>GPUs</h3>\n";
  if (e.gpus.empty()) {
    out += "<p class=\"note\">None" +
           (e.gpu_error.empty() ? std::string(".") : ": " + escape(e.gpu_error)) + "</p>\n";
  } else {
    out +=
        "<table>\n<tr><th class=\"num\">#</th><th>name</th><th class=\"num\">memory</th>"
        "<th class=\"num\">compute capability</th><th class=\"num\">SMs</th><th>PCI bus</th>"
        "<th>UUID</th></tr>\n";
    for (const GpuInfo& g : e.gpus) {
      fmt::format_to(std::back_inserter(out),
                     "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>"
                     "<td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td>"
                     "<td><code>{}</code></td></tr>\n",
                     g.index, escape(g.name), gib(g.memory_bytes), escape(g.compute_capability),
                     g.sm_count, escape(g.pci_bus_id), escape(g.uuid));
    }
    out += "</table>\n";
    if (!e.gpu_error.empty()) out += "<p class=\"note\">" + escape(e.gpu_error) + "</p>\n";
  }
  out += "<h3>Command line</h3>\n<pre data-field=\"command-line\">" + escape(e.command_line) +
         "</pre>\n";
  if (!report.config.is_null() && !report.config.empty()) {
    out += "<details><summary>Sweep options</summary>\n<pre>" +
           escape(report.config.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) +
           "</pre></details>\n";
  }
  out += "</section>\n";
}

}  // namespace

std::string format_sweep_html(const SweepReport& report) {
  const std::vector<ModelView> models = models_of(report);
  size_t failed = 0;
  for (const SweepPoint& p : report.points) failed += p.ok() ? 0 : 1;

  std::string out;
  out.reserve(64 * 1024);
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  std::string model_names;
  for (const ModelView& m : models) model_names += (model_names.empty() ? "" : ", ") + m.name;
  fmt::format_to(std::back_inserter(out), "<title>scalescope sweep: {}</title>\n",
                 escape(model_names.empty() ? std::string("no points") : model_names));
  out += "<style>";
  out += kStyle;
  out +=
      "</style>\n</head>\n<body>\n<header class=\"page\"><div class=\"inner\">\n"
      "<h1>scalescope &middot; scaling sweep</h1>\n<div class=\"meta\">";
  std::vector<std::string> meta;
  if (!report.created.empty()) meta.push_back("started " + escape(report.created));
  if (!report.environment.host.hostname.empty()) {
    meta.push_back("on " + escape(report.environment.host.hostname));
  }
  if (!report.tool_version.empty()) meta.push_back("scalescope " + escape(report.tool_version));
  meta.push_back(
      fmt::format("{} point{}", report.points.size(), report.points.size() == 1 ? "" : "s"));
  meta.push_back(failed == 0 ? std::string("<span class=\"pill ok\">all points ran</span>")
                             : fmt::format("<span class=\"pill bad\">{} failed</span>", failed));
  if (!report.complete) meta.push_back("<span class=\"pill warn\">incomplete sweep</span>");
  for (const std::string& s : meta) out += "<span>" + s + "</span>";
  out += "</div>\n<nav class=\"toc\">";
  for (const ModelView& m : models) {
    fmt::format_to(std::back_inserter(out), "<a href=\"#model-{}\">{}</a>", m.index,
                   escape(m.name));
  }
  out +=
      "<a href=\"#verdicts\">Verdicts</a><a href=\"#failures\">Failed points</a>"
      "<a href=\"#environment\">Environment</a></nav>\n</div></header>\n<main>\n";
  if (models.empty()) {
    out += "<section><p class=\"note\">This report has no points yet.</p></section>\n";
  }
  for (const ModelView& m : models) model_section(out, m);
  verdicts_section(out, report);
  failures_section(out, report);
  environment_section(out, report);
  out += "<footer>Written by scalescope";
  if (!report.tool_version.empty()) out += " " + escape(report.tool_version);
  out += ". Self-contained: open it anywhere, offline.</footer>\n</main>\n</body>\n</html>\n";
  return out;
}

void write_sweep_html(const std::string& path, const SweepReport& report) {
  write_file_atomic(path, format_sweep_html(report));
}

}  // namespace scalescope
