#include "reports/html/heatmap_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "reports/html/svg.h"

namespace scalescope::html {

HeatmapData prepare_heatmap(const ModelView& m) {
  HeatmapData d;
  d.model = m.name;
  d.device_kind = m.device_kind;
  d.devices = m.devices;
  for (int64_t b : m.batches) {
    d.batches.push_back(m.batch_text(b));
    std::vector<HeatmapData::Cell>& row = d.cells.emplace_back();
    for (int devices : m.devices) {
      HeatmapData::Cell& c = row.emplace_back();
      const SweepPoint* p = m.at(devices, b);
      if (p == nullptr) continue;
      c.label = p->label();
      if (!p->ok()) {
        c.state = HeatmapData::Cell::State::kFailed;
        c.error = p->error;
      } else if (!p->summary.efficiency) {
        c.state = HeatmapData::Cell::State::kUnknown;
      } else {
        c.state = HeatmapData::Cell::State::kOk;
        c.efficiency = *p->summary.efficiency;
        if (p->summary.speedup) c.speedup = p->summary.speedup->value;
      }
    }
  }
  return d;
}

// Every cell carries its number too, so the hue is a reading aid, not the only channel.
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

namespace {

constexpr double kCellWidth = 84;
constexpr double kCellHeight = 44;

// What a cell shows: its fill, its text and colour, and its tooltip.
struct CellLook {
  const char* state;
  std::string fill = "#eef0f2";
  std::string text_color = "#5f6b76";
  std::string main_text;
  std::string sub_text;
  std::string tooltip;
};

CellLook look_of(const HeatmapData::Cell& c) {
  using State = HeatmapData::Cell::State;
  if (c.state == State::kFailed) {
    return {"failed", "#eef0f2", "#b42318",
            "failed", "",        fmt::format("{} failed: {}", c.label, c.error)};
  }
  if (c.state == State::kUnknown) {
    return {"unknown",     "#eef0f2",
            "#5f6b76",     "n/a",
            "no baseline", fmt::format("{}: no one-device point to compare with", c.label)};
  }
  const Interval& e = c.efficiency;
  return {"ok",
          efficiency_color(e.value),
          e.value < 0.2 ? "#ffffff" : kInkColor,
          percent(e.value, 0),
          c.speedup ? fmt::format("\u00d7{:.2f}", *c.speedup) : "",
          fmt::format("{}: efficiency {} [{}, {}], speedup {}", c.label, percent(e.value),
                      percent(e.low), percent(e.high),
                      c.speedup ? fmt::format("{:.2f}", *c.speedup) : std::string("-"))};
}

void draw_cell(svg::Document& doc, const HeatmapData::Cell& c, double x0, double y0) {
  if (c.state == HeatmapData::Cell::State::kMissing) {
    // Not in the grid (e.g. a sweep stopped early): an empty slot, not a point.
    doc.rect(x0 + 1, y0 + 1, kCellWidth - 2, kCellHeight - 2,
             {{"fill", "#fafafa"}, {"stroke", "#e3e5e8"}, {"stroke-dasharray", "3 3"}});
    return;
  }
  const CellLook look = look_of(c);
  const double cx = x0 + kCellWidth / 2;
  const double cy = y0 + kCellHeight / 2;
  doc.open_group({{"data-cell", c.label}, {"data-state", look.state}}, look.tooltip);
  doc.rect(x0 + 1, y0 + 1, kCellWidth - 2, kCellHeight - 2, {{"fill", look.fill}, {"rx", "3"}});
  doc.text(cx, look.sub_text.empty() ? cy + 5 : cy + 1, look.main_text,
           {{"text-anchor", "middle"},
            {"fill", look.text_color},
            {"font-size", "14"},
            {"font-weight", "700"}});
  if (!look.sub_text.empty()) {
    doc.text(cx, cy + 15, look.sub_text,
             {{"text-anchor", "middle"}, {"fill", look.text_color}, {"font-size", "10.5"}});
  }
  doc.close_group();
}

// Eleven steps from 0% to 100%, under the grid.
void draw_scale(svg::Document& doc, double x, double y) {
  const double sw = 18;
  doc.text(x, y - 6, "efficiency", {{"class", "svg-tick"}});
  for (int i = 0; i <= 10; ++i) {
    doc.rect(x + sw * i, y, sw, 10, {{"fill", efficiency_color(i / 10.0)}});
  }
  doc.text(x, y + 24, "0%", {{"class", "svg-tick"}, {"text-anchor", "start"}});
  doc.text(x + sw * 11, y + 24, "\u2265100%", {{"class", "svg-tick"}, {"text-anchor", "end"}});
}

}  // namespace

std::string draw_heatmap(const HeatmapData& d) {
  double label_w = 0;
  for (const std::string& b : d.batches) label_w = std::max(label_w, svg::text_width(b, 12));
  const double left = std::max(96.0, label_w + 22);
  const double top = 50;
  const double grid_w = kCellWidth * static_cast<double>(d.devices.size());
  const double grid_h = kCellHeight * static_cast<double>(d.batches.size());
  const double width = std::max(400.0, left + grid_w + 24);
  const double height = top + grid_h + 62;
  svg::Document doc(width, height, "efficiency-heatmap",
                    fmt::format("{}: efficiency by devices and batch", d.model),
                    {{"data-model", d.model}});
  doc.text(left + grid_w / 2, 18, fmt::format("devices ({})", d.device_kind),
           {{"class", "svg-label"}, {"text-anchor", "middle"}});
  for (size_t c = 0; c < d.devices.size(); ++c) {
    doc.text(left + kCellWidth * (static_cast<double>(c) + 0.5), top - 10,
             std::to_string(d.devices[c]),
             {{"class", "svg-tick"}, {"text-anchor", "middle"}, {"font-weight", "600"}});
  }
  for (size_t r = 0; r < d.batches.size(); ++r) {
    const double y0 = top + kCellHeight * static_cast<double>(r);
    doc.text(left - 10, y0 + kCellHeight / 2 + 4, d.batches[r],
             {{"class", "svg-label"}, {"text-anchor", "end"}});
    for (size_t c = 0; c < d.devices.size(); ++c) {
      draw_cell(doc, d.cells[r][c], left + kCellWidth * static_cast<double>(c), y0);
    }
  }
  draw_scale(doc, left, top + grid_h + 24);
  return std::move(doc).finish();
}

}  // namespace scalescope::html
