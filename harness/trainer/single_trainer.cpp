#include "harness/trainer/single_trainer.h"

#include <cmath>
#include <thread>

#include "core/backend.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/cpu/cpu_device.h"
#include "core/device_spec.h"
#include "core/nvtx.h"
#include "harness/trainer/labels.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "models/zoo.h"
#include "pipelines/synthetic.h"

namespace scalescope {

void validate(const TrainOptions& o) {
  SS_CHECK(o.batch > 0, "--batch {} must be a positive number of samples", o.batch);
  SS_CHECK(o.steps > 0, "--steps {} must be a positive number of steps", o.steps);
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
  (void)summarize(def, def.default_input);
}

RunReport train(const TrainOptions& o) {
  validate(o);
  const DeviceSpec spec = parse_device_spec(o.devices);
  const ModelDef def = make_model(o.model);
  const Shape input = def.default_input;
  const ModelSummary summary = summarize(def, input);

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

  const LabelSpec labels = label_spec_for(def.loss, model.output_shape());
  SyntheticSource source(input, labels, o.seed);
  HostBatch host;
  Tensor inputs(*device, input.with_batch(o.batch));
  Tensor targets(*device, Shape{o.batch, labels.width()});
  Tensor loss(*device, Shape{1});
  Stream& stream = device->default_stream();

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
  report.data = "synthetic";
  report.warmup_steps = std::min(o.warmup_steps, o.steps - 1);

  const float scale = 1.0f / static_cast<float>(o.batch);
  float host_loss = 0.0f;
  for (int64_t step = 1; step <= o.steps; ++step) {
    const int64_t start = now_ns();
    {
      nvtx::Range range(nvtx::Phase::kInput, step);
      source.next(o.batch, host);
    }
    {
      nvtx::Range range(nvtx::Phase::kH2D, step);
      device->copy_to_device(inputs.data(), host.inputs.data(), inputs.bytes(), stream);
      device->copy_to_device(targets.data(), host.labels.data(), targets.bytes(), stream);
    }
    const int64_t input_done = now_ns();
    {
      nvtx::Range range(nvtx::Phase::kForward, step);
      model.forward(inputs.data(), o.batch, stream);
      model.loss_forward_backward(targets.data(), scale, loss.data(), stream);
    }
    {
      nvtx::Range range(nvtx::Phase::kBackward, step);
      model.backward(stream);
    }
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
  }
  if (!o.save.empty()) save_checkpoint(o.save, model, &optimizer);
  return report;
}

}  // namespace scalescope
