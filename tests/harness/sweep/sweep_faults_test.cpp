// Faults a sweep meets in the field: Ctrl-C, a data file cut short while it runs, a report
// directory it cannot write, a disk that fills. Each keeps the results already finished and
// says what happened.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/fs.h"
#include "core/interrupt.h"
#include "harness/sweep/sweep.h"
#include "harness/telemetry/environment.h"
#include "harness/trainer/trainer.h"
#include "tests/harness/sweep/sweep_test_util.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

using testing_util::temp_path;

// One repeat per point.
SweepOptions two_points(const std::string& name) {
  SweepOptions o = testing_util::tiny(name);
  o.repeats = 1;
  o.max_warmup_steps = 4;
  std::filesystem::remove(o.output);
  return o;
}

TEST(SweepFaults, AnInterruptStopsTheSweepAndKeepsItsFinishedPoints) {
  SweepOptions o = two_points("interrupted.json");
  SweepProgress progress;
  progress.on_point_done = [](const SweepPoint&) { request_interrupt(SIGINT); };
  try {
    run_sweep(o, capture_environment("test"), progress);
    FAIL() << "the sweep did not stop";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.exit_status(), 130);
    EXPECT_CONTAINS(e.what(), "its 1 finished point is in " + o.output);
  }
  clear_interrupt();
  const SweepReport kept = read_sweep_report(o.output);
  ASSERT_EQ(kept.points.size(), 1u);
  EXPECT_TRUE(kept.points[0].ok()) << kept.points[0].error;
  EXPECT_FALSE(kept.complete);
  std::filesystem::remove(o.output);
}

TEST(SweepFaults, AnInterruptStopsEveryReplicaAtTheNextStep) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:2";
  o.batch = 8;
  o.steps = 200;
  o.threads = 1;
  o.eval = false;
  TrainHooks hooks;
  int64_t last_step = 0;
  hooks.on_step = [&](const StepRecord& r) { last_step = r.step; };
  hooks.after_step = [](int rank, int64_t step, std::span<float>) {
    if (rank == 0 && step == 3) request_interrupt(SIGINT);
  };
  const std::string error = error_of([&] { train(o, hooks); });
  clear_interrupt();
  EXPECT_CONTAINS(error, "interrupted by SIGINT: training stopped before step 4");
  EXPECT_EQ(last_step, 3);  // replica 0 records its steps; none after the signal
}

// An IDX file: big-endian magic and dimensions, then the bytes.
void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
               size_t bytes) {
  std::string data;
  const auto big_endian = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) data.push_back(static_cast<char>((v >> s) & 0xff));
  };
  big_endian(magic);
  for (uint32_t v : dims) big_endian(v);
  for (size_t i = 0; i < bytes; ++i) data.push_back(static_cast<char>(i % 10));  // labels < 10
  write_file_atomic(path, data);
}

TEST(SweepFaults, ADataFileCutShortWhileTheSweepRunsFailsThePointNamingTheFile) {
  const std::string dir = temp_path("idx");
  std::filesystem::create_directories(dir);
  for (const char* split : {"train", "t10k"}) {
    const uint32_t n = 64;
    write_idx(fmt::format("{}/{}-images-idx3-ubyte", dir, split), 0x803, {n, 28, 28}, n * 784);
    write_idx(fmt::format("{}/{}-labels-idx1-ubyte", dir, split), 0x801, {n}, n);
  }
  SweepOptions o = two_points("truncated.json");
  o.models = {"cifar-cnn"};  // takes the data's 28x28x1 images
  o.train.data.spec = "idx:" + dir;
  o.train.eval = false;
  const std::string images = dir + "/train-images-idx3-ubyte";
  SweepProgress progress;
  progress.on_point_done = [&](const SweepPoint&) { std::filesystem::resize_file(images, 5000); };
  const SweepReport r = run_sweep(o, capture_environment("test"), progress);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_TRUE(r.points[0].ok()) << r.points[0].error;
  EXPECT_FALSE(r.points[1].ok());
  EXPECT_CONTAINS(r.points[1].error, "idx file '" + images + "': truncated");
  EXPECT_TRUE(r.complete);  // the sweep went on to its end
  EXPECT_EQ(read_sweep_report(o.output).points.size(), 2u);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(o.output);
}

std::string read_log(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SweepFaults, AReportDirectoryThatTakesNoFilesIsRefusedBeforeAnyWork) {
  const std::string log = temp_path("readonly.log");
  const std::vector<std::string> args = {
      SCALESCOPE_BINARY, "sweep",   "--models", "dense-100", "--devices",
      "cpu:1",           "--steps", "4",        "-o",        "/sys/scalescope-report.json"};
  EXPECT_EQ(testing_util::wait_for(testing_util::spawn(args, log)), 1);
  const std::string out = read_log(log);
  EXPECT_CONTAINS(out, "--output /sys/scalescope-report.json");
  EXPECT_CONTAINS(out, "cannot create files in directory '/sys'");
  EXPECT_EQ(out.find("done:"), std::string::npos) << out;  // no point ran
  const std::vector<std::string> train = {SCALESCOPE_BINARY, "train",  "--model",
                                          "dense-100",       "--save", "/sys/w.safetensors"};
  EXPECT_EQ(testing_util::wait_for(testing_util::spawn(train, log)), 1);
  EXPECT_CONTAINS(read_log(log), "cannot create files in directory '/sys'");
  EXPECT_EQ(read_log(log).find("loss"), std::string::npos) << read_log(log);  // no step ran
  std::filesystem::remove(log);
}

TEST(SweepFaults, ADiskThatFillsKeepsThePreviousReportWhole) {
  const std::string report = temp_path("full.json");
  const std::string log = temp_path("full.log");
  std::filesystem::remove(report);
  const std::vector<std::string> first = {SCALESCOPE_BINARY,
                                          "sweep",
                                          "--models",
                                          "dense-100",
                                          "--devices",
                                          "cpu:1",
                                          "--batch",
                                          "8",
                                          "-q",
                                          "--repeats",
                                          "1",
                                          "--steps",
                                          "4",
                                          "-o",
                                          report};
  ASSERT_EQ(testing_util::wait_for(testing_util::spawn(first, log)), 0) << read_log(log);
  const std::string before = read_file(report);
  // A second batch size: the report with two points no longer fits in what the first took.
  const std::vector<std::string> more = {SCALESCOPE_BINARY, "sweep", "--resume", report,
                                         "--batch",         "8,16",  "-q"};
  EXPECT_EQ(testing_util::wait_for(testing_util::spawn(more, log, before.size())), 1);
  EXPECT_CONTAINS(read_log(log), "cannot write '" + report + "': File too large");
  EXPECT_EQ(read_file(report), before);  // byte for byte
  EXPECT_EQ(testing_util::points_in(report), 1);
  std::filesystem::remove(report);
  std::filesystem::remove(log);
}

TEST(SweepFaults, CtrlCStopsTheSweepKeepsItsPointsAndExitsWith130) {
  const std::string report = temp_path("sigint.json");
  const std::string log = temp_path("sigint.log");
  std::filesystem::remove(report);
  const pid_t pid = testing_util::start_long_sweep(report, log);
  ASSERT_GT(pid, 0);
  const auto sent = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  // No timing assertion (sanitizer builds are slow): a run that does not stop is caught by
  // the test's timeout; the time it took is printed for the record.
  const int status = testing_util::wait_for(pid);
  const double stop_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count();
  std::printf("stopped %.0f ms after SIGINT\n", stop_ms);
  RecordProperty("stop_ms", static_cast<int>(stop_ms));
  ASSERT_EQ(status, 130) << read_log(log);
  EXPECT_CONTAINS(read_log(log), "interrupted by SIGINT: the sweep stopped; its ");
  const SweepReport kept = read_sweep_report(report);
  ASSERT_GE(kept.points.size(), 2u);
  EXPECT_LT(kept.points.size(), 6u);
  EXPECT_FALSE(kept.complete);
  for (const SweepPoint& p : kept.points) EXPECT_TRUE(p.ok()) << p.error;
  std::filesystem::remove(report);
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace scalescope
