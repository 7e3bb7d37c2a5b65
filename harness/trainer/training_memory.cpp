#include "harness/trainer/training_memory.h"

#include "models/layer_spec.h"

namespace scalescope {

TrainingMemory training_memory(Model& model, int64_t batch, const OptimizerConfig& optimizer,
                               bool staged) {
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float));
  TrainingMemory m;
  m.model = model.memory(batch);
  m.optimizer =
      static_cast<int64_t>(optimizer_state_names(optimizer).size()) * model.flat_size() * kFloat;
  const int64_t labels = label_shape(model.def().loss, model.output_shape()).numel();
  // The stager keeps two batches on a device it copies to, none on one the host reaches.
  const int64_t batches = !staged ? 1 : (model.device().host_accessible() ? 0 : 2);
  m.input = batches * batch * (model.input_shape().numel() + labels) * kFloat;
  m.loss = kFloat;  // one value per micro-batch; one micro-batch a step here
  return m;
}

}  // namespace scalescope
