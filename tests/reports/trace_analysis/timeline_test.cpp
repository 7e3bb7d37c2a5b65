#include "reports/trace_analysis/timeline.h"

#include <gtest/gtest.h>

#include "reports/trace_analysis/classify.h"
#include "tests/reports/trace_analysis/trace_builders.h"
#include "tests/test_util.h"

namespace scalescope::traces {
namespace {

using fixtures::act;
using fixtures::rank_trace;
using testing_util::error_of;
using K = ActivityKind;

constexpr const char* kNext = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";

void expect_adds_up(const StepBreakdown& s) {
  EXPECT_NEAR(s.exclusive_sum_ms(), s.step_ms, 1e-9);
}

// A CPU DDP step as Kineto records it: the training thread (lane 1) and Gloo's (lane 2).
TEST(Timeline, HostTimelineCountsTheInnermostWorkOnce) {
  const RankTrace t = rank_trace({
      act("ProfilerStep#7", K::kAnnotation, 0, 100),
      act(kNext, K::kAnnotation, 0, 10),
      act("aten::stack", K::kHostOp, 2, 8),  // inside __next__: input, not compute
      act("DistributedDataParallel.forward", K::kAnnotation, 10, 40),
      act("aten::conv2d", K::kHostOp, 12, 38),
      act("autograd::engine::evaluate_function: ConvolutionBackward0", K::kHostOp, 40, 70),
      act("c10d::allreduce_", K::kHostOp, 60, 65),  // the training thread waits in it
      act("Optimizer.step#SGD.step", K::kAnnotation, 80, 90),
      act("aten::add_", K::kHostOp, 81, 89),
      act("gloo:all_reduce", K::kAnnotation, 66, 78, 2),  // partly behind backward
      // Gloo's thread finishing the step before's while the training thread loads data: the
      // step spends that time loading data.
      act("gloo:all_reduce", K::kAnnotation, -20, 5, 2),
  });
  const std::vector<StepBreakdown> b = break_down(t, find_steps(t, ""));
  ASSERT_EQ(b.size(), 1u);
  const StepBreakdown& s = b[0];
  EXPECT_EQ(s.step, 7);
  EXPECT_DOUBLE_EQ(s.step_ms, 0.100);
  EXPECT_DOUBLE_EQ(s.input_ms, 0.010);
  EXPECT_DOUBLE_EQ(s.forward_ms, 0.030);
  EXPECT_DOUBLE_EQ(s.backward_ms, 0.025);
  EXPECT_DOUBLE_EQ(s.optimizer_ms, 0.010);
  EXPECT_DOUBLE_EQ(s.communication_ms, 0.017);          // Gloo's: 0..5 and 66..78
  EXPECT_DOUBLE_EQ(s.communication_exposed_ms, 0.013);  // 60..65 and 70..78
  EXPECT_DOUBLE_EQ(s.idle_ms, 0.012);
  EXPECT_DOUBLE_EQ(s.h2d_ms, 0.0);
  expect_adds_up(s);
}

// A GPU step: kernels take the phase of the host call that launched them; NCCL hides behind
// compute; the host loading data leaves the device waiting.
TEST(Timeline, DeviceTimelineTakesPhasesFromTheLaunches) {
  const RankTrace t = rank_trace({
      act("ProfilerStep#3", K::kAnnotation, 0, 100),
      act(kNext, K::kAnnotation, 0, 20),
      act("aten::mm", K::kHostOp, 24, 27),  // host ops are no device work
      act("cudaLaunchKernel", K::kRuntime, 25, 26, 1, 1),
      act("autograd::engine::evaluate_function: MmBackward0", K::kHostOp, 30, 50, 2),
      act("cudaLaunchKernel", K::kRuntime, 31, 32, 2, 2),
      act("Optimizer.step#SGD.step", K::kAnnotation, 60, 70),
      act("cudaLaunchKernel", K::kRuntime, 61, 62, 1, 3),
      act("Memcpy HtoD (Pageable -> Device)", K::kMemcpy, 21, 24, 7),
      act("void gemm_kernel<float>", K::kKernel, 27, 45, 7, 1),
      act("sgemm_backward", K::kKernel, 46, 80, 7, 2),
      act("multi_tensor_apply_kernel", K::kKernel, 85, 90, 7, 3),
      act("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", K::kKernel, 70, 84, 20),
      act("Memset (Device)", K::kMemset, 90, 92, 7),
  });
  ASSERT_TRUE(t.has_device());
  const StepBreakdown s = break_down(t, find_steps(t, ""))[0];
  EXPECT_DOUBLE_EQ(s.forward_ms, 0.018);
  EXPECT_DOUBLE_EQ(s.backward_ms, 0.034);
  EXPECT_DOUBLE_EQ(s.optimizer_ms, 0.005);
  EXPECT_DOUBLE_EQ(s.communication_ms, 0.014);
  EXPECT_DOUBLE_EQ(s.communication_exposed_ms, 0.004);
  EXPECT_DOUBLE_EQ(s.h2d_ms, 0.003);
  EXPECT_DOUBLE_EQ(s.h2d_exposed_ms, 0.003);
  EXPECT_DOUBLE_EQ(s.copy_exposed_ms, 0.002);
  EXPECT_DOUBLE_EQ(s.input_ms, 0.020);
  EXPECT_DOUBLE_EQ(s.idle_ms, 0.014);
  EXPECT_DOUBLE_EQ(s.busy_ms(), 0.066);
  expect_adds_up(s);
}

// Back-to-back ranges that overlap by a rounding error stay siblings; a child that outlasts its
// parent by one stays its child.
TEST(Timeline, RangesThatOverlapByARoundingErrorKeepTheirTime) {
  const RankTrace t = rank_trace({
      act("ProfilerStep#1", K::kAnnotation, 0, 100),
      act(kNext, K::kAnnotation, 0, 10),
      act("aten::stack", K::kHostOp, 2, 10.000001),
      act("DistributedDataParallel.forward", K::kAnnotation, 10, 50.000001),
      act("autograd::engine::evaluate_function: MmBackward0", K::kHostOp, 50, 90),
  });
  const StepBreakdown s = break_down(t, find_steps(t, ""))[0];
  EXPECT_NEAR(s.input_ms, 0.010, 1e-9);
  EXPECT_NEAR(s.forward_ms, 0.040, 1e-9);
  EXPECT_NEAR(s.backward_ms, 0.040, 1e-9);
}

TEST(Timeline, WorkCountsInTheStepItRanIn) {
  const RankTrace t = rank_trace({
      act("ProfilerStep#1", K::kAnnotation, 0, 50), act("ProfilerStep#2", K::kAnnotation, 50, 100),
      act("kernel_a", K::kKernel, 40, 60, 7),
      act("kernel_b", K::kKernel, 150, 160, 7),  // after the last step: in none
  });
  const std::vector<StepBreakdown> b = break_down(t, find_steps(t, ""));
  ASSERT_EQ(b.size(), 2u);
  EXPECT_DOUBLE_EQ(b[0].forward_ms, 0.010);
  EXPECT_DOUBLE_EQ(b[1].forward_ms, 0.010);
  EXPECT_DOUBLE_EQ(b[0].idle_ms, 0.040);
  EXPECT_EQ(b[1].step, 2);
}

TEST(Timeline, StepRangeSelectsNamedRangesOfOneLane) {
  const RankTrace t = rank_trace({
      act("train_step 4", K::kAnnotation, 0, 10),
      act("train_steps", K::kAnnotation, 10, 20),  // another word
      act("train_step", K::kAnnotation, 20, 30),
      act("train_step 9", K::kAnnotation, 30, 40, 2),  // another thread's
      act("ProfilerStep#1", K::kAnnotation, 0, 40),
  });
  const std::vector<StepWindow> steps = find_steps(t, "train_step");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].number, 4);
  EXPECT_EQ(steps[1].number, 2);  // no number in its name: its position
  EXPECT_DOUBLE_EQ(steps[1].start_us, 20);
}

TEST(Timeline, NoStepsIsAnErrorThatSaysWhatWasLookedFor) {
  const RankTrace t = rank_trace({act("aten::mm", K::kHostOp, 0, 10)}, 3);
  const std::string e = error_of([&] { find_steps(t, ""); });
  EXPECT_CONTAINS(e, "rank-3.json: no steps found");
  EXPECT_CONTAINS(e, "ProfilerStep#N");
  EXPECT_CONTAINS(e, "--step-range");
  EXPECT_CONTAINS(error_of([&] { find_steps(t, "iteration"); }), "no range named 'iteration'");
}

TEST(Classify, TheTableNamesWhatEachToolRecords) {
  const auto work = [](const char* name, ActivityKind kind) {
    return classify(act(name, kind, 0, 1)).work;
  };
  EXPECT_EQ(work("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", K::kKernel),
            Work::kCommunication);
  EXPECT_EQ(work("void at::native::vectorized_elementwise_kernel<4>", K::kKernel), Work::kCompute);
  EXPECT_EQ(work("Memcpy HtoD (Pinned -> Device)", K::kMemcpy), Work::kCopyH2D);
  EXPECT_EQ(work("Memcpy DtoD (Device -> Device)", K::kMemcpy), Work::kCopyOther);
  EXPECT_EQ(work("gloo:all_reduce", K::kAnnotation), Work::kCommunication);
  EXPECT_EQ(work("c10d::allreduce_", K::kHostOp), Work::kCommunicationWait);
  EXPECT_EQ(work("aten::addmm", K::kHostOp), Work::kCompute);
  EXPECT_EQ(work("cudaStreamSynchronize", K::kRuntime), Work::kNone);
  EXPECT_EQ(work("## my range ##", K::kAnnotation), Work::kNone);
  // scalescope's own trace: phases by their labels in reports/phases.h.
  EXPECT_EQ(work(phase_def(Phase::kAllReduceExposed).label, K::kAnnotation),
            Work::kCommunicationWait);
  EXPECT_EQ(classify(act(phase_def(Phase::kBackward).label, K::kAnnotation, 0, 1)).context,
            Context::kBackward);
  // The step's wait for its batch's copy where the copy has a track of its own, else the copy.
  EXPECT_EQ(work(phase_def(Phase::kH2D).label, K::kAnnotation),
            phase_def(Phase::kH2D).track == Track::kCompute ? Work::kCopyH2DWait : Work::kCopyH2D);
  EXPECT_EQ(work("allreduce bucket 3", K::kAnnotation), Work::kCommunication);
  // Its NVTX ranges: the replica thread's exposed all-reduce, a bucket on the communication
  // thread.
  EXPECT_EQ(work("allreduce", K::kAnnotation), Work::kCommunicationWait);
  EXPECT_EQ(work("allreduce bucket 2: 1,048,576 B", K::kAnnotation), Work::kCommunication);
}

}  // namespace
}  // namespace scalescope::traces
