#include "core/cpu/cpu_device.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "core/address_space.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/cpu_affinity.h"

namespace scalescope {
namespace {

constexpr size_t kAlignment = 64;

// `bytes` rounded up to kAlignment, at least one alignment (aligned_alloc's size must be a
// positive multiple of it).
size_t aligned_size(size_t bytes) {
  return std::max((bytes + kAlignment - 1) / kAlignment * kAlignment, kAlignment);
}

class CpuStream final : public Stream {
 public:
  explicit CpuStream(CpuDevice& device) : device_(device) {}
  Device& device() const override { return device_; }
  void synchronize() override {}  // work ran inline: nothing is pending
  bool idle() const override { return true; }

 private:
  CpuDevice& device_;
};

class CpuEvent final : public Event {
 public:
  void record(Stream& stream) override {
    SS_CHECK(stream.device().id().kind == DeviceKind::kCpu, "CPU event recorded on a {} stream",
             to_string(stream.device().id()));
    time_ns_ = now_ns();
    recorded_ = true;
  }
  void wait_on(Stream&) const override {}  // in-order inline execution: already satisfied
  void synchronize() const override {}
  bool synchronize_for(std::chrono::milliseconds) const override { return true; }
  bool query() const override { return true; }
  double elapsed_ms_since(const Event& start) const override {
    const auto* other = dynamic_cast<const CpuEvent*>(&start);
    check_elapsed(other, true, true);  // every CPU event times
    SS_CHECK(recorded_ && other->recorded_, "elapsed time of an event never recorded");
    return static_cast<double>(time_ns_ - other->time_ns_) * 1e-6;
  }

 private:
  int64_t time_ns_ = 0;
  bool recorded_ = false;
};

// The OpenMP specification the compiler implements, which runs the CPU kernels' loops.
std::string openmp_version() {
#ifdef _OPENMP
  // _OPENMP is the release date of the specification.
  constexpr std::array<std::pair<int, const char*>, 9> kReleases{{{200505, "2.5"},
                                                                  {200805, "3.0"},
                                                                  {201107, "3.1"},
                                                                  {201307, "4.0"},
                                                                  {201511, "4.5"},
                                                                  {201811, "5.0"},
                                                                  {202011, "5.1"},
                                                                  {202111, "5.2"},
                                                                  {202411, "6.0"}}};
  for (const auto& [date, version] : kReleases) {
    if (date == _OPENMP) return fmt::format("{} ({})", version, _OPENMP);
  }
  return fmt::format("{}", _OPENMP);
#else
  return "none";
#endif
}

class CpuBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  int device_count() const override { return usable_core_count(); }
  bool logical() const override { return true; }
  std::string unavailable_reason() const override { return ""; }
  std::unique_ptr<Device> open(int index, const BackendOptions& options) override {
    SS_CHECK(options.cpu_threads >= 0, "CPU thread count {} is negative", options.cpu_threads);
    SS_CHECK(options.cpu_devices >= 1, "CPU device count {} must be at least 1",
             options.cpu_devices);
    const int threads = options.cpu_threads > 0
                            ? options.cpu_threads
                            : std::max(1, usable_core_count() / options.cpu_devices);
    SS_CHECK(static_cast<int64_t>(threads) * options.cpu_devices <= kMaxCpuThreads,
             "{} CPU devices × {} threads each need {} threads; one process may use at most {} "
             "(ask for fewer devices or threads per device)",
             options.cpu_devices, threads, static_cast<int64_t>(threads) * options.cpu_devices,
             kMaxCpuThreads);
    return std::make_unique<CpuDevice>(index, threads, options.plan_only);
  }
  std::vector<LibraryVersion> library_versions() const override {
    return {{"openmp", openmp_version()}};
  }
};

}  // namespace

CpuDevice::CpuDevice(int index, int threads, bool plan_only)
    : index_(index),
      threads_(threads),
      plan_only_(plan_only),
      default_stream_(std::make_unique<CpuStream>(*this)) {}

CpuDevice::~CpuDevice() = default;

std::string CpuDevice::name() const {
  return fmt::format("CPU device {} ({} thread{})", index_, threads_, threads_ == 1 ? "" : "s");
}

void CpuDevice::make_current() {
  omp_set_num_threads(threads_);
}

void* CpuDevice::allocate(size_t bytes) {
  count_allocation(bytes);
  void* ptr = plan_only_ ? reserve_address_space(aligned_size(bytes))
                         : std::aligned_alloc(kAlignment, aligned_size(bytes));
  if (ptr == nullptr) {
    count_deallocation(bytes);
    throw OutOfMemoryError(
        fmt::format("out of memory: cannot allocate {} bytes on {}", bytes, to_string(id())));
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return ptr;
}

void CpuDevice::deallocate(void* ptr, size_t bytes) noexcept {
  if (ptr == nullptr) return;
  if (plan_only_) {
    release_address_space(ptr, aligned_size(bytes));
  } else {
    std::free(ptr);
  }
  count_deallocation(bytes);
}

void* CpuDevice::allocate_host(size_t bytes) {
  // Host staging memory is not the device's: not counted.
  void* ptr = std::aligned_alloc(kAlignment, aligned_size(bytes));
  SS_CHECK(ptr != nullptr, "out of host memory allocating {} bytes", bytes);
  return ptr;
}

void CpuDevice::deallocate_host(void* ptr) noexcept {
  std::free(ptr);
}

std::unique_ptr<Stream> CpuDevice::create_stream() {
  return std::make_unique<CpuStream>(*this);
}
std::unique_ptr<Event> CpuDevice::create_event() {
  return std::make_unique<CpuEvent>();
}

void CpuDevice::copy_to_device(void* dst, const void* host_src, size_t bytes, Stream&) {
  if (bytes > 0 && !plan_only_) std::memcpy(dst, host_src, bytes);
}
void CpuDevice::copy_to_host(void* host_dst, const void* src, size_t bytes, Stream&) {
  if (bytes > 0 && !plan_only_) std::memcpy(host_dst, src, bytes);
}
void CpuDevice::copy_on_device(void* dst, const void* src, size_t bytes, Stream&) {
  if (bytes > 0 && !plan_only_) std::memmove(dst, src, bytes);
}
void CpuDevice::fill_zero(void* dst, size_t bytes, Stream&) {
  if (bytes > 0 && !plan_only_) std::memset(dst, 0, bytes);
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace scalescope
