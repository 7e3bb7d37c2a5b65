// The step timer on a CPU device, whose events read the clock when recorded.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/clock.h"
#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "harness/trainer/step_timer.h"

namespace scalescope {
namespace {

void busy_for(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(StepTimer, PhasesAddUpToTheStepAndRepeatedOnesAccumulate) {
  CpuDevice device(0, 1);
  Stream& stream = device.default_stream();
  // The run began 100 ms ago: the steps start at least that late on its clock.
  const ClockAnchor clock(device, stream, now_ns() - 100'000'000);
  StepTimer timer(device, stream, 6, clock);
  for (int step = 1; step <= 2; ++step) {
    timer.start();
    {
      const auto p = timer.phase(Phase::kInput, step);
      busy_for(std::chrono::microseconds(300));
    }
    { const auto p = timer.phase(Phase::kH2D, step); }
    for (int m = 0; m < 2; ++m) {
      {
        const auto p = timer.phase(Phase::kForward, step);
        busy_for(std::chrono::microseconds(500));
      }
      const auto p = timer.phase(Phase::kBackward, step);
      busy_for(std::chrono::microseconds(200));
    }
    timer.end();
    ReduceTimes reduced;
    reduced.total_ms = 7.0;
    reduced.bucket_ms = {3.0, 4.0};
    reduced.start_ms = {1.0, 2.0};
    PhaseTimes p = timer.read(reduced);
    // Each phase is at least the time spent inside it; the two forwards add up.
    EXPECT_GE(p[Phase::kInput], 0.3);
    EXPECT_GE(p[Phase::kForward], 1.0);
    EXPECT_GE(p[Phase::kBackward], 0.4);
    EXPECT_EQ(p[Phase::kAllReduce], 7.0);  // the reducer's, not a mark
    // The phases tile the step from its start to the last mark; only the moment between the
    // last mark and the end event is left out, well within DESIGN.md's 2% (an absolute bound
    // failed under ThreadSanitizer, where that moment took a microsecond).
    EXPECT_LE(p.exposed_sum_ms(), p.step_ms);
    EXPECT_NEAR(p.exposed_sum_ms(), p.step_ms, 0.02 * p.step_ms);
    EXPECT_GE(p.start_ms, 100.0);
    ASSERT_EQ(p.buckets.size(), 2u);
    EXPECT_EQ(p.buckets[1].start_ms, 2.0);
    EXPECT_EQ(p.buckets[1].ms, 4.0);
  }
}

// A timer of one phase per step, started.
struct OnePhaseTimer {
  CpuDevice device{0, 1};
  ClockAnchor clock{device, device.default_stream(), now_ns()};
  std::unique_ptr<StepTimer> timer;
  OnePhaseTimer() {
    timer = std::make_unique<StepTimer>(device, device.default_stream(), 1, clock);
    timer->start();
  }
};

// Device times onto the host clock, anchored once and again later.
TEST(ClockAnchor, PutsEventsOnTheRunsClockAndReanchors) {
  CpuDevice device(0, 1);
  Stream& stream = device.default_stream();
  const int64_t epoch = now_ns();
  ClockAnchor clock(device, stream, epoch);
  busy_for(std::chrono::microseconds(2000));
  const std::unique_ptr<Event> e = device.create_event();
  e->record(stream);
  const double expected = static_cast<double>(now_ns() - epoch) * 1e-6;
  EXPECT_NEAR(clock.host_ms(*e), expected, 0.5);
  EXPECT_GE(clock.host_ms(*e), 2.0);
  EXPECT_FALSE(clock.refresh(std::chrono::minutes(1)));  // anchored just now
  EXPECT_TRUE(clock.refresh(std::chrono::milliseconds(0)));
  EXPECT_NEAR(clock.host_ms(*e), expected, 0.5);  // the same instant, from the new anchor
}

TEST(StepTimer, MorePhasesThanPlannedIsAnError) {
  OnePhaseTimer one;
  StepTimer& timer = *one.timer;
  { const auto p = timer.phase(Phase::kInput, 1); }
  EXPECT_THROW({ const auto p = timer.phase(Phase::kH2D, 1); }, Error);
}

// The ends counted from the phase table are what Replica::step records: a step of two
// micro-batches, each with two sync points (a batch norm's one in forward and one in
// backward), fits exactly, and one more phase does not.
TEST(StepTimer, TheTablesCountIsWhatAStepRecords) {
  CpuDevice device(0, 1);
  Stream& stream = device.default_stream();
  const ClockAnchor clock(device, stream, now_ns());
  const int micro_batches = 2;
  StepTimer timer(device, stream, StepTimer::ends_per_step(micro_batches, 2 * micro_batches),
                  clock);
  timer.start();
  { const auto p = timer.phase(Phase::kInput, 1); }
  { const auto p = timer.phase(Phase::kH2D, 1); }
  for (int m = 0; m < micro_batches; ++m) {
    {
      const auto p = timer.phase(Phase::kForward, 1);
      timer.split(Phase::kForward, Phase::kBatchNormSync, 1, [] {});
    }
    const auto p = timer.phase(Phase::kBackward, 1);
    timer.split(Phase::kBackward, Phase::kBatchNormSync, 1, [] {});
  }
  { const auto p = timer.phase(Phase::kAllReduceExposed, 1); }
  { const auto p = timer.phase(Phase::kOptimizer, 1); }
  EXPECT_THROW({ const auto p = timer.phase(Phase::kOptimizer, 1); }, Error);
  timer.end();
  EXPECT_EQ(StepTimer::ends_per_step(1, 0), 6);
}

TEST(StepTimer, APhaseLeftByAnExceptionRecordsNothing) {
  OnePhaseTimer one;
  StepTimer& timer = *one.timer;
  EXPECT_THROW(
      {
        const auto p = timer.phase(Phase::kInput, 1);
        throw std::runtime_error("failed");
      },
      std::runtime_error);
  // The one mark is still free.
  { const auto p = timer.phase(Phase::kH2D, 1); }
  timer.end();
  PhaseTimes p = timer.read({});
  EXPECT_GE(p[Phase::kH2D], 0.0);
}

}  // namespace
}  // namespace scalescope
