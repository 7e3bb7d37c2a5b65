// Scaling sweeps: the grid, bad input refused before anything runs, failed points recorded,
// the report rewritten after every point (a killed sweep keeps its finished points) and
// resumed.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/device_spec.h"
#include "core/error.h"
#include "core/fs.h"
#include "harness/sweep/sweep.h"
#include "harness/telemetry/environment.h"
#include "reports/writers/table.h"
#include "tests/harness/sweep/sweep_test_util.h"
#include "tests/models/precision_scope.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::temp_path;
using testing_util::tiny;

TEST(SweepModels, ASizeFamilyExpandsIntoOneModelPerValue) {
  EXPECT_EQ(split_model_list("cifar-cnn,cnn:width=1,2,4"),
            (std::vector<std::string>{"cifar-cnn", "cnn:width=1", "cnn:width=2", "cnn:width=4"}));
  EXPECT_EQ(split_model_list("mlp:scale=0.01,0.1,dense-100"),
            (std::vector<std::string>{"mlp:scale=0.01", "mlp:scale=0.1", "dense-100"}));
  EXPECT_CONTAINS(testing_util::error_of([] { split_model_list("cifar-cnn,,dense-100"); }),
                  "empty model name");
}

TEST(SweepValidation, BadInputIsRefusedNamingTheValue) {
  const auto error = [](const std::function<void(SweepOptions&)>& change) {
    SweepOptions o = tiny("unused.json");
    change(o);
    return testing_util::error_of([&] { validate(o); });
  };
  EXPECT_EQ(error([](SweepOptions&) {}), "<no error thrown>");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.models = {"resnet-999"}; }), "resnet-999");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.models.clear(); }), "models is empty");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.batches.clear(); }), "batch is empty");
  EXPECT_CONTAINS(error([](SweepOptions& o) {
                    o.batches = {8, 0};
                  }),
                  "batch 0 must be a positive number of samples");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.devices = "cpu:1,x"; }), "'x'");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.devices = "cpu:0"; }),
                  "the device count 0 must be between 1 and 1024");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.devices = "cpu:1,4096"; }), "device count 4096");
  // More CPU devices than cores: refused unless asked for.
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.devices = "cpu:1,512"; }), "need 512 cores");
  EXPECT_EQ(error([](SweepOptions& o) {
              o.devices = "cpu:1,512";
              o.oversubscribe = true;
            }),
            "<no error thrown>");
  // Past the threads a process may start even then (libgomp exited the process).
  EXPECT_CONTAINS(error([](SweepOptions& o) {
                    o.devices = "cpu:1,512";
                    o.threads = 9;
                    o.oversubscribe = true;
                  }),
                  "threads 9: 512 cpu devices × 9 threads need 4608 threads; one process may use "
                  "at most 4096");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.global_batches = {31}; }),
                  "global_batch 31 does not split evenly over 2 devices");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.repeats = 0; }), "repeats 0");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.steps = 1; }), "steps 1");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.steady.tolerance = 2; }), "steady_tolerance 2");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.train.data.spec = "idx:/nonexistent"; }),
                  "/nonexistent");
  EXPECT_CONTAINS(error([](SweepOptions& o) {
                    o.bucket_caps_mb = {25, 0};
                  }),
                  "bucket_cap_mb 0 must be a positive size");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.first_buckets_mb = {-1}; }),
                  "first_bucket_mb -1 must be a positive size");
  EXPECT_CONTAINS(error([](SweepOptions& o) { o.bucket_caps_mb.clear(); }),
                  "bucket_cap_mb is empty");
}

TEST(SweepGrid, BucketCapsAreAnAxisBeyondOneDevice) {
  SweepOptions o = tiny("unused.json");
  o.devices = "cpu:1,2,4";
  o.oversubscribe = true;
  o.bucket_caps_mb = {25, 1, 25};  // ascending and unique on the grid
  o.first_buckets_mb = {1, 0.5};
  const std::vector<SweepPoint> grid = sweep_grid(o, resolve_devices(o));
  // One device all-reduces nothing: one point, the first caps. Then 2 × 2 settings per count.
  ASSERT_EQ(grid.size(), 1u + 4u + 4u);
  EXPECT_EQ(grid[0].devices, 1);
  EXPECT_EQ(grid[0].bucket_cap_mb, 1);
  EXPECT_EQ(grid[0].first_bucket_mb, 0.5);
  std::vector<std::pair<double, double>> at_two;
  std::set<std::string> keys;
  std::set<std::string> files;
  for (const SweepPoint& p : grid) {
    keys.insert(p.key());
    files.insert(point_file_name(p));
    if (p.devices == 2) at_two.emplace_back(p.bucket_cap_mb, p.first_bucket_mb);
  }
  EXPECT_EQ(at_two, (std::vector<std::pair<double, double>>{{1, 0.5}, {1, 1}, {25, 0.5}, {25, 1}}));
  EXPECT_EQ(keys.size(), grid.size());
  EXPECT_EQ(files.size(), grid.size());
  EXPECT_EQ(point_file_name(grid[1]), "dense-100_cpu2_b8_bucket1_first0.5");
  EXPECT_EQ(point_file_name(grid[4]), "dense-100_cpu2_b8");
  EXPECT_EQ(grid[1].label(), "dense-100 cpu:2 batch 8 bucket 1 MB (first 0.5 MB)");
}

// The GPU default sweep runs each model at its own references' batch sizes; other models, and
// every model under strong scaling, take the sweep's.
TEST(SweepGrid, AModelsOwnBatchSizesReplaceTheSweeps) {
  SweepOptions o = tiny("unused.json");
  o.models = {"dense-100", "cifar-cnn"};
  o.batches = {8};
  o.devices = "cpu:1";
  o.model_batches = {{"cifar-cnn", {3, 5}}};
  std::vector<std::pair<std::string, int64_t>> seen;
  for (const SweepPoint& p : sweep_grid(o, resolve_devices(o))) seen.emplace_back(p.model, p.batch);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int64_t>>{
                      {"dense-100", 8}, {"cifar-cnn", 3}, {"cifar-cnn", 5}}));
  o.global_batches = {16};
  for (const SweepPoint& p : sweep_grid(o, resolve_devices(o))) EXPECT_EQ(p.global_batch, 16);
  ASSERT_EQ(kGpuDefaultModels.size(), 2u);
  EXPECT_EQ(kGpuDefaultModels[1].spec, "gpt:preset=small");
}

// A model or batch size given twice is one point: they ran twice, in a report `compare` then
// refuses ("two points for dense-100 cpu:1 batch 10"), where device counts, precisions and
// bucket caps were already taken once each.
TEST(SweepGrid, AModelOrBatchGivenTwiceIsOnePoint) {
  SweepOptions o = tiny("unused.json");
  o.models = {"dense-100", "cifar-cnn", "dense-100"};
  o.batches = {8, 4, 8};
  o.devices = "cpu:1";
  o.model_batches = {{"cifar-cnn", {3, 3}}};
  drop_repeated_values(o);
  std::vector<std::pair<std::string, int64_t>> seen;
  for (const SweepPoint& p : sweep_grid(o, resolve_devices(o))) seen.emplace_back(p.model, p.batch);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int64_t>>{
                      {"dense-100", 8}, {"dense-100", 4}, {"cifar-cnn", 3}}));
  o.global_batches = {16, 16};
  drop_repeated_values(o);
  EXPECT_EQ(o.global_batches, std::vector<int64_t>{16});
}

// Each point's device list is what `train --devices` reads as that count: on the H200 every GPU
// point of 75d88d7 failed, given the old index list "cuda:0" for one GPU.
TEST(SweepGrid, EveryPointsDeviceListReadsBackAsItsCount) {
  for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim, DeviceKind::kCuda}) {
    if (find_backend(kind) == nullptr) continue;  // a build without CUDA has no cuda backend
    SweepOptions o = tiny("unused.json");
    o.oversubscribe = true;
    for (const SweepPoint& p : sweep_grid(o, DeviceAxis{kind, {1, 2, 4}})) {
      const DeviceSpec spec = parse_device_spec(p.device_spec);
      EXPECT_EQ(spec.kind, kind) << p.device_spec;
      EXPECT_EQ(spec.count(), p.devices) << p.device_spec;
    }
  }
}

TEST(Sweep, EveryBucketCapRunsAndTheReportNamesTheBest) {
  SweepOptions o = tiny("buckets.json");
  o.repeats = 1;
  // dense-100's 28 KB of gradients (its layers 26 KB and 2.6 KB): a bucket per layer at
  // 2 KiB caps, one bucket at the default caps.
  o.bucket_caps_mb = {0.002, 25};
  o.first_buckets_mb = {0.002, 1};
  const SweepReport r = run_sweep(o, capture_environment("test"), {});
  ASSERT_EQ(r.points.size(), 5u);
  for (const SweepPoint& p : r.points) ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(r.points[1].bucket_cap_mb, 0.002);
  EXPECT_EQ(r.points[1].first_bucket_mb, 0.002);
  EXPECT_TRUE(r.points[4].default_buckets());
  EXPECT_EQ(r.points[1].bucket_bytes.size(), 2u);
  EXPECT_EQ(r.points[4].bucket_bytes.size(), 1u);
  EXPECT_TRUE(r.points[1].summary.speedup.has_value());  // against the one-device point
  ASSERT_EQ(r.bucket_choices.size(), 1u);
  EXPECT_EQ(r.bucket_choices[0].settings.size(), 4u);
  EXPECT_TRUE(r.bucket_choices[0].reference_is_default);
  // The report's config holds both axes, and a resume of it has nothing left to run.
  EXPECT_EQ(r.config["bucket_cap_mb"], (nlohmann::json{0.002, 25.0}));
  const SweepReport again = run_sweep(o, capture_environment("test"), {}, &r);
  EXPECT_EQ(again.points.size(), 5u);
  EXPECT_EQ(again.points[1].repeats[0].steps[0].step_ms, r.points[1].repeats[0].steps[0].step_ms);
  std::remove(o.output.c_str());
}

TEST(SweepGrid, CompressionIsAnAxisBeyondOneDevice) {
  SweepOptions o = tiny("unused.json");
  o.bucket_caps_mb = {5, 25};
  o.grad_compressions = {"bf16", "none", "fp16", "bf16"};  // none first, each once
  const std::vector<SweepPoint> grid = sweep_grid(o, resolve_devices(o));
  ASSERT_EQ(grid.size(), 1u + 2u * 3u);
  EXPECT_EQ(grid[0].grad_compression, GradCompression::kNone);  // one device casts nothing
  std::vector<std::pair<double, GradCompression>> at_two;
  std::set<std::string> keys;
  std::set<std::string> files;
  for (const SweepPoint& p : grid) {
    keys.insert(p.key());
    files.insert(point_file_name(p));
    if (p.devices == 2) at_two.emplace_back(p.bucket_cap_mb, p.grad_compression);
  }
  using C = GradCompression;
  EXPECT_EQ(at_two, (std::vector<std::pair<double, C>>{{5, C::kNone},
                                                       {5, C::kFp16},
                                                       {5, C::kBf16},
                                                       {25, C::kNone},
                                                       {25, C::kFp16},
                                                       {25, C::kBf16}}));
  EXPECT_EQ(keys.size(), grid.size());
  EXPECT_EQ(files.size(), grid.size());
  EXPECT_EQ(point_file_name(grid[6]), "dense-100_cpu2_b8_bf16");
  EXPECT_EQ(grid[5].label(), "dense-100 cpu:2 batch 8 fp16 gradients");
  EXPECT_EQ(grid[4].key(), "dense-100|cpu|2|weak|8|16|25|1");  // an uncompressed key as before
  o.grad_compressions = {"none", "fp8"};
  EXPECT_CONTAINS(testing_util::error_of([&] { (void)sweep_grid(o, resolve_devices(o)); }),
                  "gradient compression 'fp8': unknown; use none, fp16 or bf16");
}

// Precision is an axis at every device count, one included; a point of the devices' default
// (given or not) keeps the key, file name and label of sweeps before the axis existed.
TEST(SweepGrid, PrecisionIsAnAxisAtEveryDeviceCount) {
  SKIP_WITHOUT_CPU_BF16();
  SweepOptions o = tiny("unused.json");
  o.precisions = {"bf16", "fp32", "bf16"};  // each once, in the order given
  o.grad_compressions = {"none", "bf16"};
  const std::vector<SweepPoint> grid = sweep_grid(o, resolve_devices(o));
  ASSERT_EQ(grid.size(), 2u + 2u * 2u);
  std::vector<std::pair<int, Precision>> axis;
  std::set<std::string> keys;
  std::set<std::string> files;
  for (const SweepPoint& p : grid) {
    axis.emplace_back(p.devices, p.precision);
    EXPECT_EQ(p.precision_default, p.precision == Precision::kFp32);
    keys.insert(p.key());
    files.insert(point_file_name(p));
  }
  using P = Precision;
  EXPECT_EQ(axis, (std::vector<std::pair<int, P>>{{1, P::kBf16},
                                                  {1, P::kFp32},
                                                  {2, P::kBf16},
                                                  {2, P::kBf16},
                                                  {2, P::kFp32},
                                                  {2, P::kFp32}}));
  EXPECT_EQ(keys.size(), grid.size());
  EXPECT_EQ(files.size(), grid.size());
  EXPECT_EQ(point_file_name(grid[0]), "dense-100_cpu1_b8_precision-bf16");
  EXPECT_EQ(point_file_name(grid[3]), "dense-100_cpu2_b8_bf16_precision-bf16");
  EXPECT_EQ(point_file_name(grid[1]), "dense-100_cpu1_b8");
  EXPECT_EQ(grid[0].label(), "dense-100 cpu:1 batch 8 in bf16");
  EXPECT_EQ(grid[4].key(), "dense-100|cpu|2|weak|8|16|25|1");  // the default's key as before
  EXPECT_EQ(grid[2].key(), "dense-100|cpu|2|weak|8|16|25|1|precision bf16");
  o.precisions = {"tf32"};
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }),
                  "cpu devices compute in fp32 or bf16");
}

// The issue's end-to-end check, in one process: two bucket caps × two compressions on
// cpu:1,2; the report compares each compression with none at each cap, and picks a bucket cap
// per compression.
TEST(Sweep, BucketCapsTimesCompressionsRunAndTheReportComparesThem) {
  SweepOptions o = tiny("compression.json");
  o.repeats = 1;
  o.bucket_caps_mb = {0.002, 25};
  o.grad_compressions = {"none", "fp16"};
  const SweepReport r = run_sweep(o, capture_environment("test"), {});
  ASSERT_EQ(r.points.size(), 5u);
  for (const SweepPoint& p : r.points) ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(r.points[2].grad_compression, GradCompression::kFp16);
  EXPECT_EQ(allreduce_bytes(r.points[2].bucket_bytes) * 2,
            allreduce_bytes(r.points[1].bucket_bytes));
  EXPECT_GT(r.points[2].summary.group[Phase::kGradCast], 0.0);
  EXPECT_EQ(r.points[1].summary.group[Phase::kGradCast], 0.0);
  ASSERT_EQ(r.bucket_choices.size(), 2u);  // one per compression
  EXPECT_NE(r.bucket_choices[0].compression, r.bucket_choices[1].compression);
  ASSERT_EQ(r.compression_effects.size(), 2u);  // one per cap
  for (const CompressionEffect& e : r.compression_effects) {
    ASSERT_EQ(e.settings.size(), 2u);
    EXPECT_EQ(e.settings[0].compression, GradCompression::kNone);
    EXPECT_EQ(e.settings[1].compression, GradCompression::kFp16);
    EXPECT_EQ(e.settings[1].bytes_per_step * 2, e.settings[0].bytes_per_step);
    EXPECT_TRUE(e.settings[1].gain.has_value());
    EXPECT_TRUE(e.settings[1].efficiency.has_value());  // against the one-device point
  }
  EXPECT_EQ(r.config["grad_compression"], (nlohmann::json{"none", "fp16"}));
  // Read back: the points keep their compression, and a resume has nothing left to run.
  const SweepReport read = read_sweep_report(o.output);
  EXPECT_EQ(read.points[2].grad_compression, GradCompression::kFp16);
  const SweepReport again = run_sweep(o, capture_environment("test"), {}, &read);
  EXPECT_EQ(again.points.size(), 5u);
  EXPECT_EQ(again.points[2].repeats[0].steps[0].step_ms, r.points[2].repeats[0].steps[0].step_ms);
  std::remove(o.output.c_str());
}

TEST(Sweep, MeasuresEveryPointAndComparesWithOneDevice) {
  SweepOptions o = tiny("measure.json");
  int runs = 0;
  SweepProgress progress;
  progress.on_run = [&](const SweepPoint&, int, int done, int total, double) {
    EXPECT_EQ(done, runs);
    EXPECT_EQ(total, 4);
    ++runs;
  };
  const SweepReport r = run_sweep(o, capture_environment("test"), progress);
  EXPECT_EQ(runs, 4);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_TRUE(r.complete);
  for (const SweepPoint& p : r.points) {
    ASSERT_TRUE(p.ok()) << p.error;
    ASSERT_EQ(p.repeats.size(), 2u);
    for (const RepeatRecord& rep : p.repeats) {
      EXPECT_EQ(rep.steps.size(), 4u);  // measured steps only
      EXPECT_GE(rep.warmup_steps, 1);
      EXPECT_LE(rep.warmup_steps, 6);
      for (const StepRecord& s : rep.steps) EXPECT_EQ(s.replicas.size(), size_t(p.devices));
    }
    EXPECT_EQ(p.global_batch, 8 * p.devices);
    EXPECT_GT(p.peak_memory_bytes, 7114 * 4);  // at least the weights
    ASSERT_TRUE(p.summary.speedup.has_value());
    EXPECT_NEAR(p.summary.efficiency->value, p.summary.speedup->value / p.devices, 1e-12);
  }
  // The baseline's speedup against itself is exactly 1.
  EXPECT_DOUBLE_EQ(r.points[0].summary.speedup->value, 1.0);
  ASSERT_TRUE(r.points[1].summary.loss.has_value());
  const LossBreakdown& l = *r.points[1].summary.loss;
  EXPECT_NEAR(std::accumulate(l.shares.begin(), l.shares.end(), 0.0), l.lost, 1e-9);
  // The speedup is throughput at 2 over throughput at 1.
  EXPECT_NEAR(r.points[1].summary.speedup->value,
              r.points[1].summary.throughput.value / r.points[0].summary.throughput.value, 1e-9);

  // The file holds the same samples, and re-reading recomputes the same analysis.
  const SweepReport back = read_sweep_report(o.output);
  ASSERT_EQ(back.points.size(), 2u);
  EXPECT_EQ(back.points[1].repeats[1].steps[3].replicas[1][Phase::kBackward],
            r.points[1].repeats[1].steps[3].replicas[1][Phase::kBackward]);
  EXPECT_DOUBLE_EQ(back.points[1].summary.speedup->value, r.points[1].summary.speedup->value);
  EXPECT_EQ(back.environment, r.environment);
  std::remove(o.output.c_str());
}

// --profile-layers in a sweep: every point keeps replica 0's layers, their times the mean of
// the point's repeats, written, read back and listed under the tables.
TEST(Sweep, EveryPointKeepsItsLayerProfile) {
  SweepOptions o = tiny("layers.json");
  o.train.profile_layers = true;
  const SweepReport r = run_sweep(o, capture_environment("test"), {});
  ASSERT_EQ(r.points.size(), 2u);
  for (const SweepPoint& p : r.points) {
    ASSERT_TRUE(p.ok()) << p.error;
    ASSERT_EQ(p.layer_profile.size(), 3u) << p.label();  // dense, ReLU, dense
    EXPECT_EQ(p.layer_profile[0].layer_name, "Dense(64)");
    EXPECT_GT(p.layer_profile[0].backward_ms, 0.0);
    EXPECT_EQ(p.layer_profile[0].forward_flops, 8 * (2 * 100 * 64 + 64));
  }
  const SweepReport back = read_sweep_report(o.output);
  ASSERT_EQ(back.points[1].layer_profile.size(), 3u);
  EXPECT_EQ(back.points[1].layer_profile[2].backward_ms, r.points[1].layer_profile[2].backward_ms);
  const std::string tables = format_sweep_tables(back);
  EXPECT_CONTAINS(tables, "slowest layers of replica 0 per point");
  EXPECT_CONTAINS(tables, "dense-100 cpu:2 batch 8: #");
  std::remove(o.output.c_str());
}

TEST(Sweep, AFailingPointIsRecordedAndTheSweepGoesOn) {
  SweepOptions o = tiny("fail.json");
  o.devices = "cpu:1";
  o.repeats = 1;
  // 0.5 MiB holds dense-100 at batch 8 but not its activations at batch 2000.
  o.batches = {2000, 8};
  o.train.memory_limit_mb = 0.5;
  const SweepReport r = run_sweep(o, capture_environment("test"), {});
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_FALSE(r.points[0].ok());
  EXPECT_CONTAINS(r.points[0].error, "out of memory");
  // What the batch would need, and no source line of ours: a finding, not a fault.
  EXPECT_CONTAINS(r.points[0].error, "plans a peak of");
  EXPECT_EQ(r.points[0].error.find(".cpp:"), std::string::npos) << r.points[0].error;
  EXPECT_TRUE(r.points[0].repeats.empty());
  EXPECT_TRUE(r.points[1].ok()) << r.points[1].error;
  const SweepReport back = read_sweep_report(o.output);
  EXPECT_EQ(back.points[0].status, "failed");
  EXPECT_EQ(back.points[0].error, r.points[0].error);
  std::remove(o.output.c_str());
}

TEST(Sweep, ResumingWithAnotherGridKeepsThePointsAlreadyMeasured) {
  SweepOptions o = tiny("regrid.json");
  o.repeats = 1;
  const SweepReport first = run_sweep(o, capture_environment("test"), {});
  o.batches = {16};  // a different grid: the batch-8 points are not in it
  const SweepReport second = run_sweep(o, capture_environment("test"), {}, &first);
  ASSERT_EQ(second.points.size(), 4u);
  EXPECT_EQ(second.points[0].key(), first.points[0].key());
  EXPECT_EQ(second.points[0].repeats[0].steps[0].step_ms,
            first.points[0].repeats[0].steps[0].step_ms);
  EXPECT_EQ(read_sweep_report(o.output).points.size(), 4u);
  std::remove(o.output.c_str());
}

TEST(Sweep, AKilledSweepKeepsItsFinishedPointsAndResumes) {
  const std::string report = temp_path("killed.json");
  const std::string log = temp_path("killed.log");
  std::remove(report.c_str());
  const pid_t pid = testing_util::start_long_sweep(report, log);
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the sweep finished before it could be killed";

  // Whatever moment the kill hit, the file is a whole report of the finished points.
  const SweepReport killed = read_sweep_report(report);
  ASSERT_GE(killed.points.size(), 2u);
  ASSERT_LT(killed.points.size(), 6u);
  EXPECT_FALSE(killed.complete);
  for (const SweepPoint& p : killed.points) EXPECT_TRUE(p.ok()) << p.error;

  // --resume runs only what is missing and keeps what was there, sample for sample.
  std::string output;
  const std::string command =
      std::string(SCALESCOPE_BINARY) + " sweep --resume " + report + " -q 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  ASSERT_EQ(pclose(pipe), 0) << output;
  const SweepReport resumed = read_sweep_report(report);
  EXPECT_TRUE(resumed.complete);
  ASSERT_EQ(resumed.points.size(), 6u) << output;
  for (size_t i = 0; i < killed.points.size(); ++i) {
    EXPECT_EQ(resumed.points[i].key(), killed.points[i].key());
    EXPECT_EQ(resumed.points[i].repeats[0].steps[0].step_ms,
              killed.points[i].repeats[0].steps[0].step_ms);
  }
  EXPECT_EQ(resumed.created, killed.created);
  std::remove(report.c_str());
  std::remove(log.c_str());
}

}  // namespace
}  // namespace scalescope
