#include "harness/trainer/consistency.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/check.h"

namespace scalescope {
namespace {

uint64_t bits_of(const std::vector<double>& all, int rank) {
  const auto i = 2 * static_cast<size_t>(rank);
  return (static_cast<uint64_t>(all[i]) << 32) | static_cast<uint64_t>(all[i + 1]);
}

}  // namespace

std::array<double, 2> weights_checksum(std::span<const float> weights) {
  uint64_t h = 1469598103934665603ull;
  for (const std::byte b : std::as_bytes(weights)) {
    h = (h ^ static_cast<uint64_t>(b)) * 1099511628211ull;
  }
  return {static_cast<double>(h >> 32), static_cast<double>(h & 0xffffffffu)};
}

HostWeights::HostWeights(Model& model)
    : model_(model),
      staging_(model.device(), static_cast<size_t>(model.flat_size()) * sizeof(float)),
      buffer_staging_(model.device(), static_cast<size_t>(model.buffer_count()) * sizeof(float)) {}

std::span<float> HostWeights::read(Communicator& comm, Stream& stream, const std::string& what) {
  model_.device().copy_to_host(staging_.data(), model_.weights().data(), staging_.bytes(), stream);
  comm.synchronize(stream, what);
  return {static_cast<float*>(staging_.data()), static_cast<size_t>(model_.flat_size())};
}

void HostWeights::write_back(Communicator& comm, Stream& stream) {
  model_.device().copy_to_device(model_.weights().data(), staging_.data(), staging_.bytes(),
                                 stream);
  comm.synchronize(stream, "restoring the weights");
}

std::span<float> HostWeights::read_buffers(Communicator& comm, Stream& stream,
                                           const std::string& what) {
  const int64_t count = model_.buffer_count();
  if (count == 0) return {};
  model_.device().copy_to_host(buffer_staging_.data(), model_.buffers().data(),
                               buffer_staging_.bytes(), stream);
  comm.synchronize(stream, what);
  return {static_cast<float*>(buffer_staging_.data()), static_cast<size_t>(count)};
}

void check_consistency(Communicator& comm, std::span<const float> values, int64_t step,
                       std::string_view what) {
  const std::vector<double> all = comm.all_gather(weights_checksum(values));
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r) {
    if (bits_of(all, r) != bits_of(all, 0)) differ.push_back(r);
  }
  SS_CHECK(differ.empty(),
           "replicas diverged: after step {} the {} of replica(s) {} differ from replica "
           "0's (checksums {:016x} vs {:016x}); synchronous training keeps them identical",
           step, what, fmt::join(differ, ", "), bits_of(all, differ.front()), bits_of(all, 0));
}

}  // namespace scalescope
