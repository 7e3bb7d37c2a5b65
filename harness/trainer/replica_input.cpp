#include "harness/trainer/replica_input.h"

#include <vector>

namespace scalescope {

ReplicaInput::ReplicaInput(Device& device, const RunData& data, const DataOptions& options,
                           const Sampler& sampler, int rank, int64_t replica_batch, uint64_t seed,
                           bool prefetch)
    : prefetch_(prefetch) {
  const Shape& sample = data.sample_shape;
  const int64_t label_width = data.train->labels().width();
  if (!data.device_resident) {
    PipelineConfig config;
    config.workers = options.workers;
    config.queue_depth = options.queue_depth;
    config.transforms = data.train_transforms;
    config.seed = seed;
    pipeline_.emplace(*data.train, sampler, rank, config);
    stager_.emplace(device, replica_batch, sample.numel(), label_width);
    return;
  }
  std::vector<float> x(static_cast<size_t>(replica_batch * sample.numel()));
  std::vector<float> y(static_cast<size_t>(replica_batch * label_width));
  for (int64_t i = 0; i < replica_batch; ++i) {
    data.train->read(rank * replica_batch + i, x.data() + i * sample.numel(),
                     y.data() + i * label_width);
  }
  resident_inputs_ = Tensor(device, sample.with_batch(replica_batch));
  resident_labels_ = Tensor(device, Shape{replica_batch * label_width});
  resident_inputs_.copy_from_host(x);
  resident_labels_.copy_from_host(y);
}

ReplicaInput::Batch ReplicaInput::next(StepTimer& timer, int64_t step, Stream& compute) {
  if (!pipeline_) {
    { const auto input = timer.phase(Phase::kInput, step); }
    { const auto h2d = timer.phase(Phase::kH2D, step); }
    return {resident_inputs_.data(), resident_labels_.data()};
  }
  const HostBatch* host = nullptr;
  {
    // Nothing to wait for when the batch came during the step before.
    const auto input = timer.phase(Phase::kInput, step);
    if (!stager_->started()) host = &pipeline_->next();
  }
  const auto h2d = timer.phase(Phase::kH2D, step);
  // Without prefetch, the host's copy into pinned memory and the copy itself: the device
  // waits for both.
  if (host != nullptr) stager_->start(*host);
  const Stager::Staged staged = stager_->take(compute);
  timer.copied_between(staged.copy_start, staged.copy_end);
  return {staged.inputs, staged.labels};
}

void ReplicaInput::prefetch() {
  if (!prefetch_ || !pipeline_ || !stager_->copies() || stager_->started()) return;
  if (const HostBatch* host = pipeline_->try_next()) stager_->start(*host);
}

void ReplicaInput::release(Stream& compute) {
  if (stager_) stager_->release(compute);
}

}  // namespace scalescope
