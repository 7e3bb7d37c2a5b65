// The Chrome trace of constructed steps: what every trace satisfies, and where each phase
// lands (its track, its start, its NVTX category).
#include "reports/writers/trace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fs.h"
#include "core/nvtx.h"
#include "tests/reports/trace_checks.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// Two replicas, three steps of 10 ms from t = 100 ms, 20 ms apart; two buckets each, hidden
// behind backward but for the exposed 0.5 ms; a copy of 3.5 ms from 3 ms before the step,
// of which the step waited 0.5 ms.
std::vector<StepRecord> constructed_steps() {
  std::vector<StepRecord> steps;
  for (int i = 0; i < 3; ++i) {
    StepRecord s;
    s.step = i + 1;
    for (int r = 0; r < 2; ++r) {
      PhaseTimes p;
      p.start_ms = 100.0 + 20.0 * i;
      p[Phase::kInput] = 1.0 + r;
      p[Phase::kH2D] = 0.5;
      p[Phase::kH2DTotal] = 3.5;
      p.copy = {p.start_ms - 3.0, 3.5};
      p[Phase::kForward] = 2.0;
      p[Phase::kBackward] = 4.0;
      p[Phase::kAllReduce] = 3.0;
      p[Phase::kAllReduceExposed] = 0.5;
      p[Phase::kOptimizer] = 1.0;
      p.step_ms = p.exposed_sum_ms();
      p.buckets = {{p.start_ms + 5.0, 1.0}, {p.start_ms + 6.0, 2.0}};
      s.replicas.push_back(p);
    }
    set_group_times(s);
    steps.push_back(s);
  }
  return steps;
}

const nlohmann::json* event(const nlohmann::json& trace, int pid, const std::string& name) {
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == pid && e["name"] == name) return &e;
  }
  return nullptr;
}

TEST(ChromeTrace, ConstructedStepsAreValidTraceEvents) {
  const std::vector<StepRecord> steps = constructed_steps();
  testing_util::expect_trace_of(chrome_trace(steps, {"test", {1024, 4096}}), steps);
}

TEST(ChromeTrace, ExposedPhasesRunBackToBackOnTheirTracks) {
  const StepRecord first = constructed_steps()[0];
  const nlohmann::json trace = chrome_trace({first}, {"point", {1024, 4096}});
  EXPECT_EQ(trace["otherData"]["point"], "point");
  // Replica 1 waits 2 ms for input from 100 ms, copies, then computes from 102.5 ms.
  double t = 100.0;
  for (const PhaseDef& d : kPhases) {
    if (!d.exposed) continue;
    const nlohmann::json* e = event(trace, 1, d.label);
    ASSERT_NE(e, nullptr) << d.label;
    EXPECT_EQ((*e)["tid"], trace_thread(d.track)) << d.label;
    EXPECT_EQ((*e)["cat"], nvtx::category(d.phase).name) << d.label;
    EXPECT_DOUBLE_EQ((*e)["ts"].get<double>(), t * 1e3) << d.label;
    t += first.replicas[1][d.phase];
  }
  EXPECT_DOUBLE_EQ((*event(trace, 1, "forward"))["ts"].get<double>(), 102.5e3);
  // The compute stream's wait for the copy is on the compute track; the copy itself, which
  // began during the step before, on the copy track.
  EXPECT_EQ((*event(trace, 1, "exposed host-to-device copy"))["tid"], 3);
  const nlohmann::json* copy = event(trace, 1, "host-to-device copy");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ((*copy)["tid"], 2);
  EXPECT_DOUBLE_EQ((*copy)["ts"].get<double>(), 97e3);
  EXPECT_DOUBLE_EQ((*copy)["dur"].get<double>(), 3.5e3);
  EXPECT_EQ((*event(trace, 1, "exposed all-reduce"))["tid"], 3);
  // The total all-reduce is its buckets, on the communication track, with their bytes.
  const nlohmann::json* bucket = event(trace, 0, "allreduce bucket 1");
  ASSERT_NE(bucket, nullptr);
  EXPECT_EQ((*bucket)["tid"], 4);
  EXPECT_EQ((*bucket)["cat"], "allreduce");
  EXPECT_DOUBLE_EQ((*bucket)["ts"].get<double>(), 106e3);
  EXPECT_DOUBLE_EQ((*bucket)["dur"].get<double>(), 2e3);
  EXPECT_EQ((*bucket)["args"]["bytes"], 4096);
  EXPECT_EQ(event(trace, 0, "all-reduce"), nullptr);
  // The step encloses its phases on the compute track.
  const nlohmann::json* step = event(trace, 1, "step 1");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ((*step)["tid"], 3);
  EXPECT_EQ((*step)["cat"], "step");
  EXPECT_DOUBLE_EQ((*step)["dur"].get<double>(), 10e3);
}

// Found by tests/fuzz (trace_escape): a label that is not UTF-8 (the model spec as typed) made
// writing the trace throw nlohmann's type_error 316; its bad bytes are now replaced.
TEST(ChromeTrace, ALabelThatIsNotUtf8StillGivesValidJson) {
  const std::vector<StepRecord> steps = constructed_steps();
  const nlohmann::json back =
      nlohmann::json::parse(chrome_trace_text(steps, {"m\xff \"q\" \\ \x01 \xc3", {1024, 4096}}));
  EXPECT_EQ(back["otherData"]["point"], "m\ufffd \"q\" \\ \x01 \ufffd");
  const std::string path = testing::TempDir() + "/trace_not_utf8.json";
  write_chrome_trace(path, steps, {"\xe2\x9c", {}});
  EXPECT_EQ(nlohmann::json::parse(read_file(path))["otherData"]["point"], "\ufffd");
}

TEST(ChromeTrace, WrittenAtomically) {
  const std::vector<StepRecord> steps = constructed_steps();
  const std::string path = testing::TempDir() + "/trace_test.json";
  write_chrome_trace(path, steps, {"test", {1024, 4096}});
  EXPECT_EQ(nlohmann::json::parse(read_file(path)), chrome_trace(steps, {"test", {1024, 4096}}));
  EXPECT_CONTAINS(testing_util::error_of([&] {
                    write_chrome_trace(testing::TempDir() + "/missing/t.json", steps, {});
                  }),
                  "missing/t.json");
}

}  // namespace
}  // namespace scalescope
