// The simulated accelerator ("sim" devices): a device that behaves like a GPU and computes
// on the CPU. Its streams are real queues run by worker threads (core/sim/sim_stream.h), its
// copies and kernels are enqueued work, its memory comes from the same caching allocator as
// a GPU's (fenced against queued work), and the host never touches its memory except
// through copies. It exists so that the GPU path's orchestration (streams, events, staging,
// the allocator's fences, enqueued collectives, host waits, aborts) runs where there is no
// GPU. Its timings are CPU timings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/backend.h"
#include "core/caching_device.h"
#include "core/device.h"
#include "core/sim/sim_stream.h"

namespace scalescope {

class SimDevice final : public CachingDevice {
 public:
  // `threads`: the CPU threads each stream's kernels use; `jitter_us`: chaos mode's largest
  // delay per operation (0: off), seeded by `seed` and the device and stream; `plan_only`:
  // BackendOptions::plan_only (launches then do nothing).
  SimDevice(int index, int threads, int64_t jitter_us, uint64_t seed, bool plan_only = false);
  ~SimDevice() override;

  DeviceId id() const override { return DeviceId{DeviceKind::kSim, index_}; }
  std::string name() const override;
  // Sets the calling thread's OpenMP threads to the device's: the host thread runs no
  // kernel, but it plans them (oneDNN sizes its primitives by the threads it sees then).
  void make_current() override;
  int threads() const override { return threads_; }
  bool plans_only() const override { return plan_only_; }
  int64_t jitter_us() const { return jitter_us_; }
  // Memory the device reports as held by libraries outside its allocator (a GPU's NCCL
  // buffers; none of the sim's own collectives allocate any).
  void set_memory_outside_allocator(int64_t bytes) { outside_bytes_ = bytes; }
  // A host link of this many bytes per second (0: as fast as memcpy): each copy between host
  // and device then takes at least its bytes over this rate on its stream, as a PCIe link
  // would, so that what overlapping copies with compute buys shows on CPU threads.
  void set_link_bytes_per_second(int64_t rate) { link_bytes_per_second_ = rate; }
  int64_t memory_outside_allocator() const override { return outside_bytes_; }

  void* allocate_host(size_t bytes) override;
  // Waits for the device's streams first, as cudaFreeHost synchronizes: queued copies may
  // still use the memory.
  void deallocate_host(void* ptr) noexcept override;

  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  std::unique_ptr<Event> create_ordering_event() override;
  Stream& default_stream() override { return *compute_; }
  Stream& copy_stream() override { return *copy_; }
  Stream& comm_stream() override { return *comm_; }

  void copy_to_device(void* dst, const void* host_src, size_t bytes, Stream& stream) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes, Stream& stream) override;
  void copy_on_device(void* dst, const void* src, size_t bytes, Stream& stream) override;
  void fill_zero(void* dst, size_t bytes, Stream& stream) override;

  // Runs `work` on `stream` when its turn comes: a kernel launch. The work captures its
  // arguments now, as a launch does. REQUIRES: `stream` is one of this device's.
  void launch(Stream& stream, std::function<void()> work);

 private:
  class Memory;  // aligned_alloc and free (or address space), for the caching allocator
  std::unique_ptr<SimStream> make_stream();
  // Enqueues a copy across the host link (memcpy, then the rest of its time on the link).
  void copy_across_link(void* dst, const void* src, size_t bytes, Stream& stream);

  int index_;
  int threads_;
  int64_t jitter_us_;
  uint64_t seed_;
  bool plan_only_;
  int64_t outside_bytes_ = 0;
  int64_t link_bytes_per_second_ = 0;
  int streams_made_ = 0;
  SimFault fault_;
  std::unique_ptr<SimStream> compute_;
  std::unique_ptr<SimStream> copy_;
  std::unique_ptr<SimStream> comm_;
};

// Chaos mode's delay from the environment: SCALESCOPE_SIM_JITTER_US (0 when unset); throws
// Error naming the value when it is not a whole number of microseconds from 0 to 1000000.
int64_t sim_jitter_from_environment();
// What a GPU's libraries would hold outside the allocator (NCCL's buffers), for runs that
// test its accounting: SCALESCOPE_SIM_LIBRARY_MB, in bytes (0 when unset); throws Error
// naming the value when it is not a whole number of MiB.
int64_t sim_library_memory_from_environment();
// The host link's rate: SCALESCOPE_SIM_LINK_MBPS in MB/s (10^6 bytes), as bytes per second (0,
// as fast as memcpy, when unset); throws Error naming a value that is not a whole number.
int64_t sim_link_rate_from_environment();

std::unique_ptr<Backend> make_sim_backend();

}  // namespace scalescope
