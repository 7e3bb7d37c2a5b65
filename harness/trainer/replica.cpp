#include "harness/trainer/replica.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "core/backend.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/interrupt.h"
#include "core/units.h"
#include "harness/collectives/benchmark.h"
#include "harness/trainer/evaluate.h"
#include "models/checkpoint.h"
#include "reports/analysis/stats.h"

namespace scalescope {
namespace {

std::unique_ptr<Device> open_device(const ReplicaShared& run, int index) {
  BackendOptions backend_options;
  backend_options.cpu_threads = run.options.threads;
  // The replicas that share this process's cores (all of them, in one process).
  backend_options.cpu_devices = std::max(1, run.plan.layout.sharing_cores);
  std::unique_ptr<Device> device = backend(run.plan.spec.kind).open(index, backend_options);
  device->make_current();
  device->set_wait_timeout(std::chrono::milliseconds(run.options.collective_timeout_ms));
  if (run.options.memory_limit_mb > 0.0) {
    device->set_memory_limit(mib_to_bytes(run.options.memory_limit_mb));
  }
  return device;
}

// The loss scaler's entries of a checkpoint (models/checkpoint.h TrainerState).
constexpr const char* kLossScaleKey = "loss_scale";
constexpr const char* kCleanStepsKey = "loss_scale_clean_steps";

double number_of(const std::string& text, const char* key) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  SS_CHECK(ec == std::errc() && end == text.data() + text.size(),
           "the checkpoint's {} '{}' is not a number", key, text);
  return value;
}

// How often device times are put on the host clock afresh (ClockAnchor).
constexpr std::chrono::minutes kReanchorEvery{1};

int replica_device_index(const ReplicaShared& run, int rank) {
  return device_index(run.plan.layout, rank, backend(run.plan.spec.kind).device_count());
}

// --sync-batchnorm's sync points in a step: each batch norm's forward and backward ones, in
// every micro-batch.
int64_t step_sync_points(const ModelDef& def, int micro_batches) {
  const int64_t layers =
      std::count_if(def.layers.begin(), def.layers.end(),
                    [](const LayerSpec& l) { return std::holds_alternative<BatchNorm2DSpec>(l); });
  using Pass = LayerKernel::Pass;
  const int each = batch_norm_sync_points(Pass::kForward) + batch_norm_sync_points(Pass::kBackward);
  return each * layers * micro_batches;
}

// Runs across nodes: the gradients' all-reduce timed over every replica, then over this
// node's alone; every replica learns the slowest replica's times. Overwrites the gradients
// (unused after the last step).
AllReduceSplit measure_allreduce_split(Communicator& global, Communicator& node, Device& device,
                                       Model& model, const std::vector<Bucket>& buckets,
                                       int nodes) {
  constexpr int kRepeats = 5;
  Stream& stream = device.comm_stream();
  float* grads = model.grads().data();
  const auto all_buckets = [&](Communicator& comm) {
    return [&] {
      for (const Bucket& b : buckets) {
        comm.all_reduce(grads + b.begin, b.end - b.begin, ReduceOp::kAverage, stream);
      }
    };
  };
  const std::array<double, 2> mine = {
      time_collective(global, device, stream, 1, kRepeats, all_buckets(global)),
      time_collective(node, device, stream, 1, kRepeats, all_buckets(node))};
  const std::vector<double> all = global.all_gather(mine);
  AllReduceSplit s;
  s.bytes = model.flat_size() * static_cast<int64_t>(sizeof(float));
  s.nodes = nodes;
  s.repeats = kRepeats;
  for (size_t i = 0; i + 1 < all.size(); i += 2) {
    s.global_ms = std::max(s.global_ms, all[i]);
    s.node_ms = std::max(s.node_ms, all[i + 1]);
  }
  return s;
}

// What the libraries chose for the kernels of the training batch, layer by layer.
std::vector<KernelChoiceRecord> kernel_records(const Model& model, int64_t batch) {
  std::vector<KernelChoiceRecord> out;
  const std::vector<std::vector<KernelChoice>> layers = model.kernel_choices(batch);
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    for (const KernelChoice& c : layers[layer]) {
      out.push_back({.layer = static_cast<int>(layer),
                     .layer_name = describe(model.def().layers[layer]),
                     .pass = c.pass,
                     .algorithm = c.algorithm,
                     .math = c.math,
                     .layout = c.layout,
                     .deterministic = c.deterministic,
                     .workspace_bytes = c.workspace_bytes,
                     .workspace_limit_bytes = c.workspace_limit_bytes,
                     .workspace_limit_rule = c.workspace_limit_rule,
                     .fallback = c.fallback,
                     .measured_ms = c.measured_ms});
    }
  }
  return out;
}

}  // namespace

Replica::Replica(ReplicaShared& run, int rank)
    : run_(run),
      options_(run.options),
      rank_(rank),
      local_(rank - run.plan.layout.first),
      device_(open_device(run, replica_device_index(run, rank))),
      compute_(device_->default_stream()),
      record_(run.results.replicas[static_cast<size_t>(rank)]) {
  try {
    setup();
  } catch (...) {
    // Before the members' destructors, which may synchronize the device (freeing pinned
    // memory, the libraries' handles) behind a broadcast that peers will never match.
    abort_collectives(fmt::format("replica {} failed to start", rank));
    throw;
  }
}

Replica::~Replica() = default;

void Replica::abort_collectives(const std::string& why) noexcept {
  if (node_comm_ != nullptr) node_comm_->abort(why);
  if (comm_ != nullptr) comm_->abort(why);
}

void Replica::setup() {
  const RunPlan& plan = run_.plan;
  run_.sampling.add(local_, *device_);
  if (rank_ == 0) run_.results.group.threads_per_device = device_->threads();
  comm_ = run_.comms.connect(rank_, *device_, replica_device_index(run_, rank_));
  if (run_.comms.node_gloo() != nullptr) {
    node_comm_ = run_.comms.connect_node(rank_, *device_, *comm_);
  }
  model_ = std::make_unique<Model>(plan.def, plan.data.sample_shape, *device_, options_.seed);
  if (options_.profile_layers && rank_ == 0) {
    layer_profiler_ =
        std::make_unique<LayerProfiler>(*device_, static_cast<int>(plan.def.layers.size()));
    model_->set_layer_probe(layer_profiler_.get());
  }
  optimizer_ = std::make_unique<Optimizer>(options_.optimizer, *model_);
  if (rank_ == 0 && !options_.load.empty()) load_checkpoint(options_.load, *model_, &*optimizer_);
  // Every replica starts from replica 0's weights (and optimizer state, when loaded).
  comm_->broadcast(model_->weights().data(), model_->flat_size(), 0, compute_);
  broadcast_buffers();
  if (!options_.load.empty()) {
    for (const TensorView& s : optimizer_->state())
      comm_->broadcast(s.data, s.numel(), 0, compute_);
    const double steps_done = static_cast<double>(optimizer_->steps_done());
    optimizer_->set_steps_done(static_cast<int64_t>(comm_->all_gather({&steps_done, 1}).front()));
  }
  comm_->synchronize(compute_, "broadcasting replica 0's weights");
  clock_ = std::make_unique<ClockAnchor>(*device_, compute_, run_.epoch_ns);

  const int micro = options_.accumulation;
  const GradCompression compression = effective_compression(options_, comm_->size());
  reducer_ = make_reducer(*comm_, *device_, compute_, model_->grads().data(),
                          {.buckets = plan_buckets(*model_, mib_to_bytes(options_.bucket_cap_mb),
                                                   mib_to_bytes(options_.first_bucket_mb)),
                           .micro_batches = micro,
                           .overlap = options_.overlap,
                           .compression = half_format(compression),
                           .noise_norms = measures_noise(options_, plan.replicas)},
                          *clock_, run_.hooks.reduce_on_streams);
  if (rank_ == 0) {
    run_.results.group.communication_threads_per_device =
        reducer_->host_threads() + comm_->host_threads() +
        (node_comm_ != nullptr ? node_comm_->host_threads() : 0);
    for (const Bucket& b : reducer_->buckets()) {
      run_.results.group.bucket_bytes.push_back((b.end - b.begin) *
                                                wire_bytes_per_gradient(compression));
    }
  }
  input_ = std::make_unique<ReplicaInput>(*device_, plan.data, options_.data, plan.sampler, rank_,
                                          plan.batch * micro, options_.seed, options_.prefetch);
  loss_ = Tensor(*device_, Shape{micro});
  // Pinned, so that reading the loss back is an asynchronous copy: the step's one host wait
  // is then the communicator's (which gives up at the timeout), not the copy's.
  host_loss_ = HostBuffer(*device_, static_cast<size_t>(micro) * sizeof(float));
  if (reducer_->norms() != nullptr) host_norms_ = HostBuffer(*device_, reducer_->norms_bytes());
  if (scales_loss(plan.precision)) start_loss_scaling();
  const bool sync = options_.sync_batchnorm && plan.replicas > 1;
  timer_ = std::make_unique<StepTimer>(
      *device_, compute_,
      StepTimer::ends_per_step(micro, sync ? step_sync_points(model_->def(), micro) : 0), *clock_);
  if (sync) {
    model_->set_sync(
        {comm_->size(), comm_->rank()}, [this](float* values, int64_t count, bool backward) {
          timer_->split(backward ? Phase::kBackward : Phase::kForward, Phase::kBatchNormSync,
                        current_step_, [&] { reducer_->sync_sum(values, count); });
        });
  }
  host_weights_ = std::make_unique<HostWeights>(*model_);
}

// Replica 0's buffers (batch norm's running statistics) to every replica, as DDP's
// broadcast_buffers does before each forward: each replica's own batches would move them
// apart, and the replicas must stay identical.
void Replica::broadcast_buffers() {
  if (model_->buffer_count() > 0 && comm_->size() > 1)
    comm_->broadcast(model_->buffers().data(), model_->buffer_count(), 0, compute_);
}

PhaseTimes Replica::step(int64_t n, double lr) {
  const nvtx::Range range(nvtx::kStep, n);
  const RunPlan& plan = run_.plan;
  const int64_t sample_floats = plan.data.sample_shape.numel();
  const int64_t label_floats = plan.data.train->labels().width();
  // Each micro-batch's loss is its share of the replica's step mean (times the loss scale).
  step_loss_scale_ = loss_scale(n);
  const float scale = step_loss_scale_ / static_cast<float>(plan.batch * options_.accumulation);
  current_step_ = n;
  timer_->start();
  const ReplicaInput::Batch batch = input_->next(*timer_, n, compute_);
  for (int m = 0; m < options_.accumulation; ++m) {
    {
      const auto forward = timer_->phase(Phase::kForward, n);
      if (m == 0) broadcast_buffers();
      model_->forward(batch.inputs + m * plan.batch * sample_floats, plan.batch, compute_);
      model_->loss_forward_backward(batch.labels + m * plan.batch * label_floats, scale,
                                    loss_.data() + m, compute_);
    }
    const auto backward = timer_->phase(Phase::kBackward, n);
    reducer_->prepare_for_backward(n, m);
    model_->backward(compute_, [this](int layer) { reducer_->mark_layer_ready(layer); });
    reducer_->finalize_backward();
  }
  input_->release(compute_);
  {
    // What the step waits for after backward: the exposed all-reduce.
    const auto allreduce = timer_->phase(Phase::kAllReduceExposed, n);
    reducer_->finish_step();
  }
  {
    const auto optimizer = timer_->phase(Phase::kOptimizer, n);
    // The all-reduced gradients are the same on every replica, and so is the verdict; the
    // optimizer skips on the device, so the host learns of it with the loss.
    if (scaler_) {
      unscale_gradients(model_->grads().data(), model_->flat_size(), 1.0f / scaler_->scale(),
                        found_inf_.data(), compute_);
    }
    optimizer_->step(static_cast<float>(lr), compute_);
  }
  // The one host synchronisation of the step: reading the loss ends it.
  device_->copy_to_host(host_loss_.data(), loss_.data(), host_loss_.bytes(), compute_);
  if (scaler_) {
    device_->copy_to_host(host_found_inf_.data(), found_inf_.data(), sizeof(float), compute_);
  }
  if (reducer_->norms() != nullptr) {
    device_->copy_to_host(host_norms_.data(), reducer_->norms(), host_norms_.bytes(), compute_);
  }
  timer_->end();
  // The next batch's copy runs while this step's work does.
  input_->prefetch();
  if (run_.hooks.before_step_wait) run_.hooks.before_step_wait(rank_, n);
  comm_->synchronize(compute_, fmt::format("step {}", n));
  // The device idles from the step's end until the host returns and enqueues the next step.
  // The anchor's own wait was late by as much at most, so this is a lower bound.
  last_overshoot_ms_ = clock_->now_ms() - timer_->end_host_ms();
  return timer_->read(reducer_->times());
}

double Replica::step_loss(int64_t n, double lr) const {
  const std::span<const float> losses(static_cast<const float*>(host_loss_.data()),
                                      static_cast<size_t>(options_.accumulation));
  double loss = 0.0;
  for (const float l : losses) loss += l;
  loss /= step_loss_scale_;
  SS_CHECK(std::isfinite(loss), "the loss became {} at step {} (learning rate {} too high?)", loss,
           n, lr);
  return loss;
}

float Replica::loss_scale(int64_t n) const {
  if (!scaler_) return 1.0f;
  const float planted =
      run_.hooks.loss_scale_factor ? run_.hooks.loss_scale_factor(rank_, n) : 1.0f;
  return scaler_->scale() * planted;
}

void Replica::start_loss_scaling() {
  scaler_.emplace();
  found_inf_ = Tensor(*device_, Shape{1});
  host_found_inf_ = HostBuffer(*device_, sizeof(float));
  optimizer_->skip_when(found_inf_.data());
  if (!options_.load.empty()) restore_loss_scale();
}

void Replica::restore_loss_scale() {
  std::array<double, 2> saved = {0.0, 0.0};  // none: a checkpoint of another precision
  if (rank_ == 0) {
    const TrainerState state = load_trainer_state(options_.load);
    const auto scale = state.find(kLossScaleKey);
    const auto clean = state.find(kCleanStepsKey);
    if (scale != state.end() && clean != state.end()) {
      saved = {number_of(scale->second, kLossScaleKey), number_of(clean->second, kCleanStepsKey)};
    }
  }
  // Replica 0 read the file; every replica goes on from its state.
  const std::vector<double> all = comm_->all_gather(saved);
  if (all[0] > 0.0) scaler_->restore(static_cast<float>(all[0]), static_cast<int64_t>(all[1]));
}

void Replica::update_loss_scale(int64_t n) {
  if (!scaler_) return;
  const bool found_inf = *static_cast<const float*>(host_found_inf_.data()) != 0.0f;
  if (scaler_->update(n, found_inf)) optimizer_->rescind_step();
}

void Replica::train() {
  StepSchedule schedule(options_, run_.plan.steps);
  for (int64_t n = 1; n <= schedule.last_step(); ++n) {
    // Between steps: a stop never leaves a step's collectives half matched. The first replica
    // to see it aborts the others (LocalRun::fail), who may be one step behind.
    if (const int signal = interrupt_signal(); signal != 0) {
      throw Interrupted(signal, fmt::format("training stopped before step {}", n));
    }
    before_step(n, schedule);
    if (n == 1) first_step_ms_ = clock_->now_ms();
    const double lr = scheduled_lr(options_.optimizer.lr, options_.lr_scaling, run_.plan.replicas,
                                   options_.lr_warmup_steps, n);
    const int64_t allocations = device_->device_allocations();
    const PhaseTimes phases = step(n, lr);
    update_loss_scale(n);
    if (layer_profiler_) layer_profiler_->end_step(schedule.measured(n) > 0);
    // The first step's collectives made the libraries allocate their own buffers (NCCL's,
    // lazily): from now on they count against the memory limit.
    if (n == 1) record_.library_memory_bytes = device_->count_outside_memory();
    if (schedule.measured(n) > 0) {
      record_.measured_allocations += device_->device_allocations() - allocations;
      wait_overshoot_ms_.push_back(last_overshoot_ms_);
    }
    record(n, phases, step_loss(n, lr), lr);
    clock_->refresh(kReanchorEvery);
    if (schedule.deciding()) {
      // Every replica sees the same group step times and so reaches the same decision.
      const std::vector<double> all = comm_->all_gather({&phases.step_ms, 1});
      schedule.observe(n, *std::max_element(all.begin(), all.end()));
    }
    after_step(n, schedule);
  }
  finish(schedule);
}

void Replica::before_step(int64_t n, const StepSchedule& schedule) {
  const int64_t measured = schedule.measured(n);
  if (measured == 1) {
    // Every local replica has named its device. Starting the sampler may take a while: the
    // others wait for it here, outside the step, rather than inside their first measured
    // all-reduce.
    if (local_ == 0) run_.sampling.start();
    comm_->barrier();
  }
  // Closed here, before this step's range opens: NVTX ranges of a thread are a stack.
  if (profile_range_ && measured == options_.profile_last + 1) {
    profile_range_.reset();
    if (rank_ == 0) device_->stop_profiler();
  }
  if (options_.profile_first > 0 && measured == options_.profile_first) {
    if (rank_ == 0) device_->start_profiler();
    profile_range_.emplace(nvtx::kProfile, n);
  }
}

void Replica::record(int64_t n, const PhaseTimes& phases, double loss, double lr) {
  record_.phases.push_back(phases);
  record_.losses.push_back(loss);
  if (host_norms_.data() != nullptr) record_norms();
  run_.progress.add(local_, n, phases, loss);
  if (rank_ != 0) return;
  GroupRecord& group = run_.results.group;
  group.bucket_ms.push_back(reducer_->times().bucket_ms);
  group.lrs.push_back(lr);
}

void Replica::record_norms() {
  const std::span<const double> norms(static_cast<const double*>(host_norms_.data()),
                                      host_norms_.bytes() / sizeof(double));
  double before = 0.0;
  double after = 0.0;
  for (size_t i = 0; i + 1 < norms.size(); i += 2) {
    before += norms[i];
    after += norms[i + 1];
  }
  // The micro-batch's gradients carry the loss scale of the whole step, 1/(batch ×
  // accumulation): its own mean gradient is accumulation times larger.
  const auto micro = static_cast<double>(options_.accumulation);
  record_.grad_sq_local.push_back(before * micro * micro);
  record_.grad_sq_global.push_back(after);
}

void Replica::after_step(int64_t n, StepSchedule& schedule) {
  if (run_.hooks.after_step) {
    // Fault injection (tests), on a host copy of the weights.
    const std::span<float> weights = host_weights_->read(*comm_, compute_, "staging the weights");
    run_.hooks.after_step(rank_, n, weights);
    host_weights_->write_back(*comm_, compute_);
  }
  // First: an evaluation that reaches the target makes this step the last.
  evaluate_if_due(n, schedule);
  const bool last = n == schedule.last_step();
  if (last && local_ == 0) run_.sampling.stop();
  if (last || (options_.check_every > 0 && n % options_.check_every == 0)) {
    check_consistency(
        *comm_,
        host_weights_->read(*comm_, compute_, fmt::format("the weight check after step {}", n)), n);
    if (model_->buffer_count() > 0) {
      // Each replica's forward moved its own; the broadcast the next forward starts with
      // must leave every replica with replica 0's bits.
      broadcast_buffers();
      check_consistency(*comm_,
                        host_weights_->read_buffers(
                            *comm_, compute_, fmt::format("the buffer check after step {}", n)),
                        n, "buffers (running statistics)");
    }
    if (rank_ == 0) ++run_.results.group.consistency_checks;
  }
}

void Replica::evaluate_if_due(int64_t n, StepSchedule& schedule) {
  const int64_t steps_per_epoch = run_.plan.sampler.steps_per_epoch();
  const bool due =
      options_.eval_every > 0 ? n % options_.eval_every == 0 : n % steps_per_epoch == 0;
  if (!due) return;
  const std::optional<EvalResult> r = evaluate((n - 1) / steps_per_epoch + 1, n);
  if (!r || !reached_target(*r)) return;
  // Every replica has the same result, so all stop after this step.
  schedule.stop_after(n);
  if (rank_ == 0) {
    run_.results.group.target_step = n;
    run_.results.group.target_wall_ms = clock_->now_ms() - first_step_ms_;
  }
}

bool Replica::reached_target(const EvalResult& r) const {
  return (options_.until_accuracy > 0.0 && r.accuracy >= options_.until_accuracy) ||
         (options_.until_loss > 0.0 && r.loss <= options_.until_loss);
}

std::optional<EvalResult> Replica::evaluate(int64_t epoch, int64_t step) {
  if (!options_.eval) return std::nullopt;
  last_evaluated_ = step;
  // Data-parallel too: each replica evaluates its shard and the sums are gathered, so no
  // replica idles at a barrier (under the collective timeout) while another evaluates.
  const RunPlan& plan = run_.plan;
  broadcast_buffers();  // every shard normalized with the same running statistics
  const EvalSums mine = evaluate_shard(*model_, *plan.data.eval, plan.data.eval_transforms,
                                       plan.batch, options_.seed, rank_, plan.replicas);
  const std::array<double, 3> sums = {mine.loss, mine.correct, static_cast<double>(mine.samples)};
  const std::vector<double> all = comm_->all_gather(sums);
  EvalSums total;
  for (size_t i = 0; i + 2 < all.size(); i += 3) {
    total.loss += all[i];
    total.correct += all[i + 1];
    total.samples += static_cast<int64_t>(all[i + 2]);
  }
  const EvalResult r = total.result();
  if (rank_ != 0) return r;
  run_.results.group.evals.push_back(EvalRecord{epoch, step, r.loss, r.accuracy});
  if (run_.hooks.on_eval) run_.hooks.on_eval(run_.results.group.evals.back());
  return r;
}

void Replica::finish(const StepSchedule& schedule) {
  if (profile_range_) {
    profile_range_.reset();
    if (rank_ == 0) device_->stop_profiler();
  }
  if (node_comm_) {
    comm_->synchronize(compute_, "the last step");
    const AllReduceSplit split = measure_allreduce_split(
        *comm_, *node_comm_, *device_, *model_, reducer_->buckets(), run_.plan.layout.nodes);
    if (rank_ == 0) run_.results.group.allreduce_split = split;
  }
  // A final evaluation when the last step had none (training stopped inside an epoch).
  const int64_t last = schedule.last_step();
  const int64_t steps_per_epoch = run_.plan.sampler.steps_per_epoch();
  if (last_evaluated_ != last) {
    const std::optional<EvalResult> r = evaluate((last - 1) / steps_per_epoch + 1, last);
    if (rank_ == 0 && r && reached_target(*r)) run_.results.group.target_step = last;
  }
  // Unless an evaluation between steps reached the target (and timed it), the run's wall time
  // ends here: at the final evaluation, which reached it or not.
  if (rank_ == 0 && options_.has_target() && run_.results.group.target_wall_ms == 0.0) {
    run_.results.group.target_wall_ms = clock_->now_ms() - first_step_ms_;
  }
  if (rank_ == 0 && !options_.save.empty()) {
    TrainerState state;
    if (scaler_) {
      state = {{kLossScaleKey, fmt::format("{}", scaler_->scale())},
               {kCleanStepsKey, std::to_string(scaler_->clean_steps())}};
    }
    save_checkpoint(options_.save, *model_, &*optimizer_, state);
  }
  record_.peak_memory_bytes = device_->peak_memory();
  record_.library_memory_bytes =
      std::max(record_.library_memory_bytes, device_->memory_outside_allocator());
  if (!wait_overshoot_ms_.empty()) record_.wait_overshoot_ms = median(wait_overshoot_ms_);
  if (rank_ == 0) {
    GroupRecord& group = run_.results.group;
    group.steps = last;
    group.warmup_steps = schedule.warmup_steps();
    group.warmup_settled = schedule.settled();
    group.kernels = kernel_records(*model_, run_.plan.batch);
    if (layer_profiler_) group.layer_profile = layer_profiler_->records(*model_, run_.plan.batch);
    if (scaler_) {
      const LossScaling& c = scaler_->config();
      group.loss_scaling = LossScalingRecord{.initial_scale = c.initial_scale,
                                             .growth_factor = c.growth_factor,
                                             .backoff_factor = c.backoff_factor,
                                             .growth_interval = c.growth_interval,
                                             .final_scale = scaler_->scale(),
                                             .skipped_steps = scaler_->skipped_steps()};
    }
  }
}

}  // namespace scalescope
