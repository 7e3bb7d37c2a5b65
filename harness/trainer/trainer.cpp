#include "harness/trainer/trainer.h"

#include <algorithm>
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

void validate(const TrainOptions& o) {
  SS_CHECK(o.batch > 0, "--batch {} must be a positive number of samples", o.batch);
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
  int64_t steps = 0;
  GlooGroup comms;
  std::vector<std::vector<PhaseTimes>> phases;  // [replica][step]
  std::vector<std::vector<double>> losses;      // [replica][step]
  std::vector<EvalRecord> evals;                // replica 0's
  int threads_per_device = 0;
  std::mutex error_mutex;
  std::vector<std::exception_ptr> errors;  // in the order they happened
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

// Events at the phase boundaries of one step, created once.
struct StepEvents {
  std::unique_ptr<Event> start, input, h2d, forward, backward, allreduce, optimizer, end;
  explicit StepEvents(Device& d)
      : start(d.create_event()),
        input(d.create_event()),
        h2d(d.create_event()),
        forward(d.create_event()),
        backward(d.create_event()),
        allreduce(d.create_event()),
        optimizer(d.create_event()),
        end(d.create_event()) {}
};

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

  CommWorker comm_worker(
      *comm, stream, model.grads().data(),
      plan_buckets(model, mb_to_bytes(o.bucket_cap_mb), mb_to_bytes(o.first_bucket_mb)), rank);
  const std::vector<Bucket>& buckets = comm_worker.buckets();

  const int64_t label_width = g.data.train->labels().width();
  Stager stager(*device, o.batch, input.numel(), label_width);
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
    std::vector<float> x(static_cast<size_t>(o.batch * input.numel()));
    std::vector<float> y(static_cast<size_t>(o.batch * label_width));
    for (int64_t i = 0; i < o.batch; ++i) {
      g.data.train->read(rank * o.batch + i, x.data() + i * input.numel(),
                         y.data() + i * label_width);
    }
    resident_inputs = Tensor(*device, input.with_batch(o.batch));
    resident_labels = Tensor(*device, Shape{o.batch * label_width});
    resident_inputs.copy_from_host(x);
    resident_labels.copy_from_host(y);
  } else {
    pipeline.emplace(*g.data.train, g.sampler, rank, pipeline_config);
  }
  Tensor loss(*device, Shape{1});
  StepEvents ev(*device);

  const auto run_eval = [&](int64_t epoch, int64_t step) {
    if (!o.eval) return;
    if (rank == 0) {
      const EvalResult r = evaluate(model, *g.data.eval, g.data.eval_transforms, o.batch, o.seed);
      g.evals.push_back(EvalRecord{epoch, step, r.loss, r.accuracy});
      if (o.on_eval) o.on_eval(g.evals.back());
    }
    comm->barrier();  // the others wait: the next step's all-reduce needs replica 0
  };

  std::vector<PhaseTimes>& phases = g.phases[static_cast<size_t>(rank)];
  std::vector<double>& losses = g.losses[static_cast<size_t>(rank)];
  const float scale = 1.0f / static_cast<float>(o.batch);
  const int64_t steps_per_epoch = g.sampler.steps_per_epoch();
  float host_loss = 0.0f;
  for (int64_t step = 1; step <= g.steps; ++step) {
    ev.start->record(stream);
    const float* inputs = resident_inputs.data();
    const float* labels = resident_labels.data();
    if (pipeline) {
      const HostBatch* batch = nullptr;
      {
        nvtx::Range range(nvtx::Phase::kInput, step);
        batch = &pipeline->next();
      }
      ev.input->record(stream);
      nvtx::Range range(nvtx::Phase::kH2D, step);
      const Stager::Staged staged = stager.stage(*batch, stream);
      inputs = staged.inputs;
      labels = staged.labels;
    } else {
      ev.input->record(stream);
    }
    ev.h2d->record(stream);
    comm_worker.begin_step(nullptr);
    {
      nvtx::Range range(nvtx::Phase::kForward, step);
      model.forward(inputs, o.batch, stream);
      model.loss_forward_backward(labels, scale, loss.data(), stream);
    }
    ev.forward->record(stream);
    size_t next_bucket = 0;
    {
      nvtx::Range range(nvtx::Phase::kBackward, step);
      model.backward(stream, [&](int layer) {
        // A bucket is complete when the backward of its lowest layer has run.
        if (o.overlap && next_bucket < buckets.size() &&
            layer == buckets[next_bucket].first_layer) {
          comm_worker.submit(next_bucket++);
        }
      });
    }
    ev.backward->record(stream);
    while (next_bucket < buckets.size()) comm_worker.submit(next_bucket++);
    if (pipeline) stager.release(stream);
    const double allreduce_total = comm_worker.wait_all();
    ev.allreduce->record(stream);
    {
      nvtx::Range range(nvtx::Phase::kOptimizer, step);
      optimizer.step(stream);
    }
    ev.optimizer->record(stream);
    // The one host synchronisation of the step: reading the loss ends it.
    device->copy_to_host(&host_loss, loss.data(), sizeof(float), stream);
    ev.end->record(stream);
    ev.end->synchronize();
    PhaseTimes p;
    p.input_ms = ev.input->elapsed_ms_since(*ev.start);
    p.h2d_ms = ev.h2d->elapsed_ms_since(*ev.input);
    p.forward_ms = ev.forward->elapsed_ms_since(*ev.h2d);
    p.backward_ms = ev.backward->elapsed_ms_since(*ev.forward);
    p.allreduce_exposed_ms = ev.allreduce->elapsed_ms_since(*ev.backward);
    p.allreduce_ms = allreduce_total;
    p.optimizer_ms = ev.optimizer->elapsed_ms_since(*ev.allreduce);
    p.step_ms = ev.end->elapsed_ms_since(*ev.start);
    SS_CHECK(std::isfinite(host_loss), "the loss became {} at step {} (learning rate {} too high?)",
             host_loss, step, o.optimizer.lr);
    phases.push_back(p);
    losses.push_back(host_loss);
    if (rank == 0 && o.on_step) {
      o.on_step(StepRecord{step, host_loss, p.step_ms, p.input_ms + p.h2d_ms, {}});
    }
    if (step % steps_per_epoch == 0) run_eval(step / steps_per_epoch, step);
  }
  // A final evaluation when training stopped inside an epoch.
  if (g.steps % steps_per_epoch != 0) run_eval(g.steps / steps_per_epoch + 1, g.steps);
  if (rank == 0 && !o.save.empty()) save_checkpoint(o.save, model, &optimizer);
}

}  // namespace

RunReport train(const TrainOptions& o) {
  validate(o);
  const DeviceSpec spec = parse_device_spec(o.devices);
  const ModelDef def = make_model(o.model);
  const RunData data = open_run_data(o.data, def, o.seed);
  const ModelSummary summary = summarize(def, data.sample_shape);
  const int replicas = spec.count();
  const Sampler sampler(data.train->size(), o.batch, replicas, o.seed);
  nvtx::initialize();

  Group g{o,
          spec,
          def,
          data,
          sampler,
          0,
          GlooGroup(replicas, std::chrono::milliseconds(o.collective_timeout_ms)),
          {},
          {},
          {},
          0,
          {},
          {}};
  g.steps = o.epochs > 0 ? o.epochs * sampler.steps_per_epoch() : o.steps;
  g.phases.resize(static_cast<size_t>(replicas));
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
  report.batch = o.batch;
  report.optimizer = to_string(o.optimizer.kind);
  report.lr = o.optimizer.lr;
  report.seed = o.seed;
  report.data = data.train->describe();
  report.warmup_steps = std::min(o.warmup_steps, g.steps - 1);
  report.evals = g.evals;
  for (int64_t i = 0; i < g.steps; ++i) {
    StepRecord r;
    r.step = i + 1;
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
    report.steps.push_back(std::move(r));
  }
  return report;
}

}  // namespace scalescope
