#include "harness/trainer/single_trainer.h"

#include <cmath>
#include <optional>

#include "core/backend.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/cpu/cpu_device.h"
#include "core/device_spec.h"
#include "core/nvtx.h"
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
  SS_CHECK(o.steps >= 0, "--steps {} must be a positive number of steps", o.steps);
  SS_CHECK(o.threads >= 0, "--threads {} must be 0 (automatic) or positive", o.threads);
  SS_CHECK(o.warmup_steps >= 0, "warm-up steps {} must not be negative", o.warmup_steps);
  SS_CHECK(std::isfinite(o.optimizer.lr) && o.optimizer.lr > 0.0f,
           "--lr {} must be a positive number", o.optimizer.lr);
  const DeviceSpec spec = parse_device_spec(o.devices);
  SS_CHECK(spec.count() == 1,
           "--devices {}: `train` runs on one device until the mirrored trainer lands; "
           "use cpu:1 or cuda:I",
           o.devices);
  check_devices_available(spec);
  const ModelDef def = make_model(o.model);  // throws on an unknown model or key
  (void)parse_data_spec(o.data.spec);
}

RunReport train(const TrainOptions& o) {
  validate(o);
  const DeviceSpec spec = parse_device_spec(o.devices);
  const ModelDef def = make_model(o.model);
  const RunData data = open_run_data(o.data, def, o.seed);
  const Shape& input = data.sample_shape;
  const ModelSummary summary = summarize(def, input);
  const Sampler sampler(data.train->size(), o.batch, 1, o.seed);
  const int64_t steps = o.epochs > 0 ? o.epochs * sampler.steps_per_epoch() : o.steps;

  BackendOptions backend_options;
  backend_options.cpu_threads = o.threads;
  backend_options.cpu_devices = spec.count();
  std::unique_ptr<Device> device = backend(spec.kind).open(spec.indices.front(), backend_options);
  device->make_current();
  set_thread_rank(0);
  nvtx::name_current_thread("scalescope replica 0");

  Model model(def, input, *device, o.seed);
  Optimizer optimizer(o.optimizer, model);
  if (!o.load.empty()) load_checkpoint(o.load, model, &optimizer);

  const int64_t label_width = data.train->labels().width();
  Stream& stream = device->default_stream();
  Stager stager(*device, o.batch, input.numel(), label_width);
  PipelineConfig pipeline_config;
  pipeline_config.workers = o.data.workers;
  pipeline_config.queue_depth = o.data.queue_depth;
  pipeline_config.transforms = data.train_transforms;
  pipeline_config.seed = o.seed;
  std::optional<InputPipeline> pipeline;
  // synthetic:device: one batch, staged once, reused by every step: no input cost at all.
  HostBatch resident;
  Tensor resident_inputs;
  Tensor resident_labels;
  if (data.device_resident) {
    resident.size = o.batch;
    resident.sample_shape = input;
    resident.inputs.resize(static_cast<size_t>(o.batch * input.numel()));
    resident.labels.resize(static_cast<size_t>(o.batch * label_width));
    for (int64_t i = 0; i < o.batch; ++i) {
      data.train->read(i, resident.inputs.data() + i * input.numel(),
                       resident.labels.data() + i * label_width);
    }
    resident_inputs = Tensor(*device, input.with_batch(o.batch));
    resident_labels = Tensor(*device, Shape{o.batch * label_width});
    resident_inputs.copy_from_host(resident.inputs);
    resident_labels.copy_from_host(resident.labels);
  } else {
    pipeline.emplace(*data.train, sampler, 0, pipeline_config);
  }
  Tensor loss(*device, Shape{1});

  RunReport report;
  report.command_line = o.command_line;
  report.model = def.name;
  report.params = summary.params;
  report.forward_flops_per_sample = summary.forward_flops;
  report.input_shape = input.to_string();
  report.devices = to_string(spec);
  if (auto* cpu = dynamic_cast<CpuDevice*>(device.get()))
    report.threads_per_device = cpu->threads();
  report.batch = o.batch;
  report.optimizer = to_string(o.optimizer.kind);
  report.lr = o.optimizer.lr;
  report.seed = o.seed;
  report.data = data.train->describe();
  report.warmup_steps = std::min(o.warmup_steps, steps - 1);

  const auto run_eval = [&](int64_t epoch, int64_t step) {
    if (!o.eval) return;
    const EvalResult r = evaluate(model, *data.eval, data.eval_transforms, o.batch, o.seed);
    const EvalRecord record{epoch, step, r.loss, r.accuracy};
    report.evals.push_back(record);
    if (o.on_eval) o.on_eval(record);
  };

  const float scale = 1.0f / static_cast<float>(o.batch);
  float host_loss = 0.0f;
  for (int64_t step = 1; step <= steps; ++step) {
    const int64_t start = now_ns();
    const float* inputs = resident_inputs.data();
    const float* labels = resident_labels.data();
    if (pipeline) {
      const HostBatch* batch = nullptr;
      {
        nvtx::Range range(nvtx::Phase::kInput, step);
        batch = &pipeline->next();
      }
      nvtx::Range range(nvtx::Phase::kH2D, step);
      const Stager::Staged staged = stager.stage(*batch, stream);
      inputs = staged.inputs;
      labels = staged.labels;
    }
    const int64_t input_done = now_ns();
    {
      nvtx::Range range(nvtx::Phase::kForward, step);
      model.forward(inputs, o.batch, stream);
      model.loss_forward_backward(labels, scale, loss.data(), stream);
    }
    {
      nvtx::Range range(nvtx::Phase::kBackward, step);
      model.backward(stream);
    }
    if (pipeline) stager.release(stream);
    {
      nvtx::Range range(nvtx::Phase::kOptimizer, step);
      optimizer.step(stream);
    }
    // The one host synchronisation of the step: reading the loss ends it.
    device->copy_to_host(&host_loss, loss.data(), sizeof(float), stream);
    stream.synchronize();
    const StepRecord record{step, static_cast<double>(host_loss),
                            static_cast<double>(now_ns() - start) * 1e-6,
                            static_cast<double>(input_done - start) * 1e-6};
    SS_CHECK(std::isfinite(host_loss), "the loss became {} at step {} (learning rate {} too high?)",
             host_loss, step, o.optimizer.lr);
    report.steps.push_back(record);
    if (o.on_step) o.on_step(record);
    if (step % sampler.steps_per_epoch() == 0) run_eval(step / sampler.steps_per_epoch(), step);
  }
  // A final evaluation when training stopped inside an epoch.
  if (steps % sampler.steps_per_epoch() != 0) {
    run_eval(steps / sampler.steps_per_epoch() + 1, steps);
  }
  if (!o.save.empty()) save_checkpoint(o.save, model, &optimizer);
  return report;
}

}  // namespace scalescope
