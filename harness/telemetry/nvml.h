// NVML (the driver's management library), loaded with dlopen when the program runs: the
// binary must start on machines without a driver, and NVML ships with the driver, not the
// toolkit, so there is no link-time dependency and no nvml.h at build time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace scalescope {

// A value, or the reason it could not be read. NVML is optional: callers print the reason
// instead of failing, so nothing here throws.
template <typename T>
struct NvmlResult {
  std::optional<T> value;
  std::string error;  // empty when value is set

  bool ok() const { return value.has_value(); }
  static NvmlResult failure(std::string why) { return {std::nullopt, std::move(why)}; }
};

struct NvLinkState {
  unsigned link = 0;  // NVML's link index, 0..kNvmlMaxLinks-1
  bool active = false;
};

// nvmlDeviceGetUtilizationRates: the percentage of the driver's last sample period (between
// 1/6 s and 1 s, depending on the GPU) during which a kernel ran, and during which device
// memory was read or written.
struct NvmlUtilization {
  unsigned gpu_percent = 0;
  unsigned memory_percent = 0;
};

// nvmlDeviceGetMemoryInfo: device memory allocated by every process (and the driver), and the
// GPU's total.
struct NvmlMemoryInfo {
  uint64_t used_bytes = 0;
  uint64_t total_bytes = 0;
};

// The library name the driver installs (the unversioned .so comes only with dev packages).
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";
// NVML_NVLINK_MAX_LINKS of current drivers (18 since Hopper); links past a device's own
// count answer "not supported" and are skipped.
inline constexpr unsigned kNvmlMaxLinks = 18;

// Owns one dlopen of NVML and one nvmlInit_v2/nvmlShutdown pair. Move-only. Construct it
// where it is needed (never in a static): nvmlShutdown must run while the driver is still
// loaded, before main returns.
class Nvml {
 public:
  // Never throws: when the library is missing, lacks a symbol or nvmlInit fails, loaded()
  // is false and error() says why (dlerror's text or NVML's).
  explicit Nvml(const std::string& library = kNvmlLibrary);
  ~Nvml();
  Nvml(Nvml&& other) noexcept;
  Nvml& operator=(Nvml&& other) noexcept;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool loaded() const { return init_ok_; }
  // Why loaded() is false ("not loaded: libnvidia-ml.so.1: cannot open shared object
  // file: ..."); empty when loaded.
  const std::string& error() const { return error_; }

  NvmlResult<std::string> driver_version() const;
  // The NVLink links of the GPU at this PCI bus id (as cudaDeviceGetPCIBusId prints it):
  // by bus id rather than index because CUDA_VISIBLE_DEVICES renumbers CUDA's devices but
  // not NVML's. An empty vector means the GPU has no NVLink.
  NvmlResult<std::vector<NvLinkState>> nvlink_states(const std::string& pci_bus_id) const;
  // Utilisation and memory of the GPU at this PCI bus id, now. Cheap enough to call every
  // 100 ms (harness/telemetry/nvml_sampler.h does); thread-safe, as NVML is.
  NvmlResult<NvmlUtilization> utilization(const std::string& pci_bus_id) const;
  NvmlResult<NvmlMemoryInfo> memory_info(const std::string& pci_bus_id) const;

 private:
  struct Api;  // the resolved entry points
  // NVML's handle of the GPU at `pci_bus_id` into *device (an nvmlDevice_t); the reason when
  // there is none, else empty.
  std::string device_handle(const std::string& pci_bus_id, void** device) const;
  void release() noexcept;
  std::string nvml_message(int status) const;

  void* handle_ = nullptr;  // from dlopen
  Api* api_ = nullptr;
  bool init_ok_ = false;
  std::string error_;
};

}  // namespace scalescope
