// The Chrome trace of a real 2-replica run: what every trace satisfies
// (tests/reports/trace_checks.h), on the times the trainer measured.
#include <gtest/gtest.h>

#include "harness/trainer/trainer.h"
#include "reports/writers/trace.h"
#include "tests/reports/trace_checks.h"

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
  testing_util::expect_trace_of(chrome_trace(steps, {"test", run.bucket_bytes}), steps);
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
