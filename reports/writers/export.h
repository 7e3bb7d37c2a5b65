// A sweep report in the formats of other benchmark trackers (`scalescope export`), so that a CI
// that already charts or gates benchmarks with one of them can take scalescope's numbers.
// One benchmark per ok point, named "MODEL/KIND:DEVICES/batch:B" (weak scaling, B per device)
// or "MODEL/KIND:DEVICES/global_batch:G" (strong scaling), e.g. "cifar-cnn/cpu:2/batch:64".
//
//   gbench                  Google Benchmark's JSON (what --benchmark_format=json writes), so
//                           its tools/compare.py compares two exports: a "context" block, then
//                           per point one "iteration" entry per repeat (the repeats are Google
//                           Benchmark's repetitions: iterations = the repeat's measured steps,
//                           real_time = its median step time in ms, items_per_second = global
//                           batch / that time) and, with more than one repeat, the "aggregate"
//                           entries NAME_mean, NAME_median, NAME_stddev and NAME_cv over the
//                           repeats, as Google Benchmark computes them. The step time is wall
//                           time (device time on GPUs): cpu_time repeats real_time, since the
//                           trainer does not measure a CPU time. A failed point is an entry
//                           with error_occurred and error_message, as Google Benchmark reports
//                           a benchmark that failed.
//   github-action-benchmark the "customBiggerIsBetter" tool's input: [{name, unit, value, range,
//                           extra}], value = throughput in samples/s; or, with
//                           GithubMetric::kStepTime, the "customSmallerIsBetter" tool's input
//                           with value = median step time in ms. A file holds one direction,
//                           since the action takes one tool per file. range is "± half the 95%
//                           bootstrap interval"; extra lists the other figures. Failed points
//                           are left out (the format has no way to say "failed").
//   bencher                 Bencher Metric Format: {name: {"throughput": {value, lower_value,
//                           upper_value}, "latency": {...}, "efficiency": {...}}}: throughput in
//                           samples/s and latency (median step time) in nanoseconds, Bencher's
//                           units for its built-in measures; efficiency (N > 1 devices) as a
//                           fraction. Lower and upper values are the 95% bootstrap interval.
//                           Failed points are left out.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "reports/sweep_report.h"

namespace scalescope {

enum class ExportFormat { kGbench, kGithubActionBenchmark, kBencher };
// "gbench" | "github-action-benchmark" | "bencher"; throws Error naming the text otherwise.
ExportFormat parse_export_format(const std::string& text);
std::vector<std::string> export_format_names();

enum class GithubMetric { kThroughput, kStepTime };
// "throughput" | "step-time"; throws Error naming the text otherwise.
GithubMetric parse_github_metric(const std::string& text);
std::vector<std::string> github_metric_names();

// The benchmark name of a point in every format: "cnn/cpu:2/batch:32", with "/bucket_cap_mb:5",
// "/grad_compression:bf16" or "/precision:bf16" where the point has other than the default, so
// that the points of one report have names of their own.
std::string benchmark_name(const SweepPoint& point);

// REQUIRES (all three): an analyzed report (read_sweep_report and analyze() leave it so).
nlohmann::json to_gbench_json(const SweepReport& report);
nlohmann::json to_github_action_benchmark_json(const SweepReport& report, GithubMetric metric);
nlohmann::json to_bencher_json(const SweepReport& report);

}  // namespace scalescope
