#include "pipelines/stager.h"

#include <cstring>
#include <utility>

#include "core/check.h"

namespace scalescope {

Stager::Stager(Device& device, int64_t batch, int64_t sample_floats, int64_t label_floats)
    : device_(device),
      input_bytes_(batch * sample_floats * static_cast<int64_t>(sizeof(float))),
      label_bytes_(batch * label_floats * static_cast<int64_t>(sizeof(float))),
      copies_(!device.host_accessible()) {
  SS_CHECK(batch > 0 && sample_floats > 0 && label_floats > 0,
           "stager for batches of {} samples x {} floats (labels {}): sizes must be positive",
           batch, sample_floats, label_floats);
  if (!copies_) return;
  copy_stream_ = device.create_stream();
  const auto bytes = static_cast<size_t>(input_bytes_ + label_bytes_);
  for (Slot& slot : slots_) {
    slot.pinned = HostBuffer(device, bytes);
    slot.device = DeviceBuffer(device, bytes);
    slot.copy_start = device.create_event();
    slot.copy_end = device.create_event();
    slot.consumed = device.create_event();
  }
}

int64_t Stager::device_bytes(const Device& device, int64_t batch, int64_t sample_floats,
                             int64_t label_floats) {
  if (device.host_accessible()) return 0;
  return static_cast<int64_t>(kSlots) * batch * (sample_floats + label_floats) *
         static_cast<int64_t>(sizeof(float));
}

Stager::~Stager() {
  // Copies still in flight read pinned memory we are about to free.
  if (copy_stream_) {
    try {
      copy_stream_->synchronize();
    } catch (const Error& e) {
      SS_LOG_ERROR("stager: {}", e.what());
    }
  }
}

void Stager::start(const HostBatch& batch) {
  SS_CHECK(static_cast<int64_t>(batch.inputs.size() * sizeof(float)) == input_bytes_ &&
               static_cast<int64_t>(batch.labels.size() * sizeof(float)) == label_bytes_,
           "stager sized for {} + {} bytes got a batch of {} + {} bytes", input_bytes_,
           label_bytes_, batch.inputs.size() * sizeof(float), batch.labels.size() * sizeof(float));
  SS_CHECK(pending_ < 0, "stager: a second batch started before the first was taken");
  pending_ = next_slot_;
  next_slot_ = (next_slot_ + 1) % static_cast<int>(kSlots);
  if (!copies_) {
    host_batch_ = &batch;
    return;
  }
  Slot& slot = slots_[static_cast<size_t>(pending_)];
  if (slot.in_flight) {
    // The host may refill the pinned slot only when its previous copy has finished; two
    // slots make this wait rare (it means the host is two batches ahead of the copies).
    slot.copy_end->synchronize();
    // The device slot may be overwritten only after the compute that read it.
    slot.consumed->wait_on(*copy_stream_);
    slot.in_flight = false;
  }
  auto* pinned = static_cast<char*>(slot.pinned.data());
  std::memcpy(pinned, batch.inputs.data(), static_cast<size_t>(input_bytes_));
  std::memcpy(pinned + input_bytes_, batch.labels.data(), static_cast<size_t>(label_bytes_));
  slot.copy_start->record(*copy_stream_);
  device_.copy_to_device(slot.device.data(), pinned,
                         static_cast<size_t>(input_bytes_ + label_bytes_), *copy_stream_);
  slot.copy_end->record(*copy_stream_);
}

Stager::Staged Stager::take(Stream& compute) {
  SS_CHECK(pending_ >= 0, "stager: take() without a started batch");
  last_slot_ = std::exchange(pending_, -1);
  if (!copies_) {
    const HostBatch& batch = *std::exchange(host_batch_, nullptr);
    return Staged{batch.inputs.data(), batch.labels.data(), nullptr, nullptr};
  }
  Slot& slot = slots_[static_cast<size_t>(last_slot_)];
  slot.copy_end->wait_on(compute);
  const auto* base = static_cast<const char*>(slot.device.data());
  return Staged{reinterpret_cast<const float*>(base),
                reinterpret_cast<const float*>(base + input_bytes_), slot.copy_start.get(),
                slot.copy_end.get()};
}

void Stager::release(Stream& compute) {
  SS_CHECK(last_slot_ >= 0, "stager: release() before any take()");
  if (!copies_) return;
  Slot& slot = slots_[static_cast<size_t>(last_slot_)];
  slot.consumed->record(compute);
  slot.in_flight = true;
}

}  // namespace scalescope
