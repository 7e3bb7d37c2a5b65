// The Chrome trace of a real 2-replica run: valid Trace Event Format, one process per replica,
// tracks in order, and the events of each step matching the run's phase times.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "harness/trainer/trainer.h"
#include "reports/trace.h"

namespace scalescope {
namespace {

TEST(ChromeTrace, ARunsStepsAsValidTraceEvents) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = "cpu:2";
  o.batch = 8;
  o.steps = 6;
  o.eval = false;
  o.first_bucket_mb = 0.01;  // several buckets
  const RunReport run = train(o);
  const std::vector<StepRecord> steps(run.steps.begin() + 2, run.steps.end());
  const nlohmann::json trace = chrome_trace(steps, {"test", run.bucket_bytes});
  ASSERT_TRUE(trace["traceEvents"].is_array());

  std::map<std::pair<int, int>, std::vector<const nlohmann::json*>> tracks;
  std::set<int> processes;
  // Per (replica, step, phase name): summed duration, µs.
  std::map<std::tuple<int, int64_t, std::string>, double> durations;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    for (const char* key : {"name", "ph", "pid", "tid"}) ASSERT_TRUE(e.contains(key)) << e;
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") processes.insert(e["pid"].get<int>());
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e["args"].contains("step")) << e;
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
    EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
    const int pid = e["pid"].get<int>();
    const int64_t step = e["args"]["step"].get<int64_t>();
    std::string name = e["name"];
    if (name.starts_with("allreduce bucket")) {
      EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0);
      name = "bucket";
    }
    if (!name.starts_with("step")) tracks[{pid, e["tid"].get<int>()}].push_back(&e);
    durations[{pid, step, name}] += e["dur"].get<double>();
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1}));
  // Every track's events (the enclosing step events aside) follow one another without
  // overlapping.
  for (auto& [track, events] : tracks) {
    for (size_t i = 1; i < events.size(); ++i) {
      const double end =
          (*events[i - 1])["ts"].get<double>() + (*events[i - 1])["dur"].get<double>();
      EXPECT_LE(end, (*events[i])["ts"].get<double>() + 1e-3)
          << "overlap on pid " << track.first << " tid " << track.second;
    }
  }
  // The events of a step are the run's phase times.
  for (const StepRecord& s : steps) {
    for (int r = 0; r < 2; ++r) {
      const PhaseTimes& p = s.replicas[static_cast<size_t>(r)];
      const auto us = [&](const char* name) { return durations[{r, s.step, name}]; };
      EXPECT_NEAR(us("forward"), p[Phase::kForward] * 1e3, 1e-6);
      EXPECT_NEAR(us("backward"), p[Phase::kBackward] * 1e3, 1e-6);
      EXPECT_NEAR(us("exposed all-reduce"), p[Phase::kAllReduceExposed] * 1e3, 1e-6);
      EXPECT_NEAR(us("optimizer"), p[Phase::kOptimizer] * 1e3, 1e-6);
      EXPECT_NEAR(us("input") + us("host-to-device copy"), p.exposed_ms(PhaseKind::kInput) * 1e3,
                  1e-6);
      EXPECT_NEAR(us("bucket"), p[Phase::kAllReduce] * 1e3, 1e-3);
      const double step_us =
          durations[std::make_tuple(r, s.step, "step " + std::to_string(s.step))];
      EXPECT_NEAR(step_us, p.step_ms * 1e3, 1e-6);
    }
  }
  // Steps follow one another in time on each replica.
  for (size_t i = 1; i < steps.size(); ++i) {
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_GE(steps[i].replicas[r].start_ms,
                steps[i - 1].replicas[r].start_ms + steps[i - 1].replicas[r].step_ms - 1e-6);
    }
  }
}

}  // namespace
}  // namespace scalescope
