// The last stage of the input pipeline: hands ready host batches to a device.
//
// On CPU the device reads host memory, so the host batch is handed over as it is: no copy.
// On a GPU a batch goes through pinned host memory and is copied on the stager's own copy
// stream, in two calls: start() copies it into pinned memory and enqueues the copy, take()
// makes the compute stream wait for that copy with an event (no host synchronisation). A
// batch started while the previous step still computes is copied during that compute, as
// DALI's and PyTorch's prefetching loaders do. Two slots alternate: the host refills a slot
// only after its previous copy finished, and the copy stream overwrites a slot's device
// memory only after the compute that read it (release()).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "core/device.h"
#include "pipelines/batch.h"

namespace scalescope {

class Stager {
 public:
  // Batches of `batch` samples of `sample_floats` inputs and `label_floats` labels each.
  Stager(Device& device, int64_t batch, int64_t sample_floats, int64_t label_floats);
  ~Stager();
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  // The device memory such a stager holds: a batch per slot where it copies, none on a
  // device that reads host memory.
  static int64_t device_bytes(const Device& device, int64_t batch, int64_t sample_floats,
                              int64_t label_floats);

  struct Staged {
    const float* inputs = nullptr;  // device memory (on CPU: the host batch itself)
    const float* labels = nullptr;
    // Bracket the copy on the copy stream (null on CPU, where nothing is copied).
    const Event* copy_start = nullptr;
    const Event* copy_end = nullptr;
  };

  // Whether batches are copied (false where the device reads host memory: then a started
  // batch is the host batch itself, which must stay valid until its compute has run).
  bool copies() const { return copies_; }
  // Starts moving `batch` to the device. With copies, `batch` may be reused when this
  // returns. REQUIRES: the device current; `batch` has the sizes given at construction; no
  // batch started and not yet taken.
  void start(const HostBatch& batch);
  // Whether a started batch waits to be taken.
  bool started() const { return pending_ >= 0; }
  // The started batch, ready for the work enqueued on `compute` from now (the compute waits
  // for its copy). REQUIRES: started().
  Staged take(Stream& compute);
  // Marks the last taken batch's device memory free once the work enqueued on `compute`
  // so far has run. Call after the step's last use of the batch (after backward).
  void release(Stream& compute);

 private:
  struct Slot {
    HostBuffer pinned;
    DeviceBuffer device;
    std::unique_ptr<Event> copy_start;
    std::unique_ptr<Event> copy_end;
    std::unique_ptr<Event> consumed;
    bool in_flight = false;  // copy_end and consumed have been recorded
  };

  Device& device_;
  int64_t input_bytes_;
  int64_t label_bytes_;
  bool copies_;  // false where the device reads host memory directly (CPU)
  std::unique_ptr<Stream> copy_stream_;
  static constexpr size_t kSlots = 2;  // one batch copied while the other is computed on
  std::array<Slot, kSlots> slots_;
  int next_slot_ = 0;
  int pending_ = -1;                       // the started slot not yet taken
  const HostBatch* host_batch_ = nullptr;  // the started batch, without copies
  int last_slot_ = -1;
};

}  // namespace scalescope
