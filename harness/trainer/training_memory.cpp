#include "harness/trainer/training_memory.h"

#include <memory>

#include "models/layer_spec.h"
#include "pipelines/stager.h"

namespace scalescope {

TrainingMemory training_memory(Model& model, int64_t batch, const OptimizerConfig& optimizer,
                               bool staged) {
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float));
  TrainingMemory m;
  m.model = model.memory(batch);
  m.optimizer =
      static_cast<int64_t>(optimizer_state_names(optimizer).size()) * model.flat_size() * kFloat;
  const int64_t labels = label_shape(model.def().loss, model.output_shape()).numel();
  const int64_t sample = model.input_shape().numel();
  m.input = staged ? Stager::device_bytes(model.device(), batch, sample, labels)
                   : batch * (sample + labels) * kFloat;
  m.loss = kFloat;  // one value per micro-batch; one micro-batch a step here
  return m;
}

TrainingMemory plan_training(const ModelDef& def, const Shape& sample, DeviceKind kind,
                             const BackendOptions& options, int64_t batch,
                             const OptimizerConfig& optimizer, bool staged, int* threads) {
  const std::unique_ptr<Device> device = backend(kind).open(0, options);
  device->make_current();
  if (threads != nullptr) *threads = device->threads();
  Model model(def, sample, *device, 1);
  return training_memory(model, batch, optimizer, staged);
}

}  // namespace scalescope
