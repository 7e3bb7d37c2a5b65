// The replicas' weights where the host can read them, and the guard that compares them:
// replicas that applied the same all-reduced gradients hold bit-identical weights (every
// rank receives the same reduced bits and runs the same update), so any difference is a
// fault, reported with the step and the replicas that differ.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/buffer.h"
#include "harness/collectives/communicator.h"
#include "models/model.h"

namespace scalescope {

// FNV-1a over the weights' bits, split into two exactly representable halves (so that the
// checksum travels as doubles).
std::array<double, 2> weights_checksum(std::span<const float> weights);

// A host copy of a model's weights, read through copies (the host never touches device
// memory directly), in memory the device copies to asynchronously.
class HostWeights {
 public:
  explicit HostWeights(Model& model);

  // Copies the weights after the work enqueued on `stream` so far and waits for them
  // through `comm` (which gives up at its timeout naming `what`).
  std::span<float> read(Communicator& comm, Stream& stream, const std::string& what);
  // Writes the host copy back to the model's weights and waits likewise.
  void write_back(Communicator& comm, Stream& stream);
  // The model's buffers (batch norm's running statistics), read like the weights; empty
  // when the model keeps none.
  std::span<float> read_buffers(Communicator& comm, Stream& stream, const std::string& what);

 private:
  Model& model_;
  HostBuffer staging_;
  HostBuffer buffer_staging_;
};

// Collective over `comm`: compares every replica's checksum of `values` (the model's
// `what`: "weights", "buffers") with replica 0's; throws Error naming the step and the
// replicas that differ.
void check_consistency(Communicator& comm, std::span<const float> values, int64_t step,
                       std::string_view what = "weights");

}  // namespace scalescope
