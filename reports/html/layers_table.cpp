#include "reports/html/layers_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "reports/html/svg.h"

namespace scalescope::html {
namespace {

using svg::escape;

std::vector<const SweepPoint*> profiled_points(const ModelView& m) {
  std::vector<const SweepPoint*> points;
  for (const SweepPoint* p : m.points) {
    if (p->ok() && !p->layer_profile.empty()) points.push_back(p);
  }
  return points;
}

// The rest row: every layer not among the rows, per column.
LayersTableData::Row rest_row(const std::vector<const SweepPoint*>& points,
                              const std::vector<double>& column_ms,
                              const std::vector<LayersTableData::Row>& shown) {
  LayersTableData::Row rest{"rest", "", {}};
  for (size_t c = 0; c < points.size(); ++c) {
    double ms = column_ms[c];
    for (const LayersTableData::Row& r : shown) ms -= r.cells[c] ? r.cells[c]->ms : 0.0;
    ms = std::max(ms, 0.0);  // not below zero by rounding
    rest.cells.push_back(LayersTableData::Cell{ms, column_ms[c] > 0 ? ms / column_ms[c] : 0.0});
  }
  return rest;
}

std::string rate_attributes(const LayersTableData::Cell& cell) {
  std::string out;
  if (cell.gflop_per_s) out += fmt::format(" data-gflops=\"{:.1f}\"", *cell.gflop_per_s);
  if (cell.gb_per_s) out += fmt::format(" data-gbps=\"{:.1f}\"", *cell.gb_per_s);
  return out;
}

// What bounds the layer's forward, as a rate: GB/s where memory-bound, else GFLOP/s.
std::string rate_text(const LayersTableData::Cell& cell) {
  if (cell.gb_per_s) return fmt::format(" &middot; {} GB/s", short_number(*cell.gb_per_s));
  if (cell.gflop_per_s) return fmt::format(" &middot; {} GFLOP/s", short_number(*cell.gflop_per_s));
  return "";
}

}  // namespace

LayersTableData prepare_layers(const ModelView& m, size_t top) {
  LayersTableData d;
  const std::vector<const SweepPoint*> points = profiled_points(m);
  std::map<int, double> summed;  // layer → ms over the points
  std::map<int, std::string> names;
  for (const SweepPoint* p : points) {
    d.columns.push_back(m.point_text(*p));
    double all = 0.0;
    for (const LayerTimeRecord& l : p->layer_profile) {
      all += l.total_ms();
      summed[l.layer] += l.total_ms();
      names.emplace(l.layer, l.layer_name);
    }
    d.column_ms.push_back(all);
  }
  std::vector<int> order;
  for (const auto& [layer, ms] : summed) order.push_back(layer);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return summed[a] > summed[b]; });
  order.resize(std::min(order.size(), top));
  for (int layer : order) {
    LayersTableData::Row row{std::to_string(layer), names[layer], {}};
    for (size_t c = 0; c < points.size(); ++c) {
      const auto& profile = points[c]->layer_profile;
      const auto it = std::find_if(profile.begin(), profile.end(),
                                   [&](const LayerTimeRecord& l) { return l.layer == layer; });
      if (it == profile.end()) {
        row.cells.emplace_back();
        continue;
      }
      const double all = d.column_ms[c];
      row.cells.push_back(LayersTableData::Cell{it->total_ms(), all > 0 ? it->total_ms() / all : 0,
                                                it->forward_gflop_per_s(), it->forward_gb_per_s()});
    }
    d.rows.push_back(std::move(row));
  }
  if (summed.size() > d.rows.size()) {
    const size_t others = summed.size() - d.rows.size();
    d.rows.push_back(rest_row(points, d.column_ms, d.rows));
    d.rows.back().name = fmt::format("{} other layer{}", others, others == 1 ? "" : "s");
  }
  return d;
}

std::string draw_layers_table(const LayersTableData& d) {
  if (d.columns.empty()) return "";
  std::string out =
      "<div class=\"wide\"><table data-layers>\n<tr><th class=\"num\">layer</th>"
      "<th>name</th>";
  for (const std::string& c : d.columns) {
    fmt::format_to(std::back_inserter(out), "<th class=\"num\">{}</th>", escape(c));
  }
  out += "</tr>\n";
  for (const LayersTableData::Row& r : d.rows) {
    fmt::format_to(std::back_inserter(out),
                   "<tr data-layer=\"{}\"><td class=\"num\">{}</td><td>{}</td>", escape(r.layer),
                   r.layer == "rest" ? "" : escape(r.layer), escape(r.name));
    for (size_t c = 0; c < r.cells.size(); ++c) {
      if (!r.cells[c]) {
        fmt::format_to(std::back_inserter(out), "<td class=\"num\" data-point=\"{}\">&ndash;</td>",
                       escape(d.columns[c]));
        continue;
      }
      const LayersTableData::Cell& cell = *r.cells[c];
      fmt::format_to(
          std::back_inserter(out),
          "<td class=\"num\" data-point=\"{}\" data-ms=\"{:.4f}\" data-share=\"{:.4f}\"{}>"
          "{} <span class=\"note\">{}{}</span></td>",
          escape(d.columns[c]), cell.ms, cell.share, rate_attributes(cell), short_number(cell.ms),
          percent(cell.share), rate_text(cell));
    }
    out += "</tr>\n";
  }
  out += "<tr><td></td><td>all layers</td>";
  for (double ms : d.column_ms) {
    fmt::format_to(std::back_inserter(out), "<td class=\"num\">{}</td>", short_number(ms));
  }
  out += "</tr>\n</table></div>\n";
  return out;
}

}  // namespace scalescope::html
