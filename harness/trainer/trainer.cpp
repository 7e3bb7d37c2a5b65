#include "harness/trainer/trainer.h"
#include "harness/trainer/layout.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "core/backend.h"
#include "core/buffer.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/cpu/cpu_device.h"
#include "core/device_spec.h"
#include "core/nvtx.h"
#include "harness/collectives/cluster.h"
#include "harness/collectives/communicator.h"
#include "harness/collectives/replica_comms.h"
#include "harness/telemetry/nvml_sampler.h"
#include "harness/trainer/buckets.h"
#include "harness/trainer/comm_worker.h"
#include "harness/trainer/evaluate.h"
#include "harness/trainer/stream_reducer.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "models/zoo.h"
#include "pipelines/pipeline.h"
#include "pipelines/stager.h"

namespace scalescope {

namespace {

int64_t mb_to_bytes(double mb) {
  return std::max<int64_t>(1, std::llround(mb * 1024 * 1024));
}

// What the replicas share: read-only inputs, and per-replica outputs each written by its
// own replica only.
struct Group {
  const TrainOptions& options;
  const TrainHooks& hooks;
  const DeviceSpec& spec;
  const ProcessLayout& layout;
  const ModelDef& def;
  const RunData& data;
  const Sampler& sampler;
  int64_t epoch_ns = 0;  // when the run began (core/clock.h): timelines count from here
  int64_t batch = 0;     // per replica and micro-batch
  int64_t steps = 0;     // replica 0 sets the final count when the warm-up is adaptive
  int64_t warmup_steps = 0;
  bool warmup_settled = false;
  std::vector<int64_t> peak_memory{};             // [replica], bytes
  std::vector<int64_t> measured_allocations{};    // [replica]: device allocations in measured steps
  std::unique_ptr<ReplicaComms> comms;            // null in a process that waits out the run
  std::vector<std::vector<PhaseTimes>> phases{};  // [replica][step]
  std::vector<std::vector<double>> losses{};      // [replica][step]
  std::vector<std::vector<double>> bucket_ms{};   // replica 0's, [step][bucket]
  std::vector<int64_t> bucket_bytes{};
  std::vector<EvalRecord> evals{};                  // replica 0's
  std::vector<double> lrs{};                        // replica 0's, per step
  std::optional<AllReduceSplit> allreduce_split{};  // replica 0's (runs across nodes)
  int64_t consistency_checks = 0;
  int threads_per_device = 0;
  // GPU runs: this process's GPUs ([local replica]), sampled by NVML while steps are measured
  // (the first local replica starts and stops the sampler), and what the sampling found.
  std::mutex gpu_mutex{};  // guards pci_bus_ids
  std::vector<std::string> pci_bus_ids{};
  std::unique_ptr<NvmlSampler> gpu_sampler{};
  std::vector<GpuUtilizationSummary> gpu_utilization{};
  std::mutex error_mutex{};
  std::vector<std::exception_ptr> errors{};  // in the order they happened
};

// A collective that failed because a peer left is a consequence, not a cause.
bool is_collective_library(const std::string& library) {
  return library == "Gloo" || library == "NCCL";
}

bool is_collective_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return is_collective_library(e.library());
  } catch (...) {
    return false;
  }
}

// The cause among a process's replicas' errors (at least one): the first that is not a
// collective failing for a lost peer (those can arrive first: the failed replica closes its
// connections while unwinding).
std::exception_ptr cause_of(const std::vector<std::exception_ptr>& errors) {
  for (const std::exception_ptr& e : errors) {
    if (!is_collective_failure(e)) return e;
  }
  return errors.front();
}

// Events at the phase boundaries of one step, created once. Forward and backward alternate
// once per micro-batch.
struct StepEvents {
  std::unique_ptr<Event> start, input, h2d, allreduce, optimizer, end;
  std::vector<std::unique_ptr<Event>> forward, backward;  // [micro-batch]
  StepEvents(Device& d, int micro_batches)
      : start(d.create_event()),
        input(d.create_event()),
        h2d(d.create_event()),
        allreduce(d.create_event()),
        optimizer(d.create_event()),
        end(d.create_event()) {
    for (int i = 0; i < micro_batches; ++i) {
      forward.push_back(d.create_event());
      backward.push_back(d.create_event());
    }
  }
};

// FNV-1a over the weights' bits, split into two exactly representable halves: replicas
// that applied the same all-reduced gradients hold bit-identical weights (every rank
// receives the same reduced bits and runs the same update), so any difference is a fault.
std::array<double, 2> weights_checksum(const float* weights, int64_t count) {
  uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(weights);
  for (int64_t i = 0; i < count * static_cast<int64_t>(sizeof(float)); ++i) {
    h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return {static_cast<double>(h >> 32), static_cast<double>(h & 0xffffffffu)};
}

// The weights where the host can read them: in place on CPU devices, else copied into
// `staging` (pinned host memory of the model's size).
float* host_weights(Model& model, Communicator& comm, Stream& stream, HostBuffer& staging,
                    const std::string& what) {
  if (staging.empty()) {
    comm.synchronize(stream, what);
    return model.weights().data();
  }
  model.device().copy_to_host(staging.data(), model.weights().data(), staging.bytes(), stream);
  comm.synchronize(stream, what);
  return static_cast<float*>(staging.data());
}

void check_consistency(Communicator& comm, Model& model, Stream& stream, HostBuffer& staging,
                       int64_t step) {
  const float* weights = host_weights(model, comm, stream, staging,
                                      fmt::format("the weight check after step {}", step));
  const std::array<double, 2> mine = weights_checksum(weights, model.param_count());
  const std::vector<double> all = comm.all_gather(mine);
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r) {
    if (all[2 * static_cast<size_t>(r)] != all[0] ||
        all[2 * static_cast<size_t>(r) + 1] != all[1]) {
      differ.push_back(r);
    }
  }
  SS_CHECK(differ.empty(),
           "replicas diverged: after step {} the weights of replica(s) {} differ from replica "
           "0's (checksums {:016x} vs {:016x}); synchronous training keeps them identical",
           step, fmt::join(differ, ", "),
           (static_cast<uint64_t>(all[2 * static_cast<size_t>(differ.front())]) << 32) |
               static_cast<uint64_t>(all[2 * static_cast<size_t>(differ.front()) + 1]),
           (static_cast<uint64_t>(all[0]) << 32) | static_cast<uint64_t>(all[1]));
}

// Median milliseconds of `repeats` all-reduces of every bucket of `grads` over `comm` (after
// one unmeasured round), timed by events on `stream` (the clock on CPU devices, where the
// collectives ran inline). A barrier starts every round together.
double time_bucket_allreduce(Communicator& comm, Device& device, Stream& stream, float* grads,
                             const std::vector<Bucket>& buckets, int repeats) {
  const std::unique_ptr<Event> start = device.create_event();
  const std::unique_ptr<Event> end = device.create_event();
  std::vector<double> ms;
  for (int i = 0; i <= repeats; ++i) {
    comm.barrier();
    start->record(stream);
    for (const Bucket& b : buckets) {
      comm.all_reduce(grads + b.begin, b.end - b.begin, ReduceOp::kAverage, stream);
    }
    end->record(stream);
    comm.synchronize(stream, "timing the gradients' all-reduce");
    if (i > 0) ms.push_back(end->elapsed_ms_since(*start));
  }
  return median(ms);
}

// Runs across nodes: the gradients' all-reduce over every replica, then over this node's
// alone; every replica learns the slowest replica's times (all-gathered over `global`).
// Overwrites the gradients (unused after the last step).
AllReduceSplit measure_allreduce_split(Communicator& global, Communicator& node, Device& device,
                                       Model& model, const std::vector<Bucket>& buckets,
                                       int nodes) {
  constexpr int kRepeats = 5;
  Stream& stream = device.comm_stream();
  float* grads = model.grads().data();
  const std::array<double, 2> mine = {
      time_bucket_allreduce(global, device, stream, grads, buckets, kRepeats),
      time_bucket_allreduce(node, device, stream, grads, buckets, kRepeats)};
  const std::vector<double> all = global.all_gather(mine);
  AllReduceSplit s;
  s.bytes = model.param_count() * static_cast<int64_t>(sizeof(float));
  s.nodes = nodes;
  s.repeats = kRepeats;
  for (size_t i = 0; i + 1 < all.size(); i += 2) {
    s.global_ms = std::max(s.global_ms, all[i]);
    s.node_ms = std::max(s.node_ms, all[i + 1]);
  }
  return s;
}

void run_replica(Group& g, int rank) {
  const TrainOptions& o = g.options;
  set_thread_rank(rank);
  nvtx::name_current_thread(fmt::format("scalescope replica {}", rank).c_str());
  BackendOptions backend_options;
  backend_options.cpu_threads = o.threads;
  // The replicas that share this node's cores (all of them, in one process).
  backend_options.cpu_devices = g.layout.on_node;
  // Across processes each opens its node's devices: the processes before it on the node
  // have the first ones.
  const int device_index =
      g.layout.processes > 1
          ? o.cluster->local_rank() * g.layout.replicas_per_process + (rank - g.layout.first)
          : g.spec.indices[static_cast<size_t>(rank)];
  std::unique_ptr<Device> device = backend(g.spec.kind).open(device_index, backend_options);
  device->make_current();
  if (o.memory_limit_mb > 0.0) device->set_memory_limit(mb_to_bytes(o.memory_limit_mb));
  if (auto* cpu = dynamic_cast<CpuDevice*>(device.get()); cpu != nullptr && rank == 0) {
    g.threads_per_device = cpu->threads();
  }
  const bool gpu = g.spec.kind == DeviceKind::kCuda;
  const auto local = static_cast<size_t>(rank - g.layout.first);
  if (gpu) {
    const std::string id = device->pci_bus_id();
    std::lock_guard lock(g.gpu_mutex);
    g.pci_bus_ids[local] = id;
  }
  // The compute stream; collectives run on the device's communication stream (the same
  // stream on CPU devices).
  Stream& stream = device->default_stream();
  std::unique_ptr<Communicator> comm = g.comms->connect(rank, *device, device_index);
  std::unique_ptr<Communicator> node_comm;
  if (g.comms->node_gloo() != nullptr) node_comm = g.comms->connect_node(rank, *device, *comm);

  const Shape& input = g.data.sample_shape;
  Model model(g.def, input, *device, o.seed);
  Optimizer optimizer(o.optimizer, model);
  if (rank == 0 && !o.load.empty()) load_checkpoint(o.load, model, &optimizer);
  // Every replica starts from replica 0's weights (and optimizer state, when loaded).
  comm->broadcast(model.weights().data(), model.param_count(), 0, stream);
  if (!o.load.empty()) {
    for (const TensorView& s : optimizer.state()) comm->broadcast(s.data, s.numel(), 0, stream);
    const double steps_done = static_cast<double>(optimizer.steps_done());
    optimizer.set_steps_done(static_cast<int64_t>(comm->all_gather({&steps_done, 1}).front()));
  }
  comm->synchronize(stream, "broadcasting replica 0's weights");
  // Device event times onto the host clock: one event recorded and waited for now gives
  // the offset; every step's start is then that plus its event's distance from this one.
  const std::unique_ptr<Event> reference = device->create_event();
  reference->record(stream);
  reference->synchronize();
  const double reference_ms = static_cast<double>(now_ns() - g.epoch_ns) * 1e-6;
  // Pinned host copies of the weights for the checks (GPU only: CPU weights are host memory).
  HostBuffer weight_staging;
  if (gpu) {
    weight_staging = HostBuffer(*device, static_cast<size_t>(model.param_count()) * sizeof(float));
  }

  const int micro = o.accumulation;
  const int64_t batch = g.batch;
  const int64_t replica_batch = batch * micro;  // samples per replica and step
  // Gradients of the finished micro-batches of a step; the communication thread adds them to
  // each bucket before reducing it, so the last micro-batch's backward still overlaps.
  Tensor accumulated;
  if (micro > 1) accumulated = Tensor(*device, Shape{model.param_count()});
  std::vector<Bucket> planned =
      plan_buckets(model, mb_to_bytes(o.bucket_cap_mb), mb_to_bytes(o.first_bucket_mb));
  // Enqueued collectives (NCCL) reduce on the communication stream; blocking ones (Gloo) on
  // a communication thread.
  std::unique_ptr<GradientReducer> reducer;
  if (gpu || g.hooks.reduce_on_streams) {
    reducer = std::make_unique<StreamReducer>(*comm, *device, stream, device->comm_stream(),
                                              model.grads().data(), std::move(planned), *reference,
                                              reference_ms);
  } else {
    reducer = std::make_unique<CommWorker>(*comm, stream, model.grads().data(), std::move(planned),
                                           rank, g.epoch_ns);
  }
  const std::vector<Bucket>& buckets = reducer->buckets();
  if (rank == 0) {
    for (const Bucket& b : buckets) g.bucket_bytes.push_back(b.bytes());
  }

  const int64_t label_width = g.data.train->labels().width();
  Stager stager(*device, replica_batch, input.numel(), label_width);
  PipelineConfig pipeline_config;
  pipeline_config.workers = o.data.workers;
  pipeline_config.queue_depth = o.data.queue_depth;
  pipeline_config.transforms = g.data.train_transforms;
  pipeline_config.seed = o.seed;
  std::optional<InputPipeline> pipeline;
  // synthetic:device: one batch per replica, staged once, reused by every step: no input
  // cost at all.
  Tensor resident_inputs;
  Tensor resident_labels;
  if (g.data.device_resident) {
    std::vector<float> x(static_cast<size_t>(replica_batch * input.numel()));
    std::vector<float> y(static_cast<size_t>(replica_batch * label_width));
    for (int64_t i = 0; i < replica_batch; ++i) {
      g.data.train->read(rank * replica_batch + i, x.data() + i * input.numel(),
                         y.data() + i * label_width);
    }
    resident_inputs = Tensor(*device, input.with_batch(replica_batch));
    resident_labels = Tensor(*device, Shape{replica_batch * label_width});
    resident_inputs.copy_from_host(x);
    resident_labels.copy_from_host(y);
  } else {
    pipeline.emplace(*g.data.train, g.sampler, rank, pipeline_config);
  }
  Tensor loss(*device, Shape{micro});
  // Pinned, so that reading the loss back is an asynchronous copy: the step's one host wait
  // is then the communicator's (which gives up at the timeout), not the copy's.
  HostBuffer host_loss_buffer(*device, static_cast<size_t>(micro) * sizeof(float));
  const std::span<float> host_loss(static_cast<float*>(host_loss_buffer.data()),
                                   static_cast<size_t>(micro));
  StepEvents ev(*device, micro);

  const auto run_eval = [&](int64_t epoch, int64_t step) {
    if (!o.eval) return;
    // Data-parallel too: each replica evaluates its shard and the sums are gathered, so no
    // replica idles at a barrier (under the collective timeout) while another evaluates.
    const EvalSums mine = evaluate_shard(model, *g.data.eval, g.data.eval_transforms, batch, o.seed,
                                         rank, g.spec.count());
    const std::array<double, 3> sums = {mine.loss, mine.correct, static_cast<double>(mine.samples)};
    const std::vector<double> all = comm->all_gather(sums);
    EvalSums total;
    for (size_t i = 0; i + 2 < all.size(); i += 3) {
      total.loss += all[i];
      total.correct += all[i + 1];
      total.samples += static_cast<int64_t>(all[i + 2]);
    }
    if (rank == 0) {
      const EvalResult r = total.result();
      g.evals.push_back(EvalRecord{epoch, step, r.loss, r.accuracy});
      if (g.hooks.on_eval) g.hooks.on_eval(g.evals.back());
    }
  };

  std::vector<PhaseTimes>& phases = g.phases[static_cast<size_t>(rank)];
  std::vector<double>& losses = g.losses[static_cast<size_t>(rank)];
  // Each micro-batch's loss is its share of the replica's step mean.
  const float scale = 1.0f / static_cast<float>(replica_batch);
  const int64_t steps_per_epoch = g.sampler.steps_per_epoch();
  const int64_t sample_floats = input.numel();
  const bool adaptive = o.adaptive_warmup.enabled;
  // With an adaptive warm-up the length is known once the step time has settled.
  int64_t last_step = adaptive ? o.adaptive_warmup.max_steps + o.steps : g.steps;
  int64_t warmup_steps = adaptive ? -1 : std::min(o.warmup_steps, g.steps - 1);
  bool settled = false;
  std::vector<double> warmup_ms;  // the group's step times during warm-up
  // Open while the profiled steps run (an NVTX range spans them on this thread).
  std::optional<nvtx::Range> profile_range;
  int64_t& measured_allocations = g.measured_allocations[static_cast<size_t>(rank)];
  const bool samples_gpus = gpu && rank == g.layout.first;
  for (int64_t step = 1; step <= last_step; ++step) {
    const double lr =
        scheduled_lr(o.optimizer.lr, o.lr_scaling, g.spec.count(), o.lr_warmup_steps, step);
    const int64_t measured = warmup_steps >= 0 ? step - warmup_steps : 0;
    if (gpu && measured == 1) {
      // Every local replica has named its GPU: they all took part in the warm-up's
      // collectives. Loading NVML takes a while: the others wait for it here, outside the
      // step, rather than inside their first measured all-reduce.
      if (samples_gpus) {
        std::vector<std::string> ids;
        {
          std::lock_guard lock(g.gpu_mutex);
          ids = g.pci_bus_ids;
        }
        g.gpu_sampler = std::make_unique<NvmlSampler>(std::move(ids));
      }
      comm->barrier();
    }
    const int64_t allocations_before = device->device_allocations();
    // Closed here, before this step's range opens: NVTX ranges of a thread are a stack.
    if (profile_range && measured == o.profile_last + 1) {
      profile_range.reset();
      if (rank == 0) device->stop_profiler();
    }
    if (o.profile_first > 0 && measured == o.profile_first) {
      if (rank == 0) device->start_profiler();
      profile_range.emplace(nvtx::Phase::kProfile, step);
    }
    nvtx::Range step_range(nvtx::Phase::kStep, step);
    ev.start->record(stream);
    const float* inputs = resident_inputs.data();
    const float* labels = resident_labels.data();
    if (pipeline) {
      const HostBatch* host_batch = nullptr;
      {
        nvtx::Range range(nvtx::Phase::kInput, step);
        host_batch = &pipeline->next();
      }
      ev.input->record(stream);
      nvtx::Range range(nvtx::Phase::kH2D, step);
      const Stager::Staged staged = stager.stage(*host_batch, stream);
      inputs = staged.inputs;
      labels = staged.labels;
    } else {
      ev.input->record(stream);
    }
    ev.h2d->record(stream);
    reducer->begin_step(step, micro > 1 ? accumulated.data() : nullptr);
    size_t next_bucket = 0;
    for (int m = 0; m < micro; ++m) {
      const bool last = m == micro - 1;
      {
        nvtx::Range range(nvtx::Phase::kForward, step);
        model.forward(inputs + m * batch * sample_floats, batch, stream);
        model.loss_forward_backward(labels + m * batch * label_width, scale, loss.data() + m,
                                    stream);
      }
      ev.forward[static_cast<size_t>(m)]->record(stream);
      {
        nvtx::Range range(nvtx::Phase::kBackward, step);
        model.backward(stream, [&](int layer) {
          // A bucket is complete when the backward of its lowest layer has run (of the last
          // micro-batch: the earlier ones only accumulate).
          if (last && o.overlap && next_bucket < buckets.size() &&
              layer == buckets[next_bucket].first_layer) {
            reducer->submit(next_bucket++);
          }
        });
        if (!last) {
          accumulate_into(accumulated.data(), model.grads().data(), model.param_count(), m == 0,
                          stream);
        }
      }
      ev.backward[static_cast<size_t>(m)]->record(stream);
    }
    while (next_bucket < buckets.size()) reducer->submit(next_bucket++);
    if (pipeline) stager.release(stream);
    {
      // What the step waits for after backward: the exposed all-reduce.
      nvtx::Range range(nvtx::Phase::kAllReduce, step);
      reducer->finish_step();
    }
    ev.allreduce->record(stream);
    {
      nvtx::Range range(nvtx::Phase::kOptimizer, step);
      optimizer.step(static_cast<float>(lr), stream);
    }
    ev.optimizer->record(stream);
    // The one host synchronisation of the step: reading the loss ends it.
    device->copy_to_host(host_loss.data(), loss.data(), host_loss.size_bytes(), stream);
    ev.end->record(stream);
    comm->synchronize(stream, fmt::format("step {}", step));
    if (measured > 0) measured_allocations += device->device_allocations() - allocations_before;
    const ReduceTimes& reduced = reducer->times();
    PhaseTimes p;
    p[Phase::kInput] = ev.input->elapsed_ms_since(*ev.start);
    p[Phase::kH2D] = ev.h2d->elapsed_ms_since(*ev.input);
    const Event* phase_start = ev.h2d.get();
    for (int m = 0; m < micro; ++m) {
      p[Phase::kForward] += ev.forward[static_cast<size_t>(m)]->elapsed_ms_since(*phase_start);
      p[Phase::kBackward] += ev.backward[static_cast<size_t>(m)]->elapsed_ms_since(
          *ev.forward[static_cast<size_t>(m)]);
      phase_start = ev.backward[static_cast<size_t>(m)].get();
    }
    p[Phase::kAllReduceExposed] = ev.allreduce->elapsed_ms_since(*phase_start);
    p[Phase::kAllReduce] = reduced.total_ms;
    p[Phase::kOptimizer] = ev.optimizer->elapsed_ms_since(*ev.allreduce);
    p.step_ms = ev.end->elapsed_ms_since(*ev.start);
    p.start_ms = reference_ms + ev.start->elapsed_ms_since(*reference);
    for (size_t b = 0; b < buckets.size(); ++b) {
      p.buckets.push_back({reduced.start_ms[b], reduced.bucket_ms[b]});
    }
    double step_loss = 0.0;
    for (float l : host_loss) step_loss += l;
    SS_CHECK(std::isfinite(step_loss), "the loss became {} at step {} (learning rate {} too high?)",
             step_loss, step, lr);
    phases.push_back(p);
    losses.push_back(step_loss);
    if (warmup_steps < 0) {
      // Every replica sees the same group step times and so reaches the same decision.
      const std::vector<double> all = comm->all_gather({&p.step_ms, 1});
      warmup_ms.push_back(*std::max_element(all.begin(), all.end()));
      const SteadyState s = detect_steady_state(warmup_ms, o.adaptive_warmup.steady);
      if (s.settled || step >= o.adaptive_warmup.max_steps) {
        settled = s.settled;
        warmup_steps = step;
        last_step = step + o.steps;
      }
    }
    if (rank == 0) {
      g.bucket_ms.push_back(reduced.bucket_ms);
      g.lrs.push_back(lr);
      if (g.hooks.on_step)
        g.hooks.on_step(StepRecord{step, step_loss, p.step_ms, p.exposed_ms(PhaseKind::kInput)});
    }
    if (samples_gpus && step == last_step && g.gpu_sampler) g.gpu_sampler->stop();
    if (g.hooks.after_step) {
      // Fault injection (tests): on host copies of the weights where they live on a GPU.
      float* weights = model.weights().data();
      if (gpu) {
        weights = host_weights(model, *comm, stream, weight_staging, "staging the weights");
      }
      g.hooks.after_step(rank, step, {weights, static_cast<size_t>(model.param_count())});
      if (gpu) {
        device->copy_to_device(model.weights().data(), weights, weight_staging.bytes(), stream);
        comm->synchronize(stream, "restoring the weights");
      }
    }
    if (step == last_step || (o.check_every > 0 && step % o.check_every == 0)) {
      check_consistency(*comm, model, stream, weight_staging, step);
      if (rank == 0) ++g.consistency_checks;
    }
    if (step % steps_per_epoch == 0) run_eval(step / steps_per_epoch, step);
  }
  if (profile_range) {
    profile_range.reset();
    if (rank == 0) device->stop_profiler();
  }
  if (node_comm) {
    comm->synchronize(stream, "the last step");
    const AllReduceSplit split =
        measure_allreduce_split(*comm, *node_comm, *device, model, buckets, g.layout.nodes);
    if (rank == 0) g.allreduce_split = split;
  }
  // A final evaluation when training stopped inside an epoch.
  if (last_step % steps_per_epoch != 0) run_eval(last_step / steps_per_epoch + 1, last_step);
  if (rank == 0 && !o.save.empty()) save_checkpoint(o.save, model, &optimizer);
  g.peak_memory[static_cast<size_t>(rank)] = device->peak_memory();
  if (samples_gpus && g.gpu_sampler) {
    g.gpu_sampler->stop();
    g.gpu_utilization = g.gpu_sampler->summaries();
  }
  if (rank == 0) {
    g.steps = last_step;
    g.warmup_steps = warmup_steps;
    g.warmup_settled = adaptive ? settled : true;
  }
}

// Multi-process runs: what a process tells the others. Two exchanges per run, made by every
// process whatever happened to it (so that all stay in step for the next run): the
// rendezvous (its replicas' addresses) and the results (its replicas' records, or its
// error). Encoded as CBOR.
std::string encode(const nlohmann::json& j) {
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(j);
  return {bytes.begin(), bytes.end()};
}

nlohmann::json decode(const std::string& s, int process) {
  try {
    return nlohmann::json::from_cbor(std::vector<uint8_t>(s.begin(), s.end()));
  } catch (const nlohmann::json::exception& e) {
    throw_error(
        fmt::format("process {} sent a message this process cannot read ({}); are all "
                    "processes the same scalescope build?",
                    process, e.what()));
  }
}

nlohmann::json error_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {{"status", "error"}, {"library", e.library()}, {"message", e.what()}};
  } catch (const std::bad_alloc&) {
    return {{"status", "error"}, {"library", ""}, {"message", "out of memory"}};
  } catch (const std::exception& e) {
    return {{"status", "error"}, {"library", ""}, {"message", e.what()}};
  }
}

// The cause among the processes' errors: the first that is not a collective failing because
// a peer left (as for the replicas of one process).
void throw_first_error(const std::vector<nlohmann::json>& messages, const Cluster& cluster) {
  const nlohmann::json* cause = nullptr;
  int from = -1;
  for (size_t p = 0; p < messages.size(); ++p) {
    const nlohmann::json& m = messages[p];
    if (m.at("status") != "error") continue;
    if (cause == nullptr ||
        (!is_collective_library(m.at("library")) && is_collective_library(cause->at("library")))) {
      cause = &m;
      from = static_cast<int>(p);
    }
  }
  if (cause == nullptr) return;
  throw Error(cause->at("library").get<std::string>(), "train",
              fmt::format("on process {}: {}", cluster.describe(from),
                          cause->at("message").get<std::string>()));
}

nlohmann::json phases_json(const std::vector<PhaseTimes>& phases) {
  nlohmann::json out = nlohmann::json::array();
  for (const PhaseTimes& p : phases) out.push_back(to_json(p, true));
  return out;
}

std::vector<PhaseTimes> phases_from_json(const nlohmann::json& j) {
  std::vector<PhaseTimes> out;
  for (size_t i = 0; i < j.size(); ++i) {
    out.push_back(phase_times_from_json(
        JsonReader(j[i], "a process's results", fmt::format("phases[{}]", i))));
  }
  return out;
}

// This process's part of the results: its replicas' records and, from the process of
// replica 0, what replica 0 alone keeps.
nlohmann::json results_message(const Group& g) {
  nlohmann::json replicas = nlohmann::json::array();
  for (int j = 0; j < g.layout.local; ++j) {
    const auto r = static_cast<size_t>(g.layout.first + j);
    replicas.push_back({{"rank", r},
                        {"phases", phases_json(g.phases[r])},
                        {"losses", g.losses[r]},
                        {"peak_memory", g.peak_memory[r]},
                        {"measured_allocations", g.measured_allocations[r]}});
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuUtilizationSummary& u : g.gpu_utilization) {
    gpus.push_back({u.pci_bus_id, u.samples, u.failed_samples, u.mean_gpu_util_percent,
                    u.max_gpu_util_percent, u.mean_memory_util_percent, u.max_memory_used_bytes,
                    u.error});
  }
  nlohmann::json m = {
      {"status", "ok"}, {"replicas", std::move(replicas)}, {"gpu_utilization", std::move(gpus)}};
  if (g.layout.local > 0 && g.layout.first == 0) {
    nlohmann::json evals = nlohmann::json::array();
    for (const EvalRecord& e : g.evals) evals.push_back({e.epoch, e.step, e.loss, e.accuracy});
    m["group"] = {{"steps", g.steps},
                  {"warmup_steps", g.warmup_steps},
                  {"warmup_settled", g.warmup_settled},
                  {"bucket_ms", g.bucket_ms},
                  {"bucket_bytes", g.bucket_bytes},
                  {"evals", std::move(evals)},
                  {"lrs", g.lrs},
                  {"consistency_checks", g.consistency_checks},
                  {"allreduce_split",
                   g.allreduce_split ? to_json(*g.allreduce_split) : nlohmann::json(nullptr)},
                  {"threads_per_device", g.threads_per_device}};
  }
  return m;
}

GpuUtilization to_report(const GpuUtilizationSummary& u, const std::string& host) {
  return {.host = host,
          .pci_bus_id = u.pci_bus_id,
          .samples = u.samples,
          .failed_samples = u.failed_samples,
          .mean_gpu_util_percent = u.mean_gpu_util_percent,
          .max_gpu_util_percent = u.max_gpu_util_percent,
          .mean_memory_util_percent = u.mean_memory_util_percent,
          .max_memory_used_bytes = static_cast<int64_t>(u.max_memory_used_bytes),
          .error = u.error};
}

// The GPU figures in another process's results (from `host`).
void add_gpu_results(std::vector<GpuUtilization>& out, const nlohmann::json& m,
                     const std::string& host) {
  for (const nlohmann::json& u : m.at("gpu_utilization")) {
    GpuUtilizationSummary r;
    r.pci_bus_id = u.at(0).get<std::string>();
    r.samples = u.at(1).get<int64_t>();
    r.failed_samples = u.at(2).get<int64_t>();
    r.mean_gpu_util_percent = u.at(3).get<double>();
    r.max_gpu_util_percent = u.at(4).get<double>();
    r.mean_memory_util_percent = u.at(5).get<double>();
    r.max_memory_used_bytes = u.at(6).get<uint64_t>();
    r.error = u.at(7).get<std::string>();
    out.push_back(to_report(r, host));
  }
}

void add_results(Group& g, const nlohmann::json& m) {
  for (const nlohmann::json& r : m.at("replicas")) {
    const auto rank = r.at("rank").get<size_t>();
    SS_CHECK(rank < g.phases.size(), "a process sent the records of replica {} of {}", rank,
             g.phases.size());
    g.phases[rank] = phases_from_json(r.at("phases"));
    g.losses[rank] = r.at("losses").get<std::vector<double>>();
    g.peak_memory[rank] = r.at("peak_memory").get<int64_t>();
    g.measured_allocations[rank] = r.at("measured_allocations").get<int64_t>();
  }
  if (!m.contains("group")) return;
  const nlohmann::json& group = m.at("group");
  g.steps = group.at("steps");
  g.warmup_steps = group.at("warmup_steps");
  g.warmup_settled = group.at("warmup_settled");
  g.bucket_ms = group.at("bucket_ms").get<std::vector<std::vector<double>>>();
  g.bucket_bytes = group.at("bucket_bytes").get<std::vector<int64_t>>();
  g.evals.clear();
  for (const nlohmann::json& e : group.at("evals")) {
    g.evals.push_back({e.at(0).get<int64_t>(), e.at(1).get<int64_t>(), e.at(2).get<double>(),
                       e.at(3).get<double>()});
  }
  g.lrs = group.at("lrs").get<std::vector<double>>();
  g.consistency_checks = group.at("consistency_checks");
  if (const nlohmann::json& split = group.at("allreduce_split"); !split.is_null()) {
    g.allreduce_split =
        split_from_json(JsonReader(split, "a process's results", "allreduce_split"));
  }
  g.threads_per_device = group.at("threads_per_device");
}

// What a run needs before any replica starts; opened alike by every process.
struct Plan {
  DeviceSpec spec;
  ModelDef def;
  RunData data;
  ModelSummary summary;
  int replicas = 0;
  int64_t batch = 0;
  ProcessLayout layout;
  Sampler sampler;

  explicit Plan(const TrainOptions& o)
      : spec(parse_device_spec(o.devices)),
        def(make_model(o.model)),
        data(open_run_data(o.data, def, o.seed)),
        summary(summarize(def, data.sample_shape)),
        replicas(spec.count()),
        batch(per_replica_batch(o, replicas)),
        layout(process_layout(o.cluster, o.replicas_per_process, replicas)),
        // A replica's share of a step is `accumulation` consecutive micro-batches.
        sampler(data.train->size(), batch * o.accumulation, replicas, o.seed) {}
};

RunReport assemble_report(const TrainOptions& o, const Plan& plan, Group& g) {
  const int replicas = plan.replicas;
  RunReport report;
  report.command_line = o.command_line;
  report.model = plan.def.name;
  report.params = plan.summary.params;
  report.forward_flops_per_sample = plan.summary.forward_flops;
  report.input_shape = plan.data.sample_shape.to_string();
  report.devices = to_string(plan.spec);
  report.threads_per_device = g.threads_per_device;
  report.replicas = replicas;
  report.batch = plan.batch;
  report.accumulation = o.accumulation;
  report.optimizer = to_string(o.optimizer.kind);
  report.lr = o.optimizer.lr;
  report.lr_scaling = to_string(o.lr_scaling);
  report.lr_warmup_steps = o.lr_warmup_steps;
  report.seed = o.seed;
  report.data = plan.data.train->describe();
  report.overlap = o.overlap;
  report.bucket_bytes = g.bucket_bytes;
  report.consistency_checks = g.consistency_checks;
  report.warmup_steps = g.warmup_steps;
  report.warmup_settled = g.warmup_settled;
  report.peak_memory_bytes = g.peak_memory;
  report.measured_device_allocations = g.measured_allocations;
  report.allreduce_split = g.allreduce_split;
  if (plan.spec.kind == DeviceKind::kCuda) report.tf32 = o.tf32;
  report.evals = g.evals;
  if (plan.layout.processes > 1) {
    ClusterInfo c;
    c.processes = plan.layout.processes;
    c.replicas_per_process = plan.layout.replicas_per_process;
    for (const ClusterMember& m : o.cluster->members()) {
      if (m.rank < c.processes) c.members.push_back(m);
    }
    for (const ClusterMember& m : c.members) c.nodes = std::max(c.nodes, m.node + 1);
    report.cluster = std::move(c);
  }
  for (int64_t i = 0; i < g.steps; ++i) {
    StepRecord r;
    r.step = i + 1;
    r.lr = g.lrs[static_cast<size_t>(i)];
    double loss = 0.0;
    for (int rank = 0; rank < replicas; ++rank) {
      const auto& phases = g.phases[static_cast<size_t>(rank)];
      const auto& losses = g.losses[static_cast<size_t>(rank)];
      SS_CHECK(static_cast<int64_t>(phases.size()) == g.steps &&
                   static_cast<int64_t>(losses.size()) == g.steps,
               "replica {} recorded {} of the run's {} steps", rank, phases.size(), g.steps);
      const PhaseTimes& p = phases[static_cast<size_t>(i)];
      r.replicas.push_back(p);
      loss += losses[static_cast<size_t>(i)];
    }
    r.loss = loss / replicas;  // equal shards: the mean of means is the global mean
    set_group_times(r);
    r.bucket_ms = std::move(g.bucket_ms[static_cast<size_t>(i)]);
    report.steps.push_back(std::move(r));
  }
  return report;
}

// An idle process waits for the others' run for as long as it takes: a lost process is
// still noticed at once (its connections close), and a process that stops answering is
// noticed by the processes that run, which then exit and close theirs.
constexpr std::chrono::milliseconds kIdleWait = std::chrono::hours(24 * 7);

}  // namespace

RunReport train(const TrainOptions& o, const TrainHooks& hooks) {
  Cluster* cluster = o.cluster != nullptr && o.cluster->multi_process() ? o.cluster : nullptr;
  // Alone, an error before the replicas start is simply thrown. With other processes it
  // must still be told to them (they wait for this process's part of the rendezvous).
  const std::chrono::milliseconds timeout(o.collective_timeout_ms);
  std::optional<Plan> plan;
  std::unique_ptr<Group> group;
  std::exception_ptr setup_error;
  try {
    validate(o);
    // Process-wide and read when kernels are built: every replica's kernels alike.
    set_allow_tf32(o.tf32);
    plan.emplace(o);
    const ProcessLayout& l = plan->layout;
    std::unique_ptr<ReplicaComms> comms;
    if (l.local > 0) {
      // Across nodes, each node's replicas get a group of their own too: what crossing
      // nodes costs is measured against it (see measure_allreduce_split).
      NodeGroup node;
      if (l.nodes > 1) {
        node = {.size = l.on_node,
                .first = l.node_first,
                .index = cluster->members()[static_cast<size_t>(cluster->rank())].node};
      }
      comms = std::make_unique<ReplicaComms>(
          plan->spec.kind, plan->replicas, l.first, l.local, timeout, l.processes,
          cluster != nullptr ? cluster->gloo_hostname() : std::string(),
          cluster != nullptr ? cluster->gloo_interface() : std::string(), node);
    }
    group.reset(new Group{.options = o,
                          .hooks = hooks,
                          .spec = plan->spec,
                          .layout = l,
                          .def = plan->def,
                          .data = plan->data,
                          .sampler = plan->sampler,
                          .epoch_ns = now_ns(),
                          .batch = plan->batch,
                          .comms = std::move(comms)});
  } catch (...) {
    if (cluster == nullptr) throw;
    // The others wait for this process's part of the rendezvous: it tells them instead.
    setup_error = std::current_exception();
    group.reset();
  }
  nvtx::initialize();
  std::vector<std::thread> threads;
  if (group) {
    Group& g = *group;
    g.steps = o.epochs > 0 ? o.epochs * plan->sampler.steps_per_epoch() : o.steps;
    g.phases.resize(static_cast<size_t>(plan->replicas));
    g.peak_memory.resize(static_cast<size_t>(plan->replicas));
    g.losses.resize(static_cast<size_t>(plan->replicas));
    g.measured_allocations.resize(static_cast<size_t>(plan->replicas));
    g.pci_bus_ids.resize(static_cast<size_t>(g.layout.local));
    for (int j = 0; j < g.layout.local; ++j) {
      const int rank = g.layout.first + j;
      threads.emplace_back([&g, rank] {
        try {
          run_replica(g, rank);
        } catch (...) {
          // The other replicas then fail in their next collective (the lost peer closes its
          // connections) or at its timeout; which error is reported is chosen below.
          {
            std::lock_guard lock(g.error_mutex);
            g.errors.push_back(std::current_exception());
          }
          g.comms->finished(rank);
          // Gloo peers notice the closed connections; NCCL's would wait for their timeout.
          if (g.spec.kind == DeviceKind::kCuda) {
            g.comms->abort(fmt::format("replica {} failed", rank));
          }
        }
      });
    }
  }
  const auto join = [&] {
    for (std::thread& t : threads) t.join();
    threads.clear();
  };

  if (cluster == nullptr) {
    join();
    if (!group->errors.empty()) std::rethrow_exception(cause_of(group->errors));
    RunReport report = assemble_report(o, *plan, *group);
    for (const GpuUtilizationSummary& u : group->gpu_utilization) {
      report.gpu_utilization.push_back(to_report(u, ""));
    }
    return report;
  }

  // 1. The rendezvous, in rounds: each process forwards the keys its replicas' Gloo
  // contexts set (addresses and Gloo's own handshakes) until every replica of every
  // process has connected or failed. All processes leave at the same round: the decision
  // is taken from the same messages.
  const bool running = group && group->layout.local > 0;
  bool aborted = false;
  for (int round = 0;; ++round) {
    nlohmann::json mine = {{"status", "idle"}, {"done", true}};
    if (setup_error) {
      mine = error_message(setup_error);
      mine["done"] = true;
    } else if (running) {
      // A short wait: a round goes out even without news, so no process waits on another's
      // slow start here (the per-round exchange has the collective timeout).
      auto [keys, done] = group->comms->gloo().take_local_keys(std::chrono::milliseconds(20));
      mine = {{"status", "ok"},
              {"done", done},
              {"keys", nlohmann::json::binary(std::vector<uint8_t>(keys.begin(), keys.end()))}};
      if (GlooGroup* node = group->comms->node_gloo(); node != nullptr) {
        auto [node_keys, node_done] = node->take_local_keys(std::chrono::milliseconds(0));
        mine["done"] = done && node_done;
        mine["node_keys"] =
            nlohmann::json::binary(std::vector<uint8_t>(node_keys.begin(), node_keys.end()));
      }
      const std::vector<char>& id = group->comms->nccl_id();
      if (!id.empty())
        mine["nccl_id"] = nlohmann::json::binary(std::vector<uint8_t>(id.begin(), id.end()));
    }
    std::vector<std::string> all;
    try {
      all = cluster->exchange(encode(mine), timeout, "the rendezvous of a run");
    } catch (...) {
      if (group) group->comms->abort("the rendezvous between the processes failed");
      join();
      throw;
    }
    bool all_done = true;
    for (size_t p = 0; p < all.size(); ++p) {
      const nlohmann::json m = decode(all[p], static_cast<int>(p));
      all_done = all_done && m.at("done").get<bool>();
      if (static_cast<int>(p) == cluster->rank() || !running) continue;
      if (m.at("status") == "ok") {
        const auto& bytes = m.at("keys").get_binary();
        group->comms->gloo().add_remote(std::string(bytes.begin(), bytes.end()));
        GlooGroup* node = group->comms->node_gloo();
        if (node != nullptr && m.contains("node_keys") &&
            cluster->members()[p].node ==
                cluster->members()[static_cast<size_t>(cluster->rank())].node) {
          const auto& node_keys = m.at("node_keys").get_binary();
          node->add_remote(std::string(node_keys.begin(), node_keys.end()));
        }
        if (m.contains("nccl_id") && group->comms->needs_nccl_id()) {
          const auto& id = m.at("nccl_id").get_binary();
          try {
            group->comms->set_nccl_id(std::vector<char>(id.begin(), id.end()));
          } catch (const Error&) {
            // The replicas waiting for it fail with the reason (set_nccl_id aborted them).
          }
        }
      } else if (m.at("status") == "error" && !aborted) {
        // Its replicas will never connect: ours must not wait for them until the timeout.
        aborted = true;
        group->comms->abort(fmt::format("process {} could not start its replicas",
                                        cluster->describe(static_cast<int>(p))));
      }
    }
    if (all_done) break;
  }
  join();

  // 2. The results: every process's replicas' records, or its error.
  nlohmann::json mine = {{"status", "idle"}};
  if (setup_error) {
    mine = error_message(setup_error);
  } else if (group && !group->errors.empty()) {
    mine = error_message(cause_of(group->errors));
  } else if (running) {
    mine = results_message(*group);
  } else {
    mine = {{"status", "idle"}};
  }
  const std::vector<std::string> all =
      cluster->exchange(encode(mine), running ? timeout : kIdleWait, "gathering a run's results");
  std::vector<nlohmann::json> messages;
  for (size_t p = 0; p < all.size(); ++p) messages.push_back(decode(all[p], static_cast<int>(p)));
  throw_first_error(messages, *cluster);
  if (setup_error) std::rethrow_exception(setup_error);  // (every process failed alike)
  Group& g = *group;
  for (const nlohmann::json& m : messages) {
    if (m.at("status") == "ok") add_results(g, m);
  }
  RunReport report = assemble_report(o, *plan, g);
  for (size_t p = 0; p < messages.size(); ++p) {
    if (messages[p].at("status") != "ok") continue;
    add_gpu_results(report.gpu_utilization, messages[p], cluster->members()[p].hostname);
  }
  return report;
}

}  // namespace scalescope
