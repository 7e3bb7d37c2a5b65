#include "reports/html/target_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "reports/html/svg.h"

namespace scalescope::html {
namespace {

std::string times(double ratio) {
  return fmt::format("{:.2f}x", ratio);
}

// Medians of an even number of repeats may fall between two steps: "60", "60.5".
std::string steps_text(double steps) {
  return steps == std::floor(steps) ? fmt::format("{:.0f}", steps) : fmt::format("{:.1f}", steps);
}

// Why a multi-device point that reached the target every time has no speedup: the speedup
// needs the one-device point of its batch to have reached it every time too.
std::string missing_baseline(const ModelView& m, const SweepPoint& p) {
  const SweepPoint* one = m.at(1, batch_key(p));
  if (one == nullptr || !one->ok() || !one->summary.time_to_target) {
    return "no one-device point of this batch with a target to compare with";
  }
  const TimeToTarget& t = *one->summary.time_to_target;
  return fmt::format("no speedup: the one-device point reached the target in only {} of {} runs",
                     t.reached, t.repeats);
}

// "cpu:4, batch 32/device: accuracy 0.75 reached in 3/3 runs after 60 steps (0.38 epochs),
// 0.81 s of training; time-to-target speedup 0.93x against one device = 1.40x hardware × 67%
// statistical (the noise scale predicted 66%)."
std::string sentence_of(const ModelView& m, const SweepPoint& p, const TargetChartData::Point& q,
                        const std::string& target) {
  const TimeToTarget& t = q.time;
  const std::string after = fmt::format("after {} steps ({:.2f} epochs), {:.2f} s of training",
                                        steps_text(t.steps), t.epochs, t.train_s);
  std::string s = q.label + ": ";
  if (t.reached == 0) {
    s += fmt::format("none of {} runs reached {}", t.repeats, target);
  } else if (t.reached < t.repeats) {
    s += fmt::format(
        "{} of {} runs reached {}, {} ({})", t.reached, t.repeats, target, after,
        t.reached == 1 ? std::string("that run") : fmt::format("medians of those {}", t.reached));
  } else {
    s += fmt::format("{} reached in {}/{} runs {}", target, t.reached, t.repeats, after);
  }
  if (q.devices == 1) return s + "; the baseline of the speedups.";
  if (!t.all_reached()) return s + "; no speedup: every run has to reach the target.";
  if (!t.speedup) return s + "; " + missing_baseline(m, p) + ".";
  s += fmt::format(
      "; time-to-target speedup {} against one device = {} hardware \u00d7 {} statistical",
      times(*t.speedup), times(*t.hardware), percent(*t.statistical, 0));
  if (t.predicted_statistical) {
    s += fmt::format(" (the noise scale predicted {})", percent(*t.predicted_statistical, 0));
  }
  return s + ".";
}

TargetChartData::Point point_of(const ModelView& m, const SweepPoint& p,
                                const std::string& target) {
  const TimeToTarget& t = *p.summary.time_to_target;
  TargetChartData::Point out;
  out.label = m.point_text(p);
  out.tick = fmt::format("{}:{}", p.device_kind, p.devices);
  if (m.batches.size() > 1) out.tick += fmt::format(", batch {}", batch_key(p));
  out.devices = p.devices;
  out.time = t;
  if (t.hardware && t.predicted_statistical) {
    out.predicted_speedup = *t.hardware * *t.predicted_statistical;
  }
  out.sentence = sentence_of(m, p, out, target);
  return out;
}

// A round top for the y axis, above `v`, in steps of the scale's own ticks.
double round_top(double v) {
  const std::vector<double> ticks = svg::LinearScale(0, v, 1, 0).ticks(5);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : v;
  return std::ceil(v / step - 1e-9) * step;
}

}  // namespace

bool has_target(const ModelView& m) {
  return std::any_of(m.points.begin(), m.points.end(),
                     [](const SweepPoint* p) { return p->ok() && p->summary.time_to_target; });
}

TargetChartData prepare_target(const ModelView& m) {
  TargetChartData d;
  d.model = m.name;
  double y_max = 1;
  for (int64_t b : m.batches) {
    for (const SweepPoint* p : m.series(b)) {
      if (!p->ok() || !p->summary.time_to_target) continue;
      const TimeToTarget& t = *p->summary.time_to_target;
      if (d.target.empty()) d.target = fmt::format("{} {:.4g}", t.metric, t.value);
      d.points.push_back(point_of(m, *p, d.target));
      const TargetChartData::Point& q = d.points.back();
      if (q.devices == 1) continue;
      d.drawn.push_back(d.points.size() - 1);
      d.any_predicted = d.any_predicted || q.predicted_speedup.has_value();
      y_max = std::max({y_max, static_cast<double>(q.devices), q.time.hardware.value_or(0),
                        q.time.speedup.value_or(0), q.predicted_speedup.value_or(0)});
    }
  }
  d.y_hi = round_top(y_max * 1.05);
  return d;
}

namespace {

constexpr double kBarWidth = 30;
constexpr double kBarGap = 4;
constexpr double kGroupPad = 28;
// The two bars: the hardware speedup light, the speedup in time to the target (what a user
// waits for) in the page's accent; the ring that predicts the latter in a contrasting orange.
constexpr const char* kHardwareColor = "#9ecae1";
constexpr const char* kTargetColor = "#1f4e79";
constexpr const char* kPredictedColor = "#e69f00";

using Frame = svg::Frame<svg::NoScale, svg::LinearScale>;

double group_width(const TargetChartData::Point& p) {
  return std::max(2 * kBarWidth + kBarGap, svg::text_width(p.tick)) + kGroupPad;
}

void bar(svg::Document& doc, const Frame& f, double x, double value, const char* kind,
         const char* color, const std::string& tooltip) {
  const double top = f.y(std::max(value, 0.0));
  doc.rect(
      x, top, kBarWidth, f.bottom - top,
      {{"fill", color}, {"data-target-bar", kind}, {"data-value", fmt::format("{:.4f}", value)}},
      tooltip);
  doc.text(x + kBarWidth / 2, top - 5, times(value),
           {{"class", "svg-value"}, {"text-anchor", "middle"}});
}

// One point's group centred at `cx`: its bars, the ideal over them and the predicted ring.
void draw_group(svg::Document& doc, const Frame& f, const TargetChartData::Point& p, double cx) {
  const TimeToTarget& t = p.time;
  svg::Attrs attrs = {{"data-target-point", p.label}, {"data-devices", std::to_string(p.devices)}};
  if (t.speedup) {
    attrs.push_back({"data-speedup", fmt::format("{:.4f}", *t.speedup)});
    attrs.push_back({"data-hardware", fmt::format("{:.4f}", *t.hardware)});
    attrs.push_back({"data-statistical", fmt::format("{:.4f}", *t.statistical)});
  }
  doc.open_group(attrs, p.sentence);
  const double x0 = cx - kBarWidth - kBarGap / 2;
  const double x1 = cx + kBarGap / 2;
  const double ideal = f.y(p.devices);
  doc.line(x0 - 6, ideal, x1 + kBarWidth + 6, ideal,
           {{"stroke", kIdealColor},
            {"stroke-width", "1.5"},
            {"stroke-dasharray", "5 4"},
            {"data-ideal", std::to_string(p.devices)}});
  if (!t.speedup) {
    doc.text(cx, f.bottom - 6, "n/a",
             {{"class", "svg-note"}, {"text-anchor", "middle"}, {"data-missing", p.label}});
    doc.close_group();
    return;
  }
  bar(doc, f, x0, *t.hardware, "hardware", kHardwareColor,
      fmt::format("{}: hardware speedup {} (throughput against one device)", p.label,
                  times(*t.hardware)));
  bar(doc, f, x1, *t.speedup, "time-to-target", kTargetColor,
      fmt::format("{}: time-to-target speedup {} = {} hardware \u00d7 {} statistical", p.label,
                  times(*t.speedup), times(*t.hardware), percent(*t.statistical, 0)));
  if (p.predicted_speedup) {
    doc.circle(
        x1 + kBarWidth / 2, f.y(*p.predicted_speedup), 5,
        {{"fill", "none"},
         {"stroke", kPredictedColor},
         {"stroke-width", "2.5"},
         {"data-predicted-speedup", fmt::format("{:.4f}", *p.predicted_speedup)}},
        fmt::format("{}: the noise scale predicted {} statistical, so {} in time to the "
                    "target",
                    p.label, percent(*t.predicted_statistical, 0), times(*p.predicted_speedup)));
  }
  doc.close_group();
}

// A legend swatch is a square or a line, so the ring is explained by a note of its own under
// the plot, drawn as on the chart.
void ring_note(svg::Document& doc, double x, double y) {
  doc.circle(x + 5, y - 4, 5,
             {{"fill", "none"}, {"stroke", kPredictedColor}, {"stroke-width", "2.5"}});
  doc.text(x + 16, y, "predicted by the noise scale: hardware \u00d7 predicted statistical",
           {{"class", "svg-note"}, {"data-ring-note", "true"}});
}

}  // namespace

std::string draw_target(const TargetChartData& d) {
  const std::vector<svg::LegendItem> legend = {
      {"hardware (throughput)", kHardwareColor},
      {"time to target = hardware \u00d7 statistical", kTargetColor},
      {"ideal (N devices)", kIdealColor, true, true, false, false}};
  double plot_w = 0;
  for (size_t i : d.drawn) plot_w += group_width(d.points[i]);
  // Room above the bars for their values; the ring's note under the axis.
  const svg::FigureBox box = svg::figure_box(legend, {.plot_height = 220,
                                                      .note_lines = d.any_predicted ? 1u : 0u,
                                                      .plot_width = plot_w,
                                                      .headroom = 14});
  svg::Document doc =
      svg::figure(box, legend, "time-to-target",
                  fmt::format("{}: time to {}, speedup against one device", d.model, d.target),
                  {{"data-model", d.model}});
  const Frame f(box, {}, {0, d.y_hi});
  const double left = f.left, right = f.right, top = f.top, bottom = f.bottom;
  std::vector<svg::Tick> y_ticks;
  for (double v : f.y.ticks(6)) y_ticks.push_back({f.y(v), tick_label(v) + "x"});
  svg::y_axis(doc, y_ticks, left, bottom, top, right, "speedup against one device");
  // The groups side by side, centred in the plot.
  double x = left + (right - left - plot_w) / 2;
  std::vector<svg::Tick> x_ticks;
  for (size_t i : d.drawn) {
    const double w = group_width(d.points[i]);
    draw_group(doc, f, d.points[i], x + w / 2);
    x_ticks.push_back({x + w / 2, d.points[i].tick});
    x += w;
  }
  svg::x_axis(doc, x_ticks, bottom, left, right, bottom, "devices");
  if (d.any_predicted) ring_note(doc, left, bottom + 56);
  if (d.drawn.empty()) {
    doc.text((left + right) / 2, (top + bottom) / 2, "no point on more than one device",
             {{"class", "svg-note"}, {"text-anchor", "middle"}});
  }
  return std::move(doc).finish();
}

}  // namespace scalescope::html
