#include "reports/html/waterfall_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "reports/html/svg.h"
#include "reports/phases.h"

namespace scalescope::html {
namespace {

// A share within measurement noise: light enough to read as no finding beside the phases'
// colours.
constexpr const char* kNoiseColor = "#d5d9de";

// A bar whose share is no loss beyond measurement noise is grey and says so under its label.
void mark_noise(WaterfallData::Loss& loss, const LossComponent& c) {
  if (c.interval) {
    loss.interval = fmt::format("95% interval of the share {} to {}", percent(c.interval->low),
                                percent(c.interval->high));
  }
  loss.noise = !c.beyond_noise();
  if (loss.noise) loss.noise_label = c.within_noise() ? "within noise" : "no loss";
}

WaterfallData waterfall_of(const ModelView& m, const SweepPoint& p) {
  const LossBreakdown& l = *p.summary.loss;
  WaterfallData d;
  d.model = m.name;
  d.device_kind = p.device_kind;
  d.devices = p.devices;
  d.batch = batch_key(p);
  d.batch_text = m.batch_text(d.batch);
  d.efficiency = l.efficiency;
  d.lost = l.lost;
  for (const LossComponent& c : loss_components(l)) {
    WaterfallData::Loss loss;
    loss.key = c.def->key;
    loss.line1 = c.def->label;
    loss.share = c.share;
    loss.color = hex(c.def->color);
    mark_noise(loss, c);
    d.losses.push_back(std::move(loss));
  }
  if (const std::optional<double> intra = p.summary.intra_node_fraction) {
    // Across nodes, the all-reduce bar splits as the table and the JSON split it.
    WaterfallData::Loss& whole = d.losses[index_of(LossCause::kAllReduce)];
    WaterfallData::Loss inter = whole;
    whole.key += "_intra";
    whole.line2 = "intra-node";
    whole.share *= *intra;
    inter.key += "_inter";
    inter.line2 = "inter-node";
    inter.share -= whole.share;
    inter.color = "#8c2d04";
    d.losses.insert(d.losses.begin() + index_of(LossCause::kAllReduce) + 1, std::move(inter));
  }
  double lo = std::min(0.0, l.efficiency);
  double hi = std::max(1.0, l.efficiency);
  double level = 1;
  for (WaterfallData::Loss& loss : d.losses) {
    loss.from = level;
    level -= loss.share;
    loss.to = level;
    lo = std::min(lo, level);
    hi = std::max(hi, level);
  }
  d.tick = hi - lo > 1.5 ? 0.5 : 0.2;
  // A bar may overrun the last gridline by 1% (into the margin) rather than add a gridline
  // of empty space: losses slightly negative leave the level just above 100%.
  d.lo = std::floor(lo / d.tick + 0.05) * d.tick;
  d.hi = std::ceil(hi / d.tick - 0.05) * d.tick;
  return d;
}

}  // namespace

WaterfallsData prepare_waterfalls(const ModelView& m) {
  WaterfallsData out;
  for (int64_t b : m.batches) {
    const SweepPoint* largest = nullptr;
    for (const SweepPoint* p : m.series(b)) {
      if (p->ok() && p->summary.loss) largest = p;
    }
    if (largest == nullptr) {
      out.missing.push_back(m.batch_text(b));
    } else {
      out.charts.push_back(waterfall_of(m, *largest));
    }
  }
  return out;
}

namespace {

// Slots: ideal, the losses (five, six with the all-reduce split by node), measured.
struct Bars {
  svg::Document& doc;
  const svg::LinearScale& y;
  double left, bottom, slot, width;

  void bar(int i, const std::string& key, double from, double to, const std::string& color,
           const std::string& value, const std::string& line1, const std::string& line2,
           const std::string& tooltip, bool noise = false) const {
    const double cx = left + slot * (i + 0.5);
    const double y_top = y(std::max(from, to));
    svg::Attrs attributes = {{"fill", color}, {"data-step", key}};
    if (noise) attributes.push_back({"data-noise", "true"});
    doc.rect(cx - width / 2, y_top, width, std::max(1.0, std::abs(y(from) - y(to))), attributes,
             tooltip);
    doc.text(cx, y_top - 5, value, {{"class", "svg-value"}, {"text-anchor", "middle"}});
    doc.text(cx, bottom + 16, line1, {{"class", "svg-tick"}, {"text-anchor", "middle"}});
    if (!line2.empty()) {
      doc.text(cx, bottom + 29, line2, {{"class", "svg-tick"}, {"text-anchor", "middle"}});
    }
  }
  // From the top of bar i to bar i + 1, at `level`.
  void connector(int i, double level) const {
    doc.line(left + slot * (i + 0.5) + width / 2, y(level), left + slot * (i + 1.5) - width / 2,
             y(level), {{"stroke", "#9aa0a6"}, {"stroke-width", "1"}});
  }
};

}  // namespace

std::string draw_waterfall(const WaterfallData& d) {
  const double width = 520;
  const double left = 60;
  const double right = width - 14;
  const double top = 26;
  const double bottom = top + 200;
  svg::Document doc(width, bottom + 46, "waterfall",
                    fmt::format("{}: efficiency lost at {}:{}, {}", d.model, d.device_kind,
                                d.devices, d.batch_text),
                    {{"data-model", d.model},
                     {"data-batch", std::to_string(d.batch)},
                     {"data-devices", std::to_string(d.devices)}});
  const svg::LinearScale y(d.lo, d.hi, bottom, top);
  std::vector<svg::Tick> ticks;
  for (double v = d.lo; v <= d.hi + d.tick / 2; v += d.tick) {
    ticks.push_back({y(v), percent(std::abs(v) < d.tick / 2 ? 0.0 : v, 0)});
  }
  svg::y_axis(doc, ticks, left, bottom, top, right, "efficiency");
  if (d.lo < 0) doc.line(left, y(0), right, y(0), {{"class", "svg-axis"}});

  const double slot = (right - left) / static_cast<double>(d.losses.size() + 2);
  const Bars bars{doc, y, left, bottom, slot, slot * 0.62};
  bars.bar(0, "ideal", 0, 1, "#52606d", "100%", "ideal", "",
           fmt::format("ideal: each of the {} devices as fast as one device alone", d.devices));
  for (size_t i = 0; i < d.losses.size(); ++i) {
    const WaterfallData::Loss& s = d.losses[i];
    bars.connector(static_cast<int>(i), s.from);
    const std::string what = fmt::format(
        "{}{}{}: {} of the step at {} devices", s.line1, s.line2.empty() ? "" : " ", s.line2,
        s.share >= 0 ? "lost " + percent(s.share) : "gained " + percent(-s.share), d.devices);
    const std::string interval = s.interval.empty() ? "" : " (" + s.interval + ")";
    const std::string why =
        s.noise ? fmt::format("; {}, no finding{}",
                              s.noise_label == "no loss" ? "below 0" : "within measurement noise",
                              interval)
                : interval;
    bars.bar(static_cast<int>(i) + 1, s.key, s.from, s.to, s.noise ? kNoiseColor : s.color,
             signed_loss(s.share), s.line1,
             s.noise ? (s.line2.empty() ? s.noise_label : s.line2 + ", " + s.noise_label) : s.line2,
             what + why, s.noise);
  }
  const int last = static_cast<int>(d.losses.size()) + 1;
  bars.connector(last - 1, d.losses.empty() ? 1.0 : d.losses.back().to);
  bars.bar(last, "measured", 0, d.efficiency, kInkColor, percent(d.efficiency), "measured", "",
           fmt::format("measured efficiency {} ({} lost)", percent(d.efficiency), percent(d.lost)));
  return std::move(doc).finish();
}

}  // namespace scalescope::html
