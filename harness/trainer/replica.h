// One replica of a mirrored run: a device (one thread drives it), its copy of the model and
// optimizer state, its shard of the input, its gradient reducer, and the timer of its steps.
// The constructor does the setup (the device, the communicators, replica 0's weights
// broadcast to all); train() runs every step and evaluation and records them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/buffer.h"
#include "core/nvtx.h"
#include "harness/collectives/replica_comms.h"
#include "harness/telemetry/utilization.h"
#include "harness/trainer/consistency.h"
#include "harness/trainer/evaluate.h"
#include "harness/trainer/layer_profiler.h"
#include "harness/trainer/loss_scaler.h"
#include "harness/trainer/reducer.h"
#include "harness/trainer/replica_input.h"
#include "harness/trainer/results.h"
#include "harness/trainer/run_plan.h"
#include "harness/trainer/step_schedule.h"
#include "harness/trainer/step_timer.h"
#include "models/model.h"
#include "models/optimizer.h"

namespace scalescope {

// What the replicas of this process share: read-only inputs, and results each replica
// writes its own part of (the group's part: replica 0 alone).
struct ReplicaShared {
  const TrainOptions& options;
  const TrainHooks& hooks;
  const RunPlan& plan;
  ReplicaComms& comms;
  int64_t epoch_ns;  // when the run began (core/clock.h): timelines count from here
  UtilizationSampling& sampling;
  RunResults& results;
  StepProgress& progress;  // TrainHooks::on_step's
};

class Replica {
 public:
  // Opens the device of replica `rank` and makes it current on the calling thread (which
  // runs this replica from now on), connects its communicators, builds its model (replica
  // 0's weights, and optimizer state when loaded, broadcast to all) and its input.
  // Throws Error on failure.
  Replica(ReplicaShared& run, int rank);
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Every step, with the checks and evaluations between them; then what follows the last
  // step (the all-reduce split across nodes, the last evaluation, the checkpoint).
  void train();

  // After a failure (this replica's or another's): aborts its communicators, so that the
  // collectives it left queued on its device return (a GPU's NCCL kernels wait for a lost
  // peer until then) before its destructor frees anything that synchronizes the device.
  void abort_collectives(const std::string& why) noexcept;

 private:
  // The constructor's work: communicators, model, weights broadcast, reducer, input.
  void setup();
  // One step: input → copy → forward → backward → all-reduce → optimizer, timed by phase.
  // Ends with the step's one host wait.
  PhaseTimes step(int64_t n, double lr);
  // Replica 0's buffers to every replica (DDP's broadcast_buffers).
  void broadcast_buffers();
  // The step's loss: the mean over this replica's samples (after step() returned).
  double step_loss(int64_t n, double lr) const;
  // fp16: what step `n` multiplies this replica's loss by (the scaler's scale, and a test's
  // planted factor), and the scaler's verdict on the step once it ended.
  float loss_scale(int64_t n) const;
  // fp16: the scaler and its overflow flag, which the optimizer reads on the device.
  void start_loss_scaling();
  // A loaded fp16 run goes on with the checkpoint's scale (replica 0 reads it, all take it).
  void restore_loss_scale();
  void update_loss_scale(int64_t n);
  // What happens between steps, outside their timing.
  void before_step(int64_t n, const StepSchedule& schedule);
  void after_step(int64_t n, StepSchedule& schedule);
  void record(int64_t n, const PhaseTimes& phases, double loss, double lr);
  // The step's squared gradient norms (--noise-scale), from what step() read back.
  void record_norms();
  // The evaluation due after step `n`, if any; ends training there when it reached the target.
  void evaluate_if_due(int64_t n, StepSchedule& schedule);
  // Every replica's evaluation of its shard, summed over all: the same result on every
  // replica (nothing without evaluations). Replica 0 records it.
  std::optional<EvalResult> evaluate(int64_t epoch, int64_t step);
  bool reached_target(const EvalResult& r) const;
  void finish(const StepSchedule& schedule);

  ReplicaShared& run_;
  const TrainOptions& options_;
  int rank_;
  int local_;  // among this process's replicas
  std::unique_ptr<Device> device_;
  Stream& compute_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> node_comm_;  // runs across nodes
  std::unique_ptr<Model> model_;
  std::unique_ptr<LayerProfiler> layer_profiler_;  // --profile-layers, replica 0 only
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ClockAnchor> clock_;  // device event times onto the run's host clock
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ReplicaInput> input_;
  Tensor loss_;            // per micro-batch
  HostBuffer host_loss_;   // where the loss is read back asynchronously
  HostBuffer host_norms_;  // and the gradient buckets' squared norms (--noise-scale)
  // fp16: the dynamic loss scaling, and whether the step's gradients overflowed (device
  // memory the optimizer reads, and where the host reads it back with the loss).
  std::optional<LossScaler> scaler_;
  Tensor found_inf_;
  HostBuffer host_found_inf_;
  float step_loss_scale_ = 1.0f;  // what the running step's loss carries
  std::unique_ptr<StepTimer> timer_;
  std::unique_ptr<HostWeights> host_weights_;
  ReplicaRecord& record_;
  // How late the host noticed each measured step's end (ms): device time lost between steps
  // that the steps' event times never show.
  std::vector<double> wait_overshoot_ms_;
  double last_overshoot_ms_ = 0.0;
  double first_step_ms_ = 0.0;  // when step 1 began, on the run's host clock
  int64_t last_evaluated_ = 0;  // the step of the last evaluation
  int64_t current_step_ = 0;    // the step running (the sync sums' NVTX ranges)
  // Open while the profiled steps run (a range spans them on this thread).
  std::optional<nvtx::Range> profile_range_;
};

}  // namespace scalescope
