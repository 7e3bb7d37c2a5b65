#include "harness/telemetry/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/log.h"

namespace scalescope {
namespace {

// The few declarations of nvml.h we use, with the documented signatures and values
// (NVML API reference); nvml.h itself is not available at build time.
using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
enum nvmlEnableState_t { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using DriverVersionFn = nvmlReturn_t (*)(char*, unsigned);
using HandleByBusIdFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using NvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlEnableState_t*);
struct nvmlUtilization_t {
  unsigned gpu;
  unsigned memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using UtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using MemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlerror";
}

}  // namespace

struct Nvml::Api {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  DriverVersionFn driver_version = nullptr;
  HandleByBusIdFn handle_by_bus_id = nullptr;
  NvLinkStateFn nvlink_state = nullptr;
  UtilizationFn utilization = nullptr;
  MemoryInfoFn memory_info = nullptr;
};

Nvml::Nvml(const std::string& library) {
  // RTLD_LOCAL: NVML's symbols must not satisfy anyone else's undefined references.
  handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    error_ = fmt::format("not loaded: {}", dl_error());
    return;
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    (void)dlerror();
    void* sym = dlsym(handle_, name);
    if (sym == nullptr) {
      missing += fmt::format("{}{} ({})", missing.empty() ? "" : ", ", name, dl_error());
      return;
    }
    // POSIX guarantees that a dlsym result converts to a function pointer.
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
  };
  resolve(api->init, "nvmlInit_v2");
  resolve(api->shutdown, "nvmlShutdown");
  resolve(api->error_string, "nvmlErrorString");
  resolve(api->driver_version, "nvmlSystemGetDriverVersion");
  resolve(api->handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  resolve(api->nvlink_state, "nvmlDeviceGetNvLinkState");
  resolve(api->utilization, "nvmlDeviceGetUtilizationRates");
  resolve(api->memory_info, "nvmlDeviceGetMemoryInfo");
  if (!missing.empty()) {
    error_ = fmt::format("not loaded: {} lacks {}", library, missing);
    release();
    return;
  }
  api_ = api.release();
  const nvmlReturn_t status = api_->init();
  if (status != NVML_SUCCESS) {
    error_ = fmt::format("not loaded: nvmlInit_v2 failed: {}", nvml_message(status));
    release();
    return;
  }
  init_ok_ = true;
}

Nvml::~Nvml() {
  release();
}

Nvml::Nvml(Nvml&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      api_(std::exchange(other.api_, nullptr)),
      init_ok_(std::exchange(other.init_ok_, false)),
      error_(std::move(other.error_)) {}

Nvml& Nvml::operator=(Nvml&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
    api_ = std::exchange(other.api_, nullptr);
    init_ok_ = std::exchange(other.init_ok_, false);
    error_ = std::move(other.error_);
  }
  return *this;
}

void Nvml::release() noexcept {
  if (init_ok_) {
    // A destructor logs and never throws.
    const nvmlReturn_t status = api_->shutdown();
    if (status != NVML_SUCCESS) SS_LOG_ERROR("nvmlShutdown failed: {}", nvml_message(status));
    init_ok_ = false;
  }
  delete api_;
  api_ = nullptr;
  if (handle_ != nullptr) {
    dlclose(handle_);
    handle_ = nullptr;
  }
}

std::string Nvml::nvml_message(int status) const {
  const char* text = api_ != nullptr ? api_->error_string(status) : nullptr;
  return fmt::format("{} (nvmlReturn_t {})", text != nullptr ? text : "unknown error", status);
}

NvmlResult<std::string> Nvml::driver_version() const {
  if (!init_ok_) return NvmlResult<std::string>::failure(error_);
  std::array<char, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE> text{};
  const nvmlReturn_t status = api_->driver_version(text.data(), text.size());
  if (status != NVML_SUCCESS) {
    return NvmlResult<std::string>::failure(
        fmt::format("nvmlSystemGetDriverVersion failed: {}", nvml_message(status)));
  }
  return {std::string(text.data()), {}};
}

std::string Nvml::device_handle(const std::string& pci_bus_id, void** device) const {
  if (!init_ok_) return error_.empty() ? std::string("not loaded (moved from)") : error_;
  nvmlDevice_t handle = nullptr;
  const nvmlReturn_t status = api_->handle_by_bus_id(pci_bus_id.c_str(), &handle);
  if (status != NVML_SUCCESS) {
    return fmt::format("nvmlDeviceGetHandleByPciBusId_v2(\"{}\") failed: {}", pci_bus_id,
                       nvml_message(status));
  }
  *device = handle;
  return {};
}

NvmlResult<NvmlUtilization> Nvml::utilization(const std::string& pci_bus_id) const {
  using Result = NvmlResult<NvmlUtilization>;
  void* handle = nullptr;
  if (std::string why = device_handle(pci_bus_id, &handle); !why.empty()) {
    return Result::failure(std::move(why));
  }
  nvmlUtilization_t rates{};
  const nvmlReturn_t status = api_->utilization(static_cast<nvmlDevice_t>(handle), &rates);
  if (status != NVML_SUCCESS) {
    return Result::failure(fmt::format("nvmlDeviceGetUtilizationRates(\"{}\") failed: {}",
                                       pci_bus_id, nvml_message(status)));
  }
  return {NvmlUtilization{rates.gpu, rates.memory}, {}};
}

NvmlResult<NvmlMemoryInfo> Nvml::memory_info(const std::string& pci_bus_id) const {
  using Result = NvmlResult<NvmlMemoryInfo>;
  void* handle = nullptr;
  if (std::string why = device_handle(pci_bus_id, &handle); !why.empty()) {
    return Result::failure(std::move(why));
  }
  nvmlMemory_t memory{};
  const nvmlReturn_t status = api_->memory_info(static_cast<nvmlDevice_t>(handle), &memory);
  if (status != NVML_SUCCESS) {
    return Result::failure(fmt::format("nvmlDeviceGetMemoryInfo(\"{}\") failed: {}", pci_bus_id,
                                       nvml_message(status)));
  }
  return {NvmlMemoryInfo{memory.used, memory.total}, {}};
}

NvmlResult<std::vector<NvLinkState>> Nvml::nvlink_states(const std::string& pci_bus_id) const {
  using Result = NvmlResult<std::vector<NvLinkState>>;
  void* handle = nullptr;
  if (std::string why = device_handle(pci_bus_id, &handle); !why.empty()) {
    return Result::failure(std::move(why));
  }
  const auto device = static_cast<nvmlDevice_t>(handle);
  nvmlReturn_t status = NVML_SUCCESS;
  std::vector<NvLinkState> links;
  for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    status = api_->nvlink_state(device, link, &active);
    // A GPU without NVLink, or with fewer links than the maximum, says so per link.
    if (status == NVML_ERROR_NOT_SUPPORTED || status == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (status != NVML_SUCCESS) {
      return Result::failure(
          fmt::format("nvmlDeviceGetNvLinkState(link {}) failed: {}", link, nvml_message(status)));
    }
    links.push_back({link, active == NVML_FEATURE_ENABLED});
  }
  return {std::move(links), {}};
}

}  // namespace scalescope
