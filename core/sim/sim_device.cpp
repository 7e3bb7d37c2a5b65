#include "core/sim/sim_device.h"

#include <omp.h>

#include <chrono>
#include <cstring>
#include <string>

#include "core/address_space.h"
#include "core/check.h"
#include "core/cpu_affinity.h"
#include "core/env.h"

namespace scalescope {
namespace {

// cudaMalloc's alignment, so that what needs aligned device pointers (NCCL's vectorised path)
// meets the same addresses here.
constexpr size_t kAlignment = 256;
constexpr int64_t kMaxJitterUs = 1000000;

void* aligned(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, std::max(rounded, kAlignment));
}

}  // namespace

// The device's memory from the system (aligned_alloc; address space when it only plans), and
// its fences.
class SimDevice::Memory final : public CachingAllocator::Source {
 public:
  // `plan_only` held here, not asked of the device: the allocator gives its blocks back while
  // CachingDevice is destroyed, when the SimDevice part of the object is gone already.
  Memory(SimDevice& device, bool plan_only) : device_(device), plan_only_(plan_only) {}
  void* allocate(size_t bytes, std::string& error) noexcept override {
    void* ptr = plan_only_ ? reserve_address_space(bytes) : aligned(bytes);
    if (ptr == nullptr) error = std::strerror(ENOMEM);
    return ptr;
  }
  void free(void* ptr, size_t bytes) noexcept override {
    if (plan_only_) {
      release_address_space(ptr, bytes);
    } else {
      std::free(ptr);
    }
  }
  std::unique_ptr<Event> make_fence() override { return device_.create_ordering_event(); }

 private:
  SimDevice& device_;
  bool plan_only_;
};

SimDevice::SimDevice(int index, int threads, int64_t jitter_us, uint64_t seed, bool plan_only)
    : CachingDevice("", to_string(DeviceId{DeviceKind::kSim, index}),
                    std::make_unique<Memory>(*this, plan_only)),
      index_(index),
      threads_(threads),
      jitter_us_(jitter_us),
      seed_(seed),
      plan_only_(plan_only) {
  SS_CHECK(threads >= 1, "a simulated device needs at least one thread, not {}", threads);
  SS_CHECK(jitter_us >= 0 && jitter_us <= kMaxJitterUs, "sim jitter {} µs must be from 0 to {} µs",
           jitter_us, kMaxJitterUs);
  compute_ = make_stream();
  copy_ = make_stream();
  comm_ = make_stream();
}

SimDevice::~SimDevice() {
  // The streams finish their work before the memory it uses goes away.
  comm_.reset();
  copy_.reset();
  compute_.reset();
}

std::string SimDevice::name() const {
  return fmt::format("simulated accelerator {} ({} thread{}{})", to_string(id()), threads_,
                     threads_ == 1 ? "" : "s",
                     jitter_us_ > 0 ? fmt::format(", jitter up to {} µs", jitter_us_) : "");
}

void SimDevice::make_current() {
  omp_set_num_threads(threads_);
}

std::unique_ptr<SimStream> SimDevice::make_stream() {
  // Each stream its own generator, seeded by the device and the stream's place: a run with
  // the same seed delays every operation alike.
  const uint64_t seed = seed_ ^ (static_cast<uint64_t>(index_) << 32) ^
                        static_cast<uint64_t>(++streams_made_) * 0x9E3779B97F4A7C15ull;
  return std::make_unique<SimStream>(*this, fault_, allocator(), threads_, jitter_us_, seed);
}

void* SimDevice::allocate_host(size_t bytes) {
  void* ptr = aligned(bytes);
  SS_CHECK(ptr != nullptr, "out of host memory allocating {} bytes", bytes);
  return ptr;
}

void SimDevice::deallocate_host(void* ptr) noexcept {
  if (ptr == nullptr) return;
  // As cudaFreeHost does: queued copies may still read or write it.
  allocator().wait_for_streams();
  std::free(ptr);
}

std::unique_ptr<Stream> SimDevice::create_stream() {
  return make_stream();
}

std::unique_ptr<Event> SimDevice::create_event() {
  return std::make_unique<SimEvent>(fault_, /*timing=*/true);
}

std::unique_ptr<Event> SimDevice::create_ordering_event() {
  return std::make_unique<SimEvent>(fault_, /*timing=*/false);
}

void SimDevice::launch(Stream& stream, std::function<void()> work) {
  SimStream& sim = sim_stream(stream);
  SS_CHECK(&sim.device() == this, "work for {} launched on a stream of {}", to_string(id()),
           to_string(sim.device().id()));
  if (!plan_only_) sim.enqueue(std::move(work));
}

void SimDevice::copy_across_link(void* dst, const void* src, size_t bytes, Stream& stream) {
  launch(stream, [=, rate = link_bytes_per_second_] {
    const auto start = std::chrono::steady_clock::now();
    if (bytes > 0) std::memcpy(dst, src, bytes);
    if (rate > 0) {
      std::this_thread::sleep_until(
          start + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(bytes) /
                                                                static_cast<double>(rate) * 1e9)));
    }
  });
}

void SimDevice::copy_to_device(void* dst, const void* host_src, size_t bytes, Stream& stream) {
  copy_across_link(dst, host_src, bytes, stream);
}

void SimDevice::copy_to_host(void* host_dst, const void* src, size_t bytes, Stream& stream) {
  copy_across_link(host_dst, src, bytes, stream);
}

void SimDevice::copy_on_device(void* dst, const void* src, size_t bytes, Stream& stream) {
  launch(stream, [=] {
    if (bytes > 0) std::memmove(dst, src, bytes);
  });
}

void SimDevice::fill_zero(void* dst, size_t bytes, Stream& stream) {
  launch(stream, [=] {
    if (bytes > 0) std::memset(dst, 0, bytes);
  });
}

int64_t sim_jitter_from_environment() {
  return whole_number_from_environment("SCALESCOPE_SIM_JITTER_US", kMaxJitterUs, "microseconds");
}

int64_t sim_link_rate_from_environment() {
  constexpr int64_t kMaxMbps = int64_t{1} << 30;
  return whole_number_from_environment("SCALESCOPE_SIM_LINK_MBPS", kMaxMbps, "MB/s") * 1000000;
}

int64_t sim_library_memory_from_environment() {
  constexpr int64_t kMaxMiB = int64_t{1} << 20;  // a TiB
  return whole_number_from_environment("SCALESCOPE_SIM_LIBRARY_MB", kMaxMiB, "MiB") << 20;
}

namespace {

class SimBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kSim; }
  // Logical devices, like CPU ones: as many as there are cores to give them.
  int device_count() const override { return usable_core_count(); }
  bool logical() const override { return true; }
  std::string unavailable_reason() const override { return ""; }
  // The CPU's: a simulated device computes with the CPU backend's kernels.
  std::vector<LibraryVersion> library_versions() const override {
    return backend(DeviceKind::kCpu).library_versions();
  }
  std::unique_ptr<Device> open(int index, const BackendOptions& options) override {
    SS_CHECK(options.cpu_threads >= 0, "thread count {} is negative", options.cpu_threads);
    SS_CHECK(options.cpu_devices >= 1, "device count {} must be at least 1", options.cpu_devices);
    const int threads = options.cpu_threads > 0
                            ? options.cpu_threads
                            : std::max(1, usable_core_count() / options.cpu_devices);
    auto device = std::make_unique<SimDevice>(index, threads, sim_jitter_from_environment(),
                                              static_cast<uint64_t>(index) + 1, options.plan_only);
    device->set_memory_outside_allocator(sim_library_memory_from_environment());
    device->set_link_bytes_per_second(sim_link_rate_from_environment());
    return device;
  }
};

}  // namespace

std::unique_ptr<Backend> make_sim_backend() {
  return std::make_unique<SimBackend>();
}

}  // namespace scalescope
