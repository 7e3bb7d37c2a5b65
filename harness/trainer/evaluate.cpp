#include "harness/trainer/evaluate.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace scalescope {

EvalResult evaluate(Model& model, const Dataset& data, const TransformConfig& transforms,
                    int64_t batch, uint64_t seed) {
  SS_CHECK(batch > 0, "evaluation batch {} must be positive", batch);
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
  for (int64_t begin = 0; begin < data.size(); begin += batch) {
    const int64_t n = std::min(batch, data.size() - begin);
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
    model.forward(dev_inputs.data(), n, stream);
    model.loss_forward(dev_labels.data(), 1.0f, sums.data(), stream);
    model.count_correct(dev_labels.data(), sums.data() + 1, stream);
    float host[2] = {0.0f, 0.0f};
    device.copy_to_host(host, sums.data(), sizeof(host), stream);
    stream.synchronize();
    loss += host[0];
    correct += host[1];
  }
  EvalResult r;
  r.samples = data.size();
  r.loss = loss / static_cast<double>(r.samples);
  r.accuracy = correct / static_cast<double>(r.samples);
  return r;
}

}  // namespace scalescope
