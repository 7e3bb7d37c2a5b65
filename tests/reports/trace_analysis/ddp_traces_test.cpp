// The real traces of tests/data/traces/ddp_gloo (bench/traces/make_test_traces.sh: PyTorch 2.x,
// DDP over Gloo on CPU, 1 and 2 ranks, 5 profiled steps) and of ddp_gloo_legacy (the same job
// under Debian's PyTorch 1.13, whose profiler has no Kineto): what analyze makes of them adds up
// to each step and agrees with the traces' own events, read here independently of the readers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "reports/analysis/stats.h"
#include "reports/trace_analysis/analysis_report.h"
#include "reports/trace_analysis/job.h"

namespace scalescope::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string data(const std::string& name) {
  const char* dir = std::getenv("SCALESCOPE_SOURCE_DIR");
  const fs::path root =
      dir != nullptr ? fs::path(dir) : fs::path(__FILE__).parent_path() / "../../..";
  return (root / "tests/data/traces" / name).string();
}

json gunzip_json(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string text;
  char buf[1 << 15];
  for (int n; f != nullptr && (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, n);
  if (f != nullptr) gzclose(f);
  return json::parse(text);
}

struct Interval {
  double start, end;
};

// Total length of the union of `v`, clipped to [lo, hi).
double covered(std::vector<Interval> v, double lo, double hi) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  double total = 0.0;
  double reach = lo;
  for (const Interval& i : v) {
    const double s = std::max(i.start, reach);
    const double e = std::min(i.end, hi);
    if (e > s) total += e - s;
    reach = std::max(reach, std::min(i.end, hi));
  }
  return total;
}

// The figures a step's events give directly, in ms.
struct Expected {
  double step_ms = 0, input_ms = 0, optimizer_ms = 0, backward_ms = 0, communication_ms = 0;
};

std::map<int64_t, Expected> expected_from_events(const json& doc) {
  const json& ev = doc.is_array() ? doc : doc["traceEvents"];  // the legacy profiler's: an array
  std::map<int64_t, Expected> out;
  for (const json& step : ev) {
    const std::string name = step.value("name", "");
    if (step.value("ph", "") != "X" || !name.starts_with("ProfilerStep#")) continue;
    const double lo = step["ts"].get<double>();
    const double hi = lo + step["dur"].get<double>();
    std::vector<Interval> comm, backward, c10d;
    Expected e;
    e.step_ms = step["dur"].get<double>() / 1e3;
    for (const json& x : ev) {
      if (x.value("ph", "") != "X" || !x.contains("dur")) continue;
      const std::string n = x.value("name", "");
      const double s = x["ts"].get<double>();
      const double d = x["dur"].get<double>();
      if (s < lo || s >= hi) {
        if (n.starts_with("gloo:")) comm.push_back({s, s + d});  // may reach into the step
        continue;
      }
      if (n.find("DataLoaderIter.__next__") != std::string::npos) e.input_ms += d / 1e3;
      if (n.starts_with("Optimizer.step#") || n.starts_with("Optimizer.zero_grad#")) {
        e.optimizer_ms += d / 1e3;
      }
      if (n.starts_with("autograd::engine::evaluate_function:")) backward.push_back({s, s + d});
      if (n.starts_with("gloo:")) comm.push_back({s, s + d});
      if (n.starts_with("c10d::")) c10d.push_back({s, s + d});
    }
    double inside = 0.0;  // collectives called from backward ops block them: communication
    for (const Interval& b : backward) inside += covered(c10d, b.start, b.end);
    e.backward_ms = (covered(backward, lo, hi) - inside) / 1e3;
    e.communication_ms = covered(comm, lo, hi) / 1e3;
    out[std::stoll(name.substr(13))] = e;
  }
  return out;
}

void expect_agrees_with_events(const std::string& file, TraceFormat format) {
  SCOPED_TRACE(file);
  const JobSteps job = read_job({file}, "");
  const std::map<int64_t, Expected> expected = expected_from_events(gunzip_json(file));
  ASSERT_EQ(job.ranks.size(), 1u);
  EXPECT_EQ(job.ranks[0].format, format);
  ASSERT_EQ(job.ranks[0].steps.size(), expected.size());
  ASSERT_GE(expected.size(), 3u);
  for (const StepBreakdown& s : job.ranks[0].steps) {
    SCOPED_TRACE(s.step);
    const Expected& e = expected.at(s.step);
    EXPECT_NEAR(s.exclusive_sum_ms(), s.step_ms, 1e-9);
    // Within 10 ns: the traces' µs timestamps near 5e12 carry 1 ns of rounding each.
    EXPECT_NEAR(s.step_ms, e.step_ms, 1e-5);
    EXPECT_NEAR(s.input_ms, e.input_ms, 1e-5);
    EXPECT_NEAR(s.optimizer_ms, e.optimizer_ms, 1e-5);
    EXPECT_NEAR(s.backward_ms, e.backward_ms, 1e-5);
    EXPECT_NEAR(s.communication_ms, e.communication_ms, 1e-5);
    EXPECT_GT(s.communication_ms, 0.0);  // DDP all-reduces every step, one rank too
    EXPECT_GT(s.forward_ms, 0.0);
    EXPECT_EQ(s.h2d_ms, 0.0);  // CPU tensors: no copies
  }
}

TEST(DdpTraces, EveryRankAgreesWithItsEvents) {
  for (const char* f : {"one_rank/rank-0", "two_ranks/rank-0", "two_ranks/rank-1"}) {
    expect_agrees_with_events(data(fmt::format("ddp_gloo/{}.pt.trace.json.gz", f)),
                              TraceFormat::kKineto);
    expect_agrees_with_events(data(fmt::format("ddp_gloo_legacy/{}.json.gz", f)),
                              TraceFormat::kTorchLegacy);
  }
}

// The job against its one-rank baseline, through the sweep analysis: efficiency is the ratio of
// the median step times, and the loss split adds up to what was lost. `files` is the traces'
// path with {} for one_rank/rank-0, two_ranks/rank-0 and two_ranks/rank-1.
void expect_two_ranks_against_one(const std::string& files) {
  SCOPED_TRACE(files);
  const auto trace = [&](const char* name) { return data(fmt::format(fmt::runtime(files), name)); };
  AnalysisReport r;
  r.job = read_job({trace("two_ranks/rank-1"), trace("two_ranks/rank-0")}, "");
  r.baseline = read_job({trace("one_rank/rank-0")}, "");
  analyze_report(r);
  ASSERT_EQ(r.job.ranks.size(), 2u);
  EXPECT_EQ(r.job.ranks[0].rank, 0);  // from distributedInfo or the name, whatever the order
  EXPECT_FALSE(r.job.device());
  const SweepPoint& job = r.job_point();
  EXPECT_EQ(job.devices, 2);
  EXPECT_EQ(job.device_kind, "cpu");
  std::vector<double> one;
  for (const StepBreakdown& s : r.baseline->ranks[0].steps) one.push_back(s.step_ms);
  std::vector<double> group;
  for (int64_t step : r.job.common_steps()) {
    double slowest = 0.0;
    for (const RankSteps& rank : r.job.ranks) {
      for (const StepBreakdown& s : rank.steps) {
        if (s.step == step) slowest = std::max(slowest, s.step_ms);
      }
    }
    group.push_back(slowest);
  }
  ASSERT_TRUE(job.summary.efficiency && job.summary.loss);
  EXPECT_NEAR(job.summary.efficiency->value, median(one) / median(group), 1e-9);
  const LossBreakdown& l = *job.summary.loss;
  EXPECT_NEAR(std::accumulate(l.shares.begin(), l.shares.end(), 0.0), l.lost, 1e-9);
  EXPECT_FALSE(job.summary.verdict.findings.empty());
  EXPECT_GE(r.spread.compute_skew_ratio, 1.0);
}

TEST(DdpTraces, TwoRanksAgainstOne) {
  expect_two_ranks_against_one("ddp_gloo/{}.pt.trace.json.gz");
  expect_two_ranks_against_one("ddp_gloo_legacy/{}.json.gz");
}

}  // namespace
}  // namespace scalescope::traces
