// Which part of a training step an activity of a trace is: one table of rules, matching kernel,
// operator and range names, that every trace format and every analysis goes through.
//
// Two things are read off an activity:
//   work     what occupies the timeline the step waits for: the device streams where the trace
//            has any device activity, otherwise the host threads (a CPU job: its operators are
//            the work). A host activity's work counts only in a trace without device activity,
//            except input: a host loading the next batch keeps a device waiting too.
//   context  what the host is doing: the step itself, loading data, forward, backward or the
//            optimizer. A device kernel takes the context of the host at the call that launched
//            it (correlation ids); a host activity takes the innermost context around it.
#pragma once

#include <array>
#include <string_view>

#include "core/nvtx.h"
#include "reports/phases.h"
#include "reports/trace_analysis/trace_model.h"

namespace scalescope::traces {

// In order of precedence: when several run at once the time is the first one's (compute
// hides communication, which hides copies, which hide the host's input wait). A wait is a
// thread waiting for work that runs elsewhere (a collective on the backend's threads or another
// stream, a copy on the copy stream): exposed time of that work, but no part of how long it ran.
enum class Work {
  kCompute,
  kCommunication,
  kCommunicationWait,
  kCopyH2D,
  kCopyH2DWait,
  kCopyOther,
  kInput,
  kNone
};
std::string_view to_string(Work work);

enum class Context { kNone, kStep, kInput, kForward, kBackward, kOptimizer };
std::string_view to_string(Context context);

// kPhaseLabel: the name is the label of a phase of reports/phases.h (scalescope's Chrome trace
// names its ranges so); the phase says what it is (phase_class), not the row.
enum class Match { kExact, kPrefix, kContains, kAny, kPhaseLabel };

constexpr unsigned kind_bit(ActivityKind kind) {
  return 1u << static_cast<unsigned>(kind);
}
inline constexpr unsigned kHostOps = kind_bit(ActivityKind::kHostOp);
inline constexpr unsigned kRanges = kind_bit(ActivityKind::kAnnotation);
inline constexpr unsigned kKernels = kind_bit(ActivityKind::kKernel);
inline constexpr unsigned kCopies =
    kind_bit(ActivityKind::kMemcpy) | kind_bit(ActivityKind::kMemset);
inline constexpr unsigned kCalls =
    kind_bit(ActivityKind::kRuntime) | kind_bit(ActivityKind::kOsRuntime);

struct Rule {
  unsigned kinds;  // the ActivityKinds it applies to (kind_bit)
  Match match;
  const char* pattern;
  Work work;
  Context context;
  const char* source;  // whose names these are
};

// First match wins. Kineto's Memcpy names ("Memcpy HtoD (Pageable -> Device)") are also what
// the Nsight Systems reader names copies after CUPTI's copy kind, so one row serves both.
// scalescope's own names are its phases' labels (its Chrome trace) and NVTX messages.
inline constexpr auto kRules = std::to_array<Rule>({
    {kRanges, Match::kPrefix, "ProfilerStep#", Work::kNone, Context::kStep,
     "torch.profiler: profiler.step()"},
    {kRanges, Match::kExact, "step", Work::kNone, Context::kStep, "scalescope NVTX"},
    {kRanges, Match::kPrefix, "step ", Work::kNone, Context::kStep, "scalescope trace"},
    {kKernels, Match::kPrefix, "nccl", Work::kCommunication, Context::kNone, "NCCL kernels"},
    {kKernels, Match::kContains, "ncclKernel", Work::kCommunication, Context::kNone,
     "NCCL kernels"},
    {kKernels, Match::kContains, "ncclDevKernel", Work::kCommunication, Context::kNone,
     "NCCL kernels"},
    {kCopies, Match::kPrefix, "Memcpy HtoD", Work::kCopyH2D, Context::kNone, "CUDA copies"},
    {kCopies, Match::kAny, "", Work::kCopyOther, Context::kNone, "CUDA copies and memsets"},
    {kKernels, Match::kAny, "", Work::kCompute, Context::kNone, "every other kernel"},
    {kRanges, Match::kPrefix, "gloo:", Work::kCommunication, Context::kNone,
     "ProcessGroupGloo's collectives, on its threads"},
    {kHostOps, Match::kPrefix, "c10d::", Work::kCommunicationWait, Context::kNone,
     "c10d collectives on the calling thread (the call and its wait)"},
    {kRanges | kHostOps, Match::kContains, "DataLoaderIter.__next__", Work::kInput, Context::kInput,
     "torch DataLoader"},
    {kRanges, Match::kPrefix, "Optimizer.step#", Work::kCompute, Context::kOptimizer,
     "torch.optim"},
    {kRanges, Match::kPrefix, "Optimizer.zero_grad#", Work::kCompute, Context::kOptimizer,
     "torch.optim"},
    {kHostOps, Match::kPrefix, "autograd::engine::evaluate_function:", Work::kCompute,
     Context::kBackward, "torch.autograd"},
    {kRanges, Match::kExact, "DistributedDataParallel.forward", Work::kCompute, Context::kForward,
     "torch DDP"},
    {kRanges, Match::kPhaseLabel, "", Work::kNone, Context::kNone,
     "scalescope trace and NVTX: its phases' labels (phase_class)"},
    // scalescope's NVTX ranges on a replica thread: what it waited for (the exposed all-reduce,
    // batch norm's statistics, its batch's copy); on the communication thread: the work.
    {kRanges, Match::kExact, nvtx::category(Phase::kH2D).name, Work::kCopyH2DWait, Context::kNone,
     "scalescope NVTX"},
    {kRanges, Match::kExact, nvtx::category(Phase::kAllReduce).name, Work::kCommunicationWait,
     Context::kNone, "scalescope NVTX"},
    {kRanges, Match::kExact, nvtx::category(Phase::kBatchNormSync).name, Work::kCommunicationWait,
     Context::kNone, "scalescope NVTX"},
    {kRanges, Match::kExact, nvtx::category(Phase::kGradCast).name, Work::kCommunication,
     Context::kNone, "scalescope NVTX"},
    {kRanges, Match::kPrefix, "allreduce bucket", Work::kCommunication, Context::kNone,
     "scalescope trace and NVTX: each bucket's all-reduce"},
    {kHostOps, Match::kAny, "", Work::kCompute, Context::kNone, "every other operator"},
    {kRanges | kCalls, Match::kAny, "", Work::kNone, Context::kNone,
     "other ranges, runtime and OS calls"},
});

struct Class {
  Work work = Work::kNone;
  Context context = Context::kNone;
  const Rule* rule = nullptr;  // the row that matched
};

// The first rule of kRules that matches; every activity matches one (the last rows take any
// name).
Class classify(const Activity& activity);

// What a range named after a phase of the schema is: compute phases by their phase, the
// phases on the compute track waits (what the step waited for: its communication, its batch's
// copy), other communication phases communication, the input phase input, other copy phases
// host-to-device copies.
Class phase_class(const PhaseDef& phase);

// What a trace that names no category (PyTorch's legacy profiler) ran, by its name: a range
// where a row of kRules for ranges names it (ProfilerStep#N, gloo:, Optimizer.step#, the phases'
// labels), else an operator on a host thread; so each classifies as under Kineto's categories.
ActivityKind kind_by_name(std::string_view name);

// Whether `name` is one of the ranges `--step-range NAME` selects: the name itself, or the name
// followed by anything but a letter, digit or '_' ("ProfilerStep" selects "ProfilerStep#12",
// "train_step" selects "train_step 3" but not "train_steps").
bool names_step_range(std::string_view name, std::string_view range);

}  // namespace scalescope::traces
