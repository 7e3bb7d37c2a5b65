#include "reports/trace_analysis/analysis_report.h"
#include "reports/analysis/sweep_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/check.h"
#include "core/fs.h"
#include "reports/analysis/stats.h"
#include "reports/json_reader.h"

namespace scalescope::traces {

using nlohmann::json;

namespace {

// The figures of a step breakdown, by their JSON key: one list for the writer, the reader and
// the medians.
struct Field {
  const char* key;
  double StepBreakdown::*member;
};
constexpr auto kFields = std::to_array<Field>({
    {"step_ms", &StepBreakdown::step_ms},
    {"forward_ms", &StepBreakdown::forward_ms},
    {"backward_ms", &StepBreakdown::backward_ms},
    {"optimizer_ms", &StepBreakdown::optimizer_ms},
    {"communication_ms", &StepBreakdown::communication_ms},
    {"communication_exposed_ms", &StepBreakdown::communication_exposed_ms},
    {"h2d_ms", &StepBreakdown::h2d_ms},
    {"h2d_exposed_ms", &StepBreakdown::h2d_exposed_ms},
    {"copy_exposed_ms", &StepBreakdown::copy_exposed_ms},
    {"input_ms", &StepBreakdown::input_ms},
    {"idle_ms", &StepBreakdown::idle_ms},
});

json figures_json(const StepBreakdown& s) {
  json j = json::object();
  for (const Field& f : kFields) j[f.key] = s.*f.member;
  j["compute_ms"] = s.compute_ms();
  return j;
}

json job_json(const JobSteps& job) {
  json ranks = json::array();
  for (const RankSteps& r : job.ranks) {
    json steps = json::array();
    for (const StepBreakdown& s : r.steps) {
      json j = figures_json(s);
      j["step"] = s.step;
      j["start_us"] = s.start_us;
      steps.push_back(std::move(j));
    }
    ranks.push_back({{"rank", r.rank},
                     {"file", r.file},
                     {"format", to_string(r.format)},
                     {"device", r.device},
                     {"steps", std::move(steps)}});
  }
  return {{"device_kind", job.device() ? "cuda" : "cpu"}, {"ranks", std::move(ranks)}};
}

TraceFormat parse_format(const JsonReader& r) {
  const std::string f = r.string("format");
  for (TraceFormat t : {TraceFormat::kKineto, TraceFormat::kTorchLegacy, TraceFormat::kNsys,
                        TraceFormat::kScalescope}) {
    if (f == to_string(t)) return t;
  }
  throw_error(fmt::format("{}: '{}' is not a trace format (kineto, torch-legacy, nsys, scalescope)",
                          r.name("format"), f));
}

StepBreakdown step_from_json(const JsonReader& r) {
  StepBreakdown s;
  s.step = r.int64("step");
  s.start_us = r.number("start_us");
  for (const Field& f : kFields) {
    s.*f.member = r.number(f.key);
    SS_CHECK(s.*f.member >= 0.0, "{} is negative", r.name(f.key));
  }
  SS_CHECK(s.step_ms > 0.0, "{} must be positive", r.name("step_ms"));
  return s;
}

JobSteps job_from_json(const JsonReader& r) {
  JobSteps job;
  const size_t n = r.array("ranks").size();
  SS_CHECK(n > 0, "{} is empty", r.name("ranks"));
  for (size_t i = 0; i < n; ++i) {
    const JsonReader rank = r.element("ranks", i);
    RankSteps s;
    s.rank = rank.int32("rank");
    s.file = rank.string("file");
    s.format = parse_format(rank);
    s.device = rank.boolean("device");
    const size_t steps = rank.array("steps").size();
    SS_CHECK(steps > 0, "{} is empty", rank.name("steps"));
    for (size_t k = 0; k < steps; ++k) s.steps.push_back(step_from_json(rank.element("steps", k)));
    SS_CHECK(job.ranks.empty() || job.ranks.back().rank < s.rank,
             "{}: ranks must be listed once each, ascending", rank.name("rank"));
    job.ranks.push_back(std::move(s));
  }
  SS_CHECK(!job.common_steps().empty(), "{}: the ranks share no step", r.name("ranks"));
  return job;
}

StepBreakdown medians_of(const RankSteps& r, const std::vector<int64_t>& steps) {
  StepBreakdown m;
  std::vector<double> v;
  for (const Field& f : kFields) {
    v.clear();
    for (const StepBreakdown& s : r.steps) {
      if (std::binary_search(steps.begin(), steps.end(), s.step)) v.push_back(s.*f.member);
    }
    m.*f.member = median(v);
  }
  return m;
}

RankSpread spread_of(const JobSteps& job) {
  RankSpread out;
  const std::vector<int64_t> steps = job.common_steps();
  std::vector<double> compute;
  for (const RankSteps& r : job.ranks) {
    out.medians.push_back(medians_of(r, steps));
    compute.push_back(out.medians.back().compute_ms());
  }
  const size_t slowest = std::max_element(compute.begin(), compute.end()) - compute.begin();
  out.slowest_rank = job.ranks[slowest].rank;
  const double typical = median(compute);
  out.compute_skew_ms = compute[slowest] - typical;
  out.compute_skew_ratio = typical > 0.0 ? compute[slowest] / typical : 1.0;
  std::vector<double> spread;
  for (size_t k = 0; k < steps.size(); ++k) {
    double lo = 0.0;
    double hi = 0.0;
    for (size_t i = 0; i < job.ranks.size(); ++i) {
      const auto& all = job.ranks[i].steps;
      const auto it = std::find_if(all.begin(), all.end(),
                                   [&](const StepBreakdown& s) { return s.step == steps[k]; });
      lo = i == 0 ? it->step_ms : std::min(lo, it->step_ms);
      hi = i == 0 ? it->step_ms : std::max(hi, it->step_ms);
    }
    spread.push_back(hi - lo);
  }
  out.step_spread_ms = median(spread);
  return out;
}

json spread_json(const AnalysisReport& r) {
  json ranks = json::array();
  for (size_t i = 0; i < r.job.ranks.size(); ++i) {
    ranks.push_back({{"rank", r.job.ranks[i].rank},
                     {"file", r.job.ranks[i].file},
                     {"medians", figures_json(r.spread.medians[i])}});
  }
  return {{"ranks", std::move(ranks)},
          {"steps", r.job.common_steps()},
          {"slowest_rank", r.spread.slowest_rank},
          {"compute_skew_ms", r.spread.compute_skew_ms},
          {"compute_skew_ratio", r.spread.compute_skew_ratio},
          {"step_spread_ms", r.spread.step_spread_ms}};
}

}  // namespace

void analyze_report(AnalysisReport& report) {
  SweepReport& s = report.sweep;
  s = SweepReport{};
  s.tool_version = report.tool_version;
  s.created = report.created;
  s.config = json::object();
  s.complete = true;
  if (report.baseline) {
    SS_CHECK(report.baseline->ranks.size() == 1,
             "the baseline must be one rank of the job (its speedup and efficiency are against "
             "one device); it has {}",
             report.baseline->ranks.size());
    SS_CHECK(report.job.ranks.size() > 1,
             "a baseline is one rank of the job, and the job has one rank too: analyze the two as "
             "two jobs and compare them");
    s.points.push_back(sweep_point(*report.baseline, report.name, report.batch));
  }
  s.points.push_back(sweep_point(report.job, report.name, report.batch));
  analyze(s);
  // The all-reduce cost model fits bucket sizes, which traces do not give.
  s.communication.clear();
  report.spread = spread_of(report.job);
}

json to_json(const AnalysisReport& report) {
  const json sweep = to_json(report.sweep);
  const json& points = sweep.at("points");
  json summary = spread_json(report);
  summary["point"] = points.back().at("summary");
  summary["baseline_point"] = report.baseline ? points.front().at("summary") : json(nullptr);
  return {{"schema", kAnalysisSchema},
          {"schema_version", kAnalysisSchemaVersion},
          {"tool_version", report.tool_version},
          {"created", report.created},
          {"name", report.name},
          {"batch", report.batch},
          {"step_range", report.step_range},
          {"job", job_json(report.job)},
          {"baseline", report.baseline ? job_json(*report.baseline) : json(nullptr)},
          {"summary", std::move(summary)}};
}

AnalysisReport analysis_report_from_json(const json& j, const std::string& what) {
  const JsonReader r(j, what);
  const std::string schema = r.string("schema");
  SS_CHECK(schema == kAnalysisSchema, "{}: this is a '{}' file, not an analysis report ('{}')",
           what, schema, kAnalysisSchema);
  const std::string version = r.string("schema_version");
  SS_CHECK(version.starts_with("1."),
           "{}: schema version {} is newer than this scalescope reads (1.x)", what, version);
  AnalysisReport out;
  out.tool_version = r.string("tool_version");
  out.created = r.string("created");
  out.name = r.string("name");
  out.batch = r.int64("batch");
  SS_CHECK(out.batch >= 0, "{} is negative", r.name("batch"));
  out.step_range = r.string("step_range");
  out.job = job_from_json(r.object("job"));
  if (!r.at("baseline").is_null()) out.baseline = job_from_json(r.object("baseline"));
  analyze_report(out);
  return out;
}

void write_analysis_report(const std::string& path, const AnalysisReport& report) {
  write_file_atomic(path, dump_json(to_json(report), 2) + "\n");
}

AnalysisReport read_analysis_report(const std::string& path) {
  return analysis_report_from_json(parse_json(read_file(path), path), path);
}

SweepReport read_comparable_report(const std::string& path) {
  const json j = parse_json(read_file(path), path);
  if (j.is_object() && j.contains("schema") && j["schema"] == kAnalysisSchema) {
    return analysis_report_from_json(j, path).sweep;
  }
  return sweep_report_from_json(j, path);
}

}  // namespace scalescope::traces
