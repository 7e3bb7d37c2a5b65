#include <fmt/format.h>

#include <iterator>

#include "core/fs.h"
#include "reports/html/page.h"
#include "reports/html/phases_chart.h"
#include "reports/html/svg.h"
#include "reports/html/view.h"
#include "reports/html/waterfall_chart.h"
#include "reports/trace_analysis/analysis_output.h"

namespace scalescope::traces {
namespace {

using svg::escape;

void breakdown_cells(std::string& out, const StepBreakdown& s) {
  for (double v : {s.step_ms, s.compute_ms(), s.communication_ms, s.communication_exposed_ms,
                   s.h2d_exposed_ms + s.copy_exposed_ms, s.input_ms, s.idle_ms}) {
    fmt::format_to(std::back_inserter(out), "<td class=\"num\">{:.2f}</td>", v);
  }
}

constexpr const char* kBreakdownHeader =
    "<th class=\"num\">step ms</th><th class=\"num\">compute</th><th class=\"num\">"
    "communication</th><th class=\"num\">exposed</th><th class=\"num\">copies exposed</th><th "
    "class=\"num\">input</th><th class=\"num\">idle</th>";

void ranks_section(std::string& out, const AnalysisReport& r) {
  out += "<section data-section=\"ranks\"><h2>Ranks</h2>\n";
  fmt::format_to(std::back_inserter(out),
                 "<div class=\"note\">Medians over the {} steps every rank has, ms. Exposed: "
                 "communication while no compute ran.</div>\n<div class=\"wide\"><table><tr><th>"
                 "rank</th><th>trace</th>{}</tr>\n",
                 r.job.common_steps().size(), kBreakdownHeader);
  for (size_t i = 0; i < r.job.ranks.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "<tr data-rank=\"{}\"><td>{}</td><td>{} ({})</td>",
                   r.job.ranks[i].rank, r.job.ranks[i].rank, escape(r.job.ranks[i].file),
                   to_string(r.job.ranks[i].format));
    breakdown_cells(out, r.spread.medians[i]);
    out += "</tr>\n";
  }
  out += "</table></div>\n";
  if (r.job.ranks.size() > 1) {
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\">Slowest rank {}: compute {:+.2f} ms over the median "
                   "rank's ({:.2f}&times;); step times across ranks differ by {:.2f} ms.</p>\n",
                   r.spread.slowest_rank, r.spread.compute_skew_ms, r.spread.compute_skew_ratio,
                   r.spread.step_spread_ms);
  }
  out += "</section>\n";
}

void steps_section(std::string& out, const AnalysisReport& r) {
  fmt::format_to(std::back_inserter(out),
                 "<section data-section=\"steps\"><h2>Steps</h2>\n<div class=\"wide\"><table>"
                 "<tr><th>step</th><th>rank</th>{}</tr>\n",
                 kBreakdownHeader);
  for (const RankSteps& rank : r.job.ranks) {
    for (const StepBreakdown& s : rank.steps) {
      fmt::format_to(std::back_inserter(out), "<tr><td>{}</td><td>{}</td>", s.step, rank.rank);
      breakdown_cells(out, s);
      out += "</tr>\n";
    }
  }
  out += "</table></div></section>\n";
}

void charts_section(std::string& out, const AnalysisReport& r) {
  const std::vector<html::ModelView> models = html::models_of(r.sweep);
  out += "<section data-section=\"charts\"><h2>Where the step goes</h2><div class=\"charts\">\n";
  for (const html::ModelView& m : models) {
    fmt::format_to(std::back_inserter(out),
                   "<figure><figcaption>Phases of the slowest rank (medians; other = step "
                   "&minus; the phases)</figcaption>\n{}\n</figure>\n",
                   html::draw_phases(html::prepare_phases(m)));
    for (const html::WaterfallData& d : html::prepare_waterfalls(m).charts) {
      fmt::format_to(std::back_inserter(out),
                     "<figure><figcaption>Efficiency lost at {} ranks against the "
                     "baseline</figcaption>\n{}\n</figure>\n",
                     d.devices, html::draw_waterfall(d));
    }
  }
  out += "</div>\n";
  if (!r.baseline) {
    out +=
        "<p class=\"note\">No efficiency-loss waterfall: it needs a one-rank trace of the same "
        "job (--baseline).</p>\n";
  }
  out += "</section>\n";
}

void verdict_section(std::string& out, const AnalysisReport& r) {
  out += "<section data-section=\"verdict\"><h2>Verdict</h2><ul>\n";
  for (const Finding& f : r.job_point().summary.verdict.findings) {
    fmt::format_to(std::back_inserter(out), "<li data-finding=\"{}\"><b>{}</b> ({}): {}</li>\n",
                   escape(f.kind), escape(f.kind), escape(f.severity), escape(f.explanation));
  }
  out += "</ul></section>\n";
}

}  // namespace

std::string format_analysis_html(const AnalysisReport& r) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>scalescope "
      "analyze: {}</title>\n<style>{}</style>\n</head>\n<body>\n<header class=\"page\"><div "
      "class=\"inner\"><h1>{}</h1><div class=\"meta\"><span>{} rank{}</span><span>{} "
      "timelines</span><span>{}</span>{}</div></div></header>\n<main>\n",
      escape(r.name), html_page_style(), escape(r.name), r.job.ranks.size(),
      r.job.ranks.size() == 1 ? "" : "s", r.job.device() ? "device" : "host",
      r.baseline ? "baseline: one rank" : "no baseline",
      r.created.empty() ? "" : "<span>" + escape(r.created) + "</span>");
  ranks_section(out, r);
  charts_section(out, r);
  verdict_section(out, r);
  steps_section(out, r);
  out += "</main></body></html>\n";
  return out;
}

void write_analysis_html(const std::string& path, const AnalysisReport& report) {
  write_file_atomic(path, format_analysis_html(report));
}

}  // namespace scalescope::traces
