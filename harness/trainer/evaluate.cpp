#include "harness/trainer/evaluate.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace scalescope {

EvalResult EvalSums::result() const {
  EvalResult r;
  r.samples = samples;
  r.loss = samples > 0 ? loss / static_cast<double>(samples) : 0.0;
  r.accuracy = samples > 0 ? correct / static_cast<double>(samples) : 0.0;
  return r;
}

EvalResult evaluate(Model& model, const Dataset& data, const TransformConfig& transforms,
                    int64_t batch, uint64_t seed) {
  return evaluate_shard(model, data, transforms, batch, seed, 0, 1).result();
}

EvalSums evaluate_shard(Model& model, const Dataset& data, const TransformConfig& transforms,
                        int64_t batch, uint64_t seed, int shard, int shards) {
  SS_CHECK(batch > 0, "evaluation batch {} must be positive", batch);
  SS_CHECK(shards >= 1 && shard >= 0 && shard < shards, "evaluation shard {} of {}", shard, shards);
  const int64_t first = data.size() * shard / shards;
  const int64_t last = data.size() * (shard + 1) / shards;
  Device& device = model.device();
  Stream& stream = device.default_stream();
  const Shape sample = data.sample_shape();
  const int64_t features = sample.numel();
  const int64_t width = data.labels().width();
  std::vector<float> inputs(static_cast<size_t>(batch * features));
  std::vector<float> labels(static_cast<size_t>(batch * width));
  std::vector<float> scratch(static_cast<size_t>(features));
  Tensor dev_inputs(device, sample.with_batch(batch));
  Tensor dev_labels(device, Shape{batch * width});
  Tensor sums(device, Shape{2});  // loss sum, correct count
  double loss = 0.0;
  double correct = 0.0;
  for (int64_t begin = first; begin < last; begin += batch) {
    const int64_t n = std::min(batch, last - begin);
    for (int64_t i = 0; i < n; ++i) {
      float* x = inputs.data() + i * features;
      data.read(begin + i, x, labels.data() + i * width);
      if (transforms.any()) {
        apply_transforms(transforms, sample, seed, 0, begin + i, x, scratch.data());
      }
    }
    device.copy_to_device(dev_inputs.data(), inputs.data(),
                          static_cast<size_t>(n * features) * sizeof(float), stream);
    device.copy_to_device(dev_labels.data(), labels.data(),
                          static_cast<size_t>(n * width) * sizeof(float), stream);
    model.forward(dev_inputs.data(), n, stream, /*training=*/false);
    model.loss_forward(dev_labels.data(), 1.0f, sums.data(), stream);
    model.count_correct(dev_labels.data(), sums.data() + 1, stream);
    float host[2] = {0.0f, 0.0f};
    device.copy_to_host(host, sums.data(), sizeof(host), stream);
    stream.synchronize();
    loss += host[0];
    correct += host[1];
  }
  return EvalSums{loss, correct, last - first};
}

}  // namespace scalescope
