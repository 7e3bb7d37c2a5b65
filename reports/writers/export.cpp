#include "reports/writers/export.h"
#include "reports/analysis/sweep_analysis.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <vector>

#include "core/check.h"
#include "core/enum_names.h"
#include "reports/analysis/stats.h"

namespace scalescope {

using nlohmann::json;

namespace {

constexpr auto kFormatNames =
    enum_names<ExportFormat>("gbench", "github-action-benchmark", "bencher");
constexpr auto kMetricNames = enum_names<GithubMetric>("throughput", "step-time");

}  // namespace

ExportFormat parse_export_format(const std::string& text) {
  const std::optional<ExportFormat> format = kFormatNames.parse(text);
  SS_CHECK(format.has_value(), "export format '{}' is not known (accepted: {})", text,
           kFormatNames.accepted());
  return *format;
}

std::vector<std::string> export_format_names() {
  return {kFormatNames.names().begin(), kFormatNames.names().end()};
}

GithubMetric parse_github_metric(const std::string& text) {
  const std::optional<GithubMetric> metric = kMetricNames.parse(text);
  SS_CHECK(metric.has_value(), "metric '{}' is not known (accepted: {})", text,
           kMetricNames.accepted());
  return *metric;
}

std::vector<std::string> github_metric_names() {
  return {kMetricNames.names().begin(), kMetricNames.names().end()};
}

std::string benchmark_name(const SweepPoint& p) {
  std::string name =
      p.mode == ScalingMode::kWeak
          ? fmt::format("{}/{}:{}/batch:{}", p.model, p.device_kind, p.devices, p.batch)
          : fmt::format("{}/{}:{}/global_batch:{}", p.model, p.device_kind, p.devices,
                        p.global_batch);
  // What else tells the point apart (SweepPoint::key), where it is not the default, so that
  // the default points keep the names a tracker's history has.
  if (p.devices > 1 && !p.default_buckets()) {
    name += fmt::format("/bucket_cap_mb:{}", p.bucket_cap_mb);
    if (p.first_bucket_mb != kDefaultFirstBucketMb) {
      name += fmt::format("/first_bucket_mb:{}", p.first_bucket_mb);
    }
  }
  if (p.devices > 1 && p.compressed()) {
    name += fmt::format("/grad_compression:{}", to_string(p.grad_compression));
  }
  if (!p.precision_default) name += fmt::format("/precision:{}", to_string(p.precision));
  return name;
}

namespace {

// 95% bootstrap interval of the median step time (the same seed every time: an export of the
// same report is the same file).
Interval step_ms_interval(const SweepPoint& p) {
  return bootstrap_median_ci(pooled_step_ms(p), [](double median_ms) { return median_ms; });
}

// ---------------------------------------------------------------------------------------
// Google Benchmark.

// Google Benchmark writes local time with an offset ("2024-01-31T12:34:56+00:00"); reports
// hold UTC with a Z.
std::string gbench_date(const std::string& created) {
  if (!created.empty() && created.back() == 'Z') {
    return created.substr(0, created.size() - 1) + "+00:00";
  }
  return created;
}

json gbench_context(const SweepReport& report) {
  const Environment& env = report.environment;
  std::string gpus;
  for (const GpuInfo& g : env.gpus) gpus += (gpus.empty() ? "" : ", ") + g.name;
  std::string build_type = env.build.build_type;
  for (char& ch : build_type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return {
      {"date", gbench_date(report.created)},
      {"host_name", env.host.hostname},
      {"executable", "scalescope"},
      {"num_cpus", env.host.logical_cores},
      {"mhz_per_cpu", 0},  // not captured
      {"cpu_scaling_enabled", false},
      {"caches", json::array()},
      {"load_avg", json::array()},
      // Google Benchmark knows "release" and "debug" only.
      {"library_build_type", build_type == "debug" ? "debug" : "release"},
      // Custom context (Google Benchmark's AddCustomContext writes strings).
      {"scalescope_version", report.tool_version},
      {"git_commit", env.build.git_commit},
      {"cpu_model", env.host.cpu_model},
      {"gpus", gpus.empty() ? "none" : gpus},
      {"cuda_driver", env.libraries.cuda_driver},
      {"nccl", env.libraries.nccl},
      {"onednn", env.libraries.onednn},
      {"command_line", env.command_line},
  };
}

struct GbenchRun {
  int64_t iterations = 0;
  double ms = 0.0;
  double items_per_second = 0.0;
};

json gbench_entry(const std::string& name, int family, int instance, int repetitions) {
  return {{"name", name},     {"family_index", family},  {"per_family_instance_index", instance},
          {"run_name", name}, {"run_type", "iteration"}, {"repetitions", repetitions},
          {"threads", 1}};
}

void add_time(json& j, int64_t iterations, double ms, double items_per_second) {
  j["iterations"] = iterations;
  j["real_time"] = ms;
  j["cpu_time"] = ms;
  j["time_unit"] = "ms";
  j["items_per_second"] = items_per_second;
}

void gbench_point(json& out, const SweepPoint& p, int family, int instance) {
  const std::string name = benchmark_name(p);
  if (!p.ok()) {
    json j = gbench_entry(name, family, instance, 1);
    j["repetition_index"] = 0;
    j["error_occurred"] = true;
    j["error_message"] = p.error;
    add_time(j, 0, 0.0, 0.0);
    out.push_back(std::move(j));
    return;
  }
  std::vector<GbenchRun> runs;
  for (const RepeatRecord& r : p.repeats) {
    if (r.steps.empty()) continue;
    std::vector<double> ms;
    for (const StepRecord& s : r.steps) ms.push_back(s.step_ms);
    const double m = median(ms);
    runs.push_back(
        {static_cast<int64_t>(ms.size()), m, static_cast<double>(p.global_batch) * 1e3 / m});
  }
  const int repetitions = static_cast<int>(runs.size());
  for (int i = 0; i < repetitions; ++i) {
    json j = gbench_entry(name, family, instance, repetitions);
    j["repetition_index"] = i;
    add_time(j, runs[i].iterations, runs[i].ms, runs[i].items_per_second);
    out.push_back(std::move(j));
  }
  if (repetitions < 2) return;  // Google Benchmark aggregates repetitions only
  std::vector<double> ms;
  std::vector<double> items;
  for (const GbenchRun& r : runs) {
    ms.push_back(r.ms);
    items.push_back(r.items_per_second);
  }
  const auto aggregate = [&](const char* what, const char* unit, double time, double rate) {
    json j = gbench_entry(name + "_" + what, family, instance, repetitions);
    j["run_name"] = name;
    j["run_type"] = "aggregate";
    j["aggregate_name"] = what;
    j["aggregate_unit"] = unit;
    add_time(j, repetitions, time, rate);
    out.push_back(std::move(j));
  };
  aggregate("mean", "time", mean(ms), mean(items));
  aggregate("median", "time", median(ms), median(items));
  aggregate("stddev", "time", stddev(ms), stddev(items));
  aggregate("cv", "percentage", stddev(ms) / mean(ms), stddev(items) / mean(items));
}

// ---------------------------------------------------------------------------------------
// github-action-benchmark and Bencher.

std::string extra_text(const SweepPoint& p) {
  const PointSummary& s = p.summary;
  std::string text = fmt::format(
      "step time {:.3f} ms (p10 {:.3f}, p90 {:.3f})\nthroughput {:.1f} samples/s [{:.1f}, "
      "{:.1f}]\nmeasured steps {} in {} repeat{}\nglobal batch {}",
      s.step_ms_median, s.step_ms_p10, s.step_ms_p90, s.throughput.value, s.throughput.low,
      s.throughput.high, s.measured_steps, p.repeats.size(), p.repeats.size() == 1 ? "" : "s",
      p.global_batch);
  if (s.efficiency && p.devices > 1) {
    text += fmt::format("\nefficiency {:.1f}%", 100.0 * s.efficiency->value);
  }
  if (!s.verdict.findings.empty()) {
    text += fmt::format("\nbottleneck {}", s.verdict.top().kind);
  }
  return text;
}

json bencher_metric(const Interval& i, double scale = 1.0) {
  return {
      {"value", i.value * scale}, {"lower_value", i.low * scale}, {"upper_value", i.high * scale}};
}

}  // namespace

json to_gbench_json(const SweepReport& report) {
  json benchmarks = json::array();
  // A family is a model in one scaling mode; its instances are the device counts and batches.
  std::map<std::string, std::pair<int, int>> families;  // family -> (index, instances so far)
  for (const SweepPoint& p : report.points) {
    const std::string family = p.model + "|" + to_string(p.mode);
    auto [it, added] = families.emplace(family, std::make_pair(0, 0));
    if (added) it->second.first = static_cast<int>(families.size()) - 1;
    gbench_point(benchmarks, p, it->second.first, it->second.second++);
  }
  return {{"context", gbench_context(report)}, {"benchmarks", std::move(benchmarks)}};
}

json to_github_action_benchmark_json(const SweepReport& report, GithubMetric metric) {
  json out = json::array();
  for (const SweepPoint& p : report.points) {
    if (!p.ok()) continue;
    const Interval i =
        metric == GithubMetric::kThroughput ? p.summary.throughput : step_ms_interval(p);
    const bool throughput = metric == GithubMetric::kThroughput;
    out.push_back({{"name", benchmark_name(p)},
                   {"unit", throughput ? "samples/s" : "ms"},
                   {"value", i.value},
                   {"range", fmt::format(fmt::runtime(throughput ? "± {:.1f}" : "± {:.4f}"),
                                         (i.high - i.low) / 2.0)},
                   {"extra", extra_text(p)}});
  }
  return out;
}

json to_bencher_json(const SweepReport& report) {
  json out = json::object();
  for (const SweepPoint& p : report.points) {
    if (!p.ok()) continue;
    json measures = {{"throughput", bencher_metric(p.summary.throughput)},
                     {"latency", bencher_metric(step_ms_interval(p), 1e6)}};
    if (p.devices > 1 && p.summary.efficiency) {
      measures["efficiency"] = bencher_metric(*p.summary.efficiency);
    }
    out[benchmark_name(p)] = std::move(measures);
  }
  return out;
}

}  // namespace scalescope
