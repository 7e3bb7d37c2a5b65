#include "reports/html/precision_section.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "reports/analysis/precision_analysis.h"
#include "reports/html/phases_chart.h"
#include "reports/html/svg.h"

namespace scalescope::html {
namespace {

using svg::escape;

void comparison_table(std::string& out, const SweepReport& report, const ModelView& m) {
  out +=
      "<div class=\"wide\"><table>\n<tr><th class=\"num\">devices</th><th "
      "class=\"num\">batch</th><th>precision</th><th class=\"num\">samples/s</th><th "
      "class=\"num\">against the default</th><th class=\"num\">exposed all-reduce</th>"
      "<th>bottleneck</th></tr>\n";
  for (int64_t b : m.batches) {
    for (const SweepPoint* p : m.series(b)) {
      if (!p->ok()) continue;
      const SweepPoint* twin = default_precision_twin(report.points, *p);
      const std::string ratio =
          twin != nullptr && twin->ok() && twin->summary.throughput.value > 0.0
              ? fmt::format("{:.2f}&times;",
                            p->summary.throughput.value / twin->summary.throughput.value)
              : "&ndash;";
      fmt::format_to(std::back_inserter(out),
                     "<tr data-precision=\"{}\"><td class=\"num\">{}:{}</td><td "
                     "class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td "
                     "class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                     to_string(p->precision), escape(p->device_kind), p->devices, batch_key(*p),
                     to_string(p->precision), short_number(p->summary.throughput.value), ratio,
                     percent(exposed_allreduce_share(*p)), escape(p->summary.verdict.top().kind));
    }
  }
  out += "</table></div>\n";
}

}  // namespace

std::vector<ModelView> precision_views(const SweepReport& report, int first_index) {
  std::vector<ModelView> out;
  for (const SweepPoint& p : report.points) {
    if (std::any_of(out.begin(), out.end(), [&](const ModelView& m) { return m.model == p.model; }))
      continue;
    ModelView m;
    m.model = p.model;
    m.name = p.model + ": precisions compared";
    m.mode = p.mode;
    m.device_kind = p.device_kind;
    std::set<Precision> precisions;
    std::set<int> devices;
    std::set<int64_t> batches;
    for (const SweepPoint& q : report.points) {
      if (q.model != p.model || (q.devices > 1 && (q.compressed() || !q.default_buckets())))
        continue;
      m.points.push_back(&q);
      m.all_points.push_back(&q);
      precisions.insert(q.precision);
      devices.insert(q.devices);
      batches.insert(batch_key(q));
    }
    if (precisions.size() < 2) continue;
    m.devices.assign(devices.begin(), devices.end());
    m.batches.assign(batches.begin(), batches.end());
    m.index = first_index + static_cast<int>(out.size());
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> precision_conclusions(const SweepReport& report, const ModelView& m) {
  std::vector<std::string> out;
  for (const PrecisionShift& s : communication_bound_by_precision(report.points)) {
    if (s.point->model != m.model) continue;
    out.push_back(fmt::format(
        "In {}, {} turns communication-bound: the exposed all-reduce is {} of its step, "
        "against {} in {} ({:.2f}x the throughput).",
        to_string(s.point->precision), m.point_text(*s.point), percent(s.exposed_share),
        percent(s.reference_exposed_share), to_string(s.reference->precision), s.throughput_ratio));
  }
  return out;
}

void precision_section(std::string& out, const SweepReport& report, const ModelView& m) {
  fmt::format_to(std::back_inserter(out),
                 "<section id=\"model-{}\" data-precisions=\"{}\">\n<h2><code>{}</code></h2>\n",
                 m.index, escape(m.model), escape(m.name));
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Where the step goes in each precision <span "
                 "class=\"hint\">(median phases of the slowest replica)</span></figcaption>\n"
                 "{}\n</figure>\n",
                 draw_phases(prepare_phases(m)));
  for (const std::string& c : precision_conclusions(report, m)) {
    fmt::format_to(std::back_inserter(out), "<p class=\"note\" data-precision-verdict>{}</p>\n",
                   escape(c));
  }
  comparison_table(out, report, m);
  out += "</section>\n";
}

}  // namespace scalescope::html
