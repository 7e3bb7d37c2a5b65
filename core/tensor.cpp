#include "core/tensor.h"

#include "core/check.h"

namespace scalescope {

Tensor::Tensor(Device& device, Shape shape)
    : shape_(std::move(shape)),
      buffer_(device, static_cast<size_t>(shape_.numel()) * sizeof(float)) {}

void Tensor::copy_from_host(std::span<const float> host) {
  SS_CHECK(static_cast<int64_t>(host.size()) == numel(),
           "copy of {} values into a tensor of shape {}", host.size(), shape_.to_string());
  if (host.empty()) return;
  Stream& stream = device()->default_stream();
  device()->copy_to_device(data(), host.data(), bytes(), stream);
  stream.synchronize();
}

std::vector<float> Tensor::to_host() const {
  std::vector<float> host(static_cast<size_t>(numel()));
  if (host.empty()) return host;
  Stream& stream = device()->default_stream();
  device()->copy_to_host(host.data(), data(), bytes(), stream);
  stream.synchronize();
  return host;
}

}  // namespace scalescope
