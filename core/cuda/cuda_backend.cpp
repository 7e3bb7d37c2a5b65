// The CUDA device backend: opens GPUs, and reads what telemetry reports of them (the CUDA
// versions, the GPUs, peer access) without creating a context, so that describing the
// machine takes no memory on its GPUs.
#include <cuda_runtime_api.h>

#include <array>
#include <string>

#include "core/build_info.h"
#include "core/check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda_architectures.h"

namespace scalescope {
namespace {

std::string cuda_message(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
}

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_text(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// 16 bytes as nvidia-smi prints them: GPU-8-4-4-4-12 hex digits.
std::string uuid_text(const cudaUUID_t& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", static_cast<unsigned char>(uuid.bytes[i]));
  }
  return text;
}

// Appends one failure to `error`, so that several are all reported.
void note(std::string& error, const std::string& what) {
  if (!error.empty()) error += "; ";
  error += what;
}

// cudaGetDeviceCount, whose failure (no driver) would otherwise stay in the runtime's last
// error, where later checks of a kernel launch must not see it.
cudaError_t count_devices(int& count) {
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) (void)cudaGetLastError();
  return status;
}

DeviceProperties properties_of(int index, const cudaDeviceProp& prop) {
  DeviceProperties d;
  d.index = index;
  d.name = prop.name;
  d.uuid = uuid_text(prop.uuid);
  std::array<char, 64> bus{};
  if (cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), index) == cudaSuccess) {
    d.pci_bus_id = bus.data();
  } else {
    (void)cudaGetLastError();
    d.pci_bus_id =
        fmt::format("{:08X}:{:02X}:{:02X}.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  }
  d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  d.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
  d.sm_count = prop.multiProcessorCount;
  return d;
}

class CudaBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int device_count() const override {
    int n = 0;
    return count_devices(n) == cudaSuccess ? n : 0;
  }
  std::string unavailable_reason() const override {
    int n = 0;
    const cudaError_t status = count_devices(n);
    if (status != cudaSuccess)
      return fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(status));
    return n == 0 ? "no GPU found" : "";
  }
  std::unique_ptr<Device> open(int index, const BackendOptions& options) override {
    SS_CHECK(!options.plan_only, "a GPU cannot open as a device that only plans");
    const int n = device_count();
    SS_CHECK(index >= 0 && index < n, "GPU {} does not exist ({} usable{})", index, n,
             n == 0 ? ": " + unavailable_reason() : std::string());
    cudaDeviceProp prop{};
    SS_CHECK(cudaGetDeviceProperties(&prop, index) == cudaSuccess,
             "cudaGetDeviceProperties({}) failed", index);
    const std::string mismatch =
        cuda_code_mismatch(build_info::kCudaArchitectures, prop.major, prop.minor);
    SS_CHECK(mismatch.empty(), "GPU {} ({}): {}", index, prop.name, mismatch);
    return std::make_unique<CudaDevice>(index);
  }

  std::vector<LibraryVersion> library_versions() const override {
    // Without a driver both calls still succeed: the driver version is then 0.
    int v = 0;
    std::string driver = kUnknownVersion;
    if (cudaDriverGetVersion(&v) == cudaSuccess) driver = v > 0 ? cuda_version_text(v) : "none";
    const std::string runtime =
        cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version_text(v) : kUnknownVersion;
    return {{"cuda_driver", driver}, {"cuda_runtime", runtime}};
  }

  DeviceSurvey survey() const override {
    DeviceSurvey survey;
    int count = 0;
    const cudaError_t status = count_devices(count);
    if (status != cudaSuccess) {
      survey.error = fmt::format("cudaGetDeviceCount failed: {}", cuda_message(status));
      return survey;
    }
    if (count == 0) {
      survey.error = "no CUDA device visible";
      return survey;
    }
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp prop{};
      const cudaError_t s = cudaGetDeviceProperties(&prop, i);
      if (s != cudaSuccess) {
        note(survey.error,
             fmt::format("cudaGetDeviceProperties({}) failed: {}", i, cuda_message(s)));
        (void)cudaGetLastError();
        continue;
      }
      survey.devices.push_back(properties_of(i, prop));
    }
    return survey;
  }

  PeerAccess peer_access(int a, int b) const override {
    int can = 0;
    const cudaError_t status = cudaDeviceCanAccessPeer(&can, a, b);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: later CUDA calls must not see it
      return {false, fmt::format("cudaDeviceCanAccessPeer({}, {}) failed: {}", a, b,
                                 cuda_message(status))};
    }
    return {can != 0, ""};
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  return std::make_unique<CudaBackend>();
}

}  // namespace scalescope
