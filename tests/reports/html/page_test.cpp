// The HTML page: its structure on constructed sweeps (a chart per model and batch as
// documented, one bar / cell / marker per point), escaping of everything that comes from the
// report, and no external resources.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/nvtx.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/html/page.h"
#include "reports/html/svg.h"
#include "tests/reports/html/html_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using html_testing::failed_point;
using html_testing::kHostile;
using html_testing::sample_report;

using testing_util::count_of;

struct Chart {
  std::string kind;   // data-chart
  std::string model;  // data-model, as written (escaped)
  std::string batch;  // data-batch, when the chart has one
  std::string body;   // from <svg to </svg>
};

std::string attribute(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return tag.substr(start, tag.find('"', start) - start);
}

std::vector<Chart> charts_of(const std::string& html) {
  std::vector<Chart> out;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const size_t end = html.find("</svg>", at);
    EXPECT_NE(end, std::string::npos) << "an <svg> is not closed";
    if (end == std::string::npos) break;
    const std::string tag = html.substr(at, html.find('>', at) - at + 1);
    out.push_back({attribute(tag, "data-chart"), attribute(tag, "data-model"),
                   attribute(tag, "data-batch"), html.substr(at, end + 6 - at)});
  }
  return out;
}

std::vector<const Chart*> find(const std::vector<Chart>& charts, const std::string& kind,
                               const std::string& model) {
  std::vector<const Chart*> out;
  for (const Chart& c : charts) {
    if (c.kind == kind && c.model == svg::escape(model)) out.push_back(&c);
  }
  return out;
}

// Elements open and close in order (void elements excepted), outside <style>.
void expect_balanced(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link"};
  std::vector<std::string> stack;
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    if (html.compare(at, 2, "<!") == 0) continue;
    const size_t end = html.find('>', at);
    ASSERT_NE(end, std::string::npos);
    const bool closing = html[at + 1] == '/';
    const size_t name_start = at + (closing ? 2 : 1);
    const size_t name_end = html.find_first_of(" >/", name_start);
    const std::string name = html.substr(name_start, name_end - name_start);
    if (closing) {
      ASSERT_FALSE(stack.empty()) << "</" << name << "> closes nothing";
      ASSERT_EQ(stack.back(), name) << "</" << name << "> closes <" << stack.back() << ">";
      stack.pop_back();
    } else if (html[end - 1] != '/' && kVoid.count(name) == 0) {
      stack.push_back(name);
      if (name == "style") at = html.find("</style>", at) - 1;
    }
  }
  EXPECT_TRUE(stack.empty()) << "<" << stack.back() << "> is never closed";
}

TEST(Html, EveryChartOncePerModelAndBatchWithAShapePerPoint) {
  const SweepReport r = sample_report();
  const std::string html = format_sweep_html(r);
  ASSERT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  expect_balanced(html);

  const std::vector<Chart> charts = charts_of(html);
  const std::vector<std::string> models = {"cnn", kHostile, "solo", "nobase"};
  EXPECT_EQ(count_of(html, "data-chart=\"speedup\""), models.size());
  EXPECT_EQ(count_of(html, "data-chart=\"efficiency-heatmap\""), models.size());
  EXPECT_EQ(count_of(html, "data-chart=\"phases\""), models.size());
  // A waterfall needs a point at N > 1 and its one-device baseline: only cnn's two batches.
  EXPECT_EQ(count_of(html, "data-chart=\"waterfall\""), 2u);
  for (const Chart& c : charts) {
    // Every chart names itself and has a title first.
    EXPECT_FALSE(c.kind.empty());
    EXPECT_NE(c.body.find("><title>"), std::string::npos) << c.kind;
    EXPECT_LT(c.body.find("<title>"),
              c.body.find("<rect") == std::string::npos ? c.body.size() : c.body.find("<rect"));
  }

  for (const std::string& model : models) {
    size_t ok = 0;
    size_t all = 0;
    size_t with_speedup = 0;
    for (const SweepPoint& p : r.points) {
      if (p.model != model) continue;
      ++all;
      ok += p.ok() ? 1 : 0;
      with_speedup += p.ok() && p.summary.speedup ? 1 : 0;
    }
    SCOPED_TRACE(model);
    const auto speedup = find(charts, "speedup", model);
    const auto heatmap = find(charts, "efficiency-heatmap", model);
    const auto phases = find(charts, "phases", model);
    ASSERT_EQ(speedup.size(), 1u);
    ASSERT_EQ(heatmap.size(), 1u);
    ASSERT_EQ(phases.size(), 1u);
    EXPECT_EQ(count_of(speedup[0]->body, "data-point="), with_speedup);
    EXPECT_EQ(count_of(speedup[0]->body, "data-ideal=\"true\""), 1u);
    EXPECT_EQ(count_of(heatmap[0]->body, "data-cell="), all);
    EXPECT_EQ(count_of(phases[0]->body, "data-bar="), ok);
    // Each bar stacks the exposed phases that took time: input, h2d, forward, backward,
    // optimizer and other (10% of the step outside them); and the exposed all-reduce on more
    // than 1 device.
    size_t segments = 0;
    for (const SweepPoint& p : r.points) {
      if (p.model == model && p.ok()) segments += p.devices > 1 ? 7 : 6;
    }
    EXPECT_EQ(count_of(phases[0]->body, "data-phase="), segments);
    EXPECT_EQ(count_of(phases[0]->body, "data-phase=\"other\""), ok);
  }
}

TEST(Html, ProjectionsAndWaterfallsOfAFullGrid) {
  const std::string html = format_sweep_html(sample_report());
  const std::vector<Chart> charts = charts_of(html);
  // cnn: a measured line and a dashed projection per batch; 3 projected device counts each.
  const Chart& cnn = *find(charts, "speedup", "cnn")[0];
  EXPECT_EQ(count_of(cnn.body, "data-series=\"measured\""), 2u);
  const std::regex projected_line("<polyline[^>]*data-projected=\"true\"[^>]*>");
  size_t projected = 0;
  for (auto it = std::sregex_iterator(cnn.body.begin(), cnn.body.end(), projected_line);
       it != std::sregex_iterator(); ++it, ++projected) {
    EXPECT_CONTAINS(it->str(), "stroke-dasharray=");
  }
  EXPECT_EQ(projected, 2u);
  EXPECT_EQ(count_of(cnn.body, "data-projected=\"") - count_of(cnn.body, "data-projected=\"true\""),
            6u);
  EXPECT_CONTAINS(cnn.body, ">projected</text>");
  EXPECT_CONTAINS(html, "projected (all-reduce model)");
  // The measured lines are solid.
  const std::regex measured_line("<polyline[^>]*data-series=\"measured\"[^>]*>");
  for (auto it = std::sregex_iterator(cnn.body.begin(), cnn.body.end(), measured_line);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(it->str().find("dasharray"), std::string::npos);
  }

  // Waterfalls: one per cnn batch, at 4 devices, ideal → five shares → measured.
  const auto waterfalls = find(charts, "waterfall", "cnn");
  ASSERT_EQ(waterfalls.size(), 2u);
  EXPECT_EQ(waterfalls[0]->batch, "16");
  EXPECT_EQ(waterfalls[1]->batch, "32");
  for (const Chart* w : waterfalls) {
    EXPECT_EQ(count_of(w->body, "data-step="), 7u);
    EXPECT_CONTAINS(w->body, "data-devices=\"4\"");
    // 10 / 14 of ideal.
    EXPECT_CONTAINS(w->body, ">71.4%</text>");
  }
}

TEST(Html, GapsAndFailuresAreDrawnAsSuch) {
  const std::string html = format_sweep_html(sample_report());
  const std::vector<Chart> charts = charts_of(html);
  // One device count: the single point and the ideal line; no projection.
  const Chart& solo = *find(charts, "speedup", "solo")[0];
  EXPECT_EQ(count_of(solo.body, "data-projected"), 0u);
  // No one-device point: the cells say so, and the speedup chart explains the gap.
  const Chart& nobase = *find(charts, "efficiency-heatmap", "nobase")[0];
  EXPECT_EQ(count_of(nobase.body, "data-state=\"unknown\""), 2u);
  EXPECT_CONTAINS(find(charts, "speedup", "nobase")[0]->body, "no one-device point");
  // The failed point: a cell, a mark on the speedup axis, a row in the failures table.
  EXPECT_EQ(
      count_of(find(charts, "efficiency-heatmap", kHostile)[0]->body, "data-state=\"failed\""), 1u);
  EXPECT_EQ(count_of(find(charts, "speedup", kHostile)[0]->body, "data-failed="), 1u);
  EXPECT_CONTAINS(html, "<table data-table=\"failures\">");
  EXPECT_CONTAINS(html, "out of memory &lt;&amp; &#39;quotes&#39;&gt;");
}

TEST(Html, EverythingFromTheReportIsEscapedAndNothingIsFetched) {
  const std::string html = format_sweep_html(sample_report());
  // No script at all (the page needs none), so the hostile model name cannot be one.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_CONTAINS(html, "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(html.find("a&b"), std::string::npos);
  EXPECT_CONTAINS(html, "--models &#39;a&amp;b&#39;");
  EXPECT_CONTAINS(html, "host&lt;1&gt;");
  EXPECT_CONTAINS(html, "&quot;4&quot; &amp; more");
  EXPECT_EQ(html.find("</pre><b>"), std::string::npos);
  // Every '&' starts a character reference.
  const std::regex stray("&(?![a-zA-Z][a-zA-Z0-9]*;|#[0-9]+;)");
  std::smatch stray_match;
  EXPECT_FALSE(std::regex_search(html, stray_match, stray))
      << html.substr(static_cast<size_t>(stray_match.position(0)), 40);

  // Self-contained: nothing names a URL or loads anything.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  for (size_t at = html.find("href=\""); at != std::string::npos;
       at = html.find("href=\"", at + 1)) {
    EXPECT_EQ(html[at + 6], '#') << "a link that leaves the page: " << html.substr(at, 40);
  }
}

TEST(Html, TablesCarryTheEnvironmentAndEveryFinding) {
  const SweepReport r = sample_report();
  const std::string html = format_sweep_html(r);
  EXPECT_CONTAINS(html, "Test CPU @ 3.0GHz");
  EXPECT_CONTAINS(html, "8 logical, 4 usable");
  EXPECT_CONTAINS(html, "16.0 GiB");
  EXPECT_CONTAINS(html, "Debian GNU/Linux 12 (bookworm)");
  EXPECT_CONTAINS(html, "built without CUDA");
  EXPECT_CONTAINS(html, "3.0.0 (abc)");
  EXPECT_CONTAINS(html, std::string(40, 'a'));
  EXPECT_CONTAINS(html, "dirty");
  EXPECT_CONTAINS(html, "OMP_NUM_THREADS");
  size_t findings = 0;
  for (const SweepPoint& p : r.points) {
    if (!p.ok()) continue;
    for (const Finding& f : p.summary.verdict.findings) {
      ++findings;
      EXPECT_CONTAINS(html, svg::escape(f.explanation));
    }
  }
  const size_t table = html.find("<table data-table=\"verdicts\">");
  ASSERT_NE(table, std::string::npos);
  const std::string verdicts = html.substr(table, html.find("</table>", table) - table);
  EXPECT_EQ(count_of(verdicts, "<tr>") - 1, findings);  // and the header
  // Phases are drawn in the NVTX timeline's colours.
  const Rgb backward = nvtx::category(Phase::kBackward).color;
  EXPECT_CONTAINS(html, fmt::format("fill=\"#{:02x}{:02x}{:02x}\" data-phase=\"backward\"",
                                    backward.red, backward.green, backward.blue));
}

// A statistically-limited finding's share is of the samples, not of the step: its cell says so,
// and the other findings' cells stay bare percentages.
TEST(Html, StatisticallyLimitedShareIsOfSamples) {
  SweepReport r = sample_report();
  SweepPoint& four = r.points.at(2);
  ASSERT_EQ(four.devices, 4);
  four.summary.verdict.findings.insert(
      four.summary.verdict.findings.begin(),
      Finding{"statistically-limited", kSeverityHigh, "statistically limited: ...", 0.68, {}});
  const std::string html = format_sweep_html(r);
  const size_t table = html.find("<table data-table=\"verdicts\">");
  ASSERT_NE(table, std::string::npos);
  const std::string verdicts = html.substr(table, html.find("</table>", table) - table);
  EXPECT_EQ(count_of(verdicts, "data-share-of=\"samples\""), 1u);
  EXPECT_CONTAINS(verdicts, "68.0% of samples</span>");
  EXPECT_CONTAINS(verdicts, "not a share of the step");
  EXPECT_EQ(count_of(verdicts, "of samples"), 1u);
}

TEST(Html, EmptyAndIncompleteReportsRender) {
  SweepReport r;
  r.complete = false;
  analyze(r);
  const std::string html = format_sweep_html(r);
  EXPECT_CONTAINS(html, "no points yet");
  EXPECT_CONTAINS(html, "incomplete sweep");
  expect_balanced(html);
  // Only failed points: charts still render, with nothing to plot.
  r.points.push_back(failed_point("m", 1, 8, "boom"));
  analyze(r);
  const std::string failed = format_sweep_html(r);
  expect_balanced(failed);
  EXPECT_EQ(count_of(failed, "data-chart=\"speedup\""), 1u);
  EXPECT_EQ(count_of(failed, "data-bar="), 0u);
}

TEST(Html, WrittenAtomically) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("scalescope_html_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const SweepReport r = sample_report();
  const std::string path = (dir / "report.html").string();
  write_sweep_html(path, r);
  EXPECT_EQ(read_file(path), format_sweep_html(r));
  const std::string error = testing_util::error_of(
      [&] { write_sweep_html((dir / "missing" / "report.html").string(), r); });
  EXPECT_CONTAINS(error, "missing/report.html");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scalescope
