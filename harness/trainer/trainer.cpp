#include "harness/trainer/trainer.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "core/backend.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/cpu/cpu_device.h"
#include "core/device_spec.h"
#include "core/nvtx.h"
#include "harness/collectives/communicator.h"
#include "harness/trainer/buckets.h"
#include "harness/trainer/comm_worker.h"
#include "harness/trainer/evaluate.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "models/zoo.h"
#include "pipelines/pipeline.h"
#include "pipelines/stager.h"

namespace scalescope {

LrScaling parse_lr_scaling(const std::string& name) {
  if (name == "none") return LrScaling::kNone;
  if (name == "linear") return LrScaling::kLinear;
  if (name == "sqrt") return LrScaling::kSqrt;
  throw_error(fmt::format("--lr-scaling {}: unknown rule; use none, linear or sqrt", name));
}

std::string to_string(LrScaling scaling) {
  switch (scaling) {
    case LrScaling::kNone:
      return "none";
    case LrScaling::kLinear:
      return "linear";
    case LrScaling::kSqrt:
      return "sqrt";
  }
  return "?";
}

double scheduled_lr(double base, LrScaling scaling, int replicas, int64_t warmup_steps,
                    int64_t step) {
  const double n = static_cast<double>(replicas);
  const double factor = scaling == LrScaling::kLinear ? n
                        : scaling == LrScaling::kSqrt ? std::sqrt(n)
                                                      : 1.0;
  const double target = base * factor;
  if (warmup_steps <= 0 || step >= warmup_steps) return target;
  // Goyal et al.'s gradual warm-up: from the one-replica rate to the scaled one.
  const double t = static_cast<double>(step) / static_cast<double>(warmup_steps);
  return base + (target - base) * t;
}

int64_t per_replica_batch(const TrainOptions& o, int replicas) {
  if (o.global_batch <= 0) return o.batch;
  const int64_t parts = static_cast<int64_t>(replicas) * o.accumulation;
  SS_CHECK(o.global_batch % parts == 0,
           "--global-batch {} does not divide over {} device(s){}: use a multiple of {}",
           o.global_batch, replicas,
           o.accumulation > 1 ? fmt::format(" × {} accumulated micro-batches", o.accumulation)
                              : std::string(),
           parts);
  return o.global_batch / parts;
}

void validate(const TrainOptions& o) {
  SS_CHECK(o.batch > 0, "--batch {} must be a positive number of samples", o.batch);
  SS_CHECK(o.global_batch >= 0, "--global-batch {} must be a positive number of samples",
           o.global_batch);
  SS_CHECK(o.accumulation >= 1 && o.accumulation <= 4096,
           "--accumulate {} must be between 1 and 4096 micro-batches per step", o.accumulation);
  SS_CHECK(o.lr_warmup_steps >= 0, "--lr-warmup-steps {} must not be negative", o.lr_warmup_steps);
  SS_CHECK(o.check_every >= 0, "--check-every {} must be 0 (only at the end) or positive",
           o.check_every);
  SS_CHECK(o.profile_first >= 0 && o.profile_last >= o.profile_first &&
               (o.profile_first > 0) == (o.profile_last > 0),
           "--profile-steps {}:{} must be FIRST:LAST with 1 <= FIRST <= LAST", o.profile_first,
           o.profile_last);
  SS_CHECK(o.profile_first == 0 || o.profile_last <= o.steps || o.epochs > 0,
           "--profile-steps {}:{} goes past the {} measured steps", o.profile_first, o.profile_last,
           o.steps);
  SS_CHECK(std::isfinite(o.memory_limit_mb) && o.memory_limit_mb >= 0.0,
           "--memory-limit-mb {} must be 0 (no limit) or a positive size", o.memory_limit_mb);
  if (o.adaptive_warmup.enabled) {
    SS_CHECK(o.epochs == 0, "an adaptive warm-up needs --steps (measured steps), not --epochs");
    SS_CHECK(o.adaptive_warmup.max_steps >= 1, "the warm-up bound {} must be at least one step",
             o.adaptive_warmup.max_steps);
  }
  SS_CHECK(o.epochs >= 0, "--epochs {} must be a positive number of epochs", o.epochs);
  SS_CHECK(o.epochs == 0 || o.steps == 0, "give --steps or --epochs, not both");
  SS_CHECK(o.epochs > 0 || o.steps > 0, "--steps {} must be a positive number of steps", o.steps);
  SS_CHECK(o.threads >= 0, "--threads {} must be 0 (automatic) or positive", o.threads);
  SS_CHECK(o.warmup_steps >= 0, "warm-up steps {} must not be negative", o.warmup_steps);
  SS_CHECK(std::isfinite(o.optimizer.lr) && o.optimizer.lr > 0.0f,
           "--lr {} must be a positive number", o.optimizer.lr);
  SS_CHECK(std::isfinite(o.bucket_cap_mb) && o.bucket_cap_mb > 0.0,
           "--bucket-cap-mb {} must be a positive size", o.bucket_cap_mb);
  SS_CHECK(std::isfinite(o.first_bucket_mb) && o.first_bucket_mb > 0.0,
           "--first-bucket-mb {} must be a positive size", o.first_bucket_mb);
  SS_CHECK(o.collective_timeout_ms > 0, "collective timeout {} ms must be positive",
           o.collective_timeout_ms);
  const DeviceSpec spec = parse_device_spec(o.devices);
  SS_CHECK(spec.kind == DeviceKind::kCpu,
           "--devices {}: GPU replicas need the GPU backend's kernels and NCCL, which this "
           "build does not have yet; use cpu:N",
           o.devices);
  check_devices_available(spec);
  (void)per_replica_batch(o, spec.count());
  (void)make_model(o.model);  // throws on an unknown model or key
  (void)parse_data_spec(o.data.spec);
}

namespace {

int64_t mb_to_bytes(double mb) {
  return std::max<int64_t>(1, std::llround(mb * 1024 * 1024));
}

// What the replicas share: read-only inputs, and per-replica outputs each written by its
// own replica only.
struct Group {
  const TrainOptions& options;
  const DeviceSpec& spec;
  const ModelDef& def;
  const RunData& data;
  const Sampler& sampler;
  int64_t epoch_ns = 0;  // when the run began (core/clock.h): timelines count from here
  int64_t batch = 0;     // per replica and micro-batch
  int64_t steps = 0;     // replica 0 sets the final count when the warm-up is adaptive
  int64_t warmup_steps = 0;
  bool warmup_settled = false;
  std::vector<int64_t> peak_memory{};  // [replica], bytes
  GlooGroup comms;
  std::vector<std::vector<PhaseTimes>> phases{};  // [replica][step]
  std::vector<std::vector<double>> losses{};      // [replica][step]
  std::vector<std::vector<double>> bucket_ms{};   // replica 0's, [step][bucket]
  std::vector<int64_t> bucket_bytes{};
  std::vector<EvalRecord> evals{};  // replica 0's
  std::vector<double> lrs{};        // replica 0's, per step
  int64_t consistency_checks = 0;
  int threads_per_device = 0;
  std::mutex error_mutex{};
  std::vector<std::exception_ptr> errors{};  // in the order they happened
};

// A collective that failed because a peer left is a consequence, not a cause.
bool is_collective_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.library() == "Gloo" || e.library() == "NCCL";
  } catch (...) {
    return false;
  }
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

void check_consistency(Communicator& comm, Model& model, Stream& stream, int64_t step) {
  // REQUIRES: weights readable by the host (CPU devices; the GPU backend stages them).
  stream.synchronize();
  const std::array<double, 2> mine = weights_checksum(model.weights().data(), model.param_count());
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

// acc = grads (first micro-batch) or acc += grads. CPU memory; the GPU backend will do this
// with a kernel on the compute stream.
void accumulate(float* acc, const float* grads, int64_t count, bool first) {
  if (first) {
    std::copy(grads, grads + count, acc);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) acc[i] += grads[i];
}

void run_replica(Group& g, int rank) {
  const TrainOptions& o = g.options;
  set_thread_rank(rank);
  nvtx::name_current_thread(fmt::format("scalescope replica {}", rank).c_str());
  BackendOptions backend_options;
  backend_options.cpu_threads = o.threads;
  backend_options.cpu_devices = g.spec.count();
  std::unique_ptr<Device> device =
      backend(g.spec.kind).open(g.spec.indices[static_cast<size_t>(rank)], backend_options);
  device->make_current();
  if (o.memory_limit_mb > 0.0) device->set_memory_limit(mb_to_bytes(o.memory_limit_mb));
  if (auto* cpu = dynamic_cast<CpuDevice*>(device.get()); cpu != nullptr && rank == 0) {
    g.threads_per_device = cpu->threads();
  }
  Stream& stream = device->default_stream();
  std::unique_ptr<Communicator> comm = g.comms.connect(rank);

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

  const int micro = o.accumulation;
  const int64_t batch = g.batch;
  const int64_t replica_batch = batch * micro;  // samples per replica and step
  // Gradients of the finished micro-batches of a step; the communication thread adds them to
  // each bucket before reducing it, so the last micro-batch's backward still overlaps.
  Tensor accumulated;
  if (micro > 1) accumulated = Tensor(*device, Shape{model.param_count()});
  CommWorker comm_worker(
      *comm, stream, model.grads().data(),
      plan_buckets(model, mb_to_bytes(o.bucket_cap_mb), mb_to_bytes(o.first_bucket_mb)), rank);
  const std::vector<Bucket>& buckets = comm_worker.buckets();
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
  std::vector<float> host_loss(static_cast<size_t>(micro));
  StepEvents ev(*device, micro);
  // Device event times onto the host clock: one event recorded and waited for now gives
  // the offset; every step's start is then that plus its event's distance from this one.
  const std::unique_ptr<Event> reference = device->create_event();
  reference->record(stream);
  reference->synchronize();
  const double reference_ms = static_cast<double>(now_ns() - g.epoch_ns) * 1e-6;

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
      if (o.on_eval) o.on_eval(g.evals.back());
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
  for (int64_t step = 1; step <= last_step; ++step) {
    const double lr =
        scheduled_lr(o.optimizer.lr, o.lr_scaling, g.spec.count(), o.lr_warmup_steps, step);
    const int64_t measured = warmup_steps >= 0 ? step - warmup_steps : 0;
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
    comm_worker.begin_step(step, micro > 1 ? accumulated.data() : nullptr);
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
            comm_worker.submit(next_bucket++);
          }
        });
        if (!last) {
          accumulate(accumulated.data(), model.grads().data(), model.param_count(), m == 0);
        }
      }
      ev.backward[static_cast<size_t>(m)]->record(stream);
    }
    while (next_bucket < buckets.size()) comm_worker.submit(next_bucket++);
    if (pipeline) stager.release(stream);
    double allreduce_total = 0.0;
    {
      // What the step waits for after backward: the exposed all-reduce.
      nvtx::Range range(nvtx::Phase::kAllReduce, step);
      allreduce_total = comm_worker.wait_all();
    }
    ev.allreduce->record(stream);
    {
      nvtx::Range range(nvtx::Phase::kOptimizer, step);
      optimizer.step(static_cast<float>(lr), stream);
    }
    ev.optimizer->record(stream);
    // The one host synchronisation of the step: reading the loss ends it.
    device->copy_to_host(host_loss.data(), loss.data(), host_loss.size() * sizeof(float), stream);
    ev.end->record(stream);
    ev.end->synchronize();
    PhaseTimes p;
    p.input_ms = ev.input->elapsed_ms_since(*ev.start);
    p.h2d_ms = ev.h2d->elapsed_ms_since(*ev.input);
    const Event* phase_start = ev.h2d.get();
    for (int m = 0; m < micro; ++m) {
      p.forward_ms += ev.forward[static_cast<size_t>(m)]->elapsed_ms_since(*phase_start);
      p.backward_ms += ev.backward[static_cast<size_t>(m)]->elapsed_ms_since(
          *ev.forward[static_cast<size_t>(m)]);
      phase_start = ev.backward[static_cast<size_t>(m)].get();
    }
    p.allreduce_exposed_ms = ev.allreduce->elapsed_ms_since(*phase_start);
    p.allreduce_ms = allreduce_total;
    p.optimizer_ms = ev.optimizer->elapsed_ms_since(*ev.allreduce);
    p.step_ms = ev.end->elapsed_ms_since(*ev.start);
    p.start_ms = reference_ms + ev.start->elapsed_ms_since(*reference);
    for (size_t b = 0; b < buckets.size(); ++b) {
      p.buckets.push_back(
          {static_cast<double>(comm_worker.bucket_start_ns()[b] - g.epoch_ns) * 1e-6,
           comm_worker.bucket_ms()[b]});
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
      g.bucket_ms.push_back(comm_worker.bucket_ms());
      g.lrs.push_back(lr);
      if (o.on_step) o.on_step(StepRecord{step, step_loss, p.step_ms, p.input_ms + p.h2d_ms});
    }
    if (o.after_step) {
      o.after_step(rank, step, {model.weights().data(), static_cast<size_t>(model.param_count())});
    }
    if (step == last_step || (o.check_every > 0 && step % o.check_every == 0)) {
      check_consistency(*comm, model, stream, step);
      if (rank == 0) ++g.consistency_checks;
    }
    if (step % steps_per_epoch == 0) run_eval(step / steps_per_epoch, step);
  }
  if (profile_range) {
    profile_range.reset();
    if (rank == 0) device->stop_profiler();
  }
  // A final evaluation when training stopped inside an epoch.
  if (last_step % steps_per_epoch != 0) run_eval(last_step / steps_per_epoch + 1, last_step);
  if (rank == 0 && !o.save.empty()) save_checkpoint(o.save, model, &optimizer);
  g.peak_memory[static_cast<size_t>(rank)] = device->peak_memory();
  if (rank == 0) {
    g.steps = last_step;
    g.warmup_steps = warmup_steps;
    g.warmup_settled = adaptive ? settled : true;
  }
}

}  // namespace

RunReport train(const TrainOptions& o) {
  validate(o);
  const DeviceSpec spec = parse_device_spec(o.devices);
  const ModelDef def = make_model(o.model);
  const RunData data = open_run_data(o.data, def, o.seed);
  const ModelSummary summary = summarize(def, data.sample_shape);
  const int replicas = spec.count();
  const int64_t batch = per_replica_batch(o, replicas);
  // A replica's share of a step is `accumulation` consecutive micro-batches.
  const Sampler sampler(data.train->size(), batch * o.accumulation, replicas, o.seed);
  nvtx::initialize();

  Group g{.options = o,
          .spec = spec,
          .def = def,
          .data = data,
          .sampler = sampler,
          .epoch_ns = now_ns(),
          .batch = batch,
          .comms = GlooGroup(replicas, std::chrono::milliseconds(o.collective_timeout_ms))};
  g.steps = o.epochs > 0 ? o.epochs * sampler.steps_per_epoch() : o.steps;
  g.phases.resize(static_cast<size_t>(replicas));
  g.peak_memory.resize(static_cast<size_t>(replicas));
  g.losses.resize(static_cast<size_t>(replicas));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < replicas; ++rank) {
    threads.emplace_back([&g, rank] {
      try {
        run_replica(g, rank);
      } catch (...) {
        // The other replicas then fail in their next collective (the lost peer closes its
        // connections) or at its timeout; which error is reported is chosen below.
        std::lock_guard lock(g.error_mutex);
        g.errors.push_back(std::current_exception());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Report the cause: the first error that is not a collective failing for a lost peer
  // (those can arrive first: the failed replica closes its connections while unwinding).
  for (const std::exception_ptr& e : g.errors) {
    if (!is_collective_failure(e)) std::rethrow_exception(e);
  }
  if (!g.errors.empty()) std::rethrow_exception(g.errors.front());

  RunReport report;
  report.command_line = o.command_line;
  report.model = def.name;
  report.params = summary.params;
  report.forward_flops_per_sample = summary.forward_flops;
  report.input_shape = data.sample_shape.to_string();
  report.devices = to_string(spec);
  report.threads_per_device = g.threads_per_device;
  report.replicas = replicas;
  report.batch = batch;
  report.accumulation = o.accumulation;
  report.optimizer = to_string(o.optimizer.kind);
  report.lr = o.optimizer.lr;
  report.lr_scaling = to_string(o.lr_scaling);
  report.lr_warmup_steps = o.lr_warmup_steps;
  report.seed = o.seed;
  report.data = data.train->describe();
  report.overlap = o.overlap;
  report.bucket_bytes = g.bucket_bytes;
  report.consistency_checks = g.consistency_checks;
  report.warmup_steps = g.warmup_steps;
  report.warmup_settled = g.warmup_settled;
  report.peak_memory_bytes = g.peak_memory;
  report.evals = g.evals;
  for (int64_t i = 0; i < g.steps; ++i) {
    StepRecord r;
    r.step = i + 1;
    r.lr = g.lrs[static_cast<size_t>(i)];
    double loss = 0.0;
    const PhaseTimes* slowest = nullptr;
    for (int rank = 0; rank < replicas; ++rank) {
      const PhaseTimes& p = g.phases[static_cast<size_t>(rank)][static_cast<size_t>(i)];
      r.replicas.push_back(p);
      loss += g.losses[static_cast<size_t>(rank)][static_cast<size_t>(i)];
      if (slowest == nullptr || p.step_ms > slowest->step_ms) slowest = &p;
    }
    r.loss = loss / replicas;  // equal shards: the mean of means is the global mean
    r.step_ms = slowest->step_ms;
    r.input_ms = slowest->input_ms + slowest->h2d_ms;
    r.bucket_ms = std::move(g.bucket_ms[static_cast<size_t>(i)]);
    report.steps.push_back(std::move(r));
  }
  return report;
}

}  // namespace scalescope
