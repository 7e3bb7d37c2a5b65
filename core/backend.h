// The runtime registry of device backends. One binary holds every backend it was built with;
// which one runs is chosen when the program runs (`--devices cpu:4` works on a GPU machine too).
//
// One registration place per library. Which backends this build has is tested (#if on the
// feature macro) in exactly one table per library that has code per device kind, and
// everything else of that library asks its table. There is one table per library, not one
// for the whole program, because the layering forbids this library from knowing what kernels
// or collectives are: each library registers its own part of a device kind, with the same
// BackendRegistry and the same missing_backend_message(). This table lists devices. Adding a
// device kind is one registration line in each library's table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"

namespace scalescope {

// What a backend says when a library cannot tell its version.
inline constexpr const char* kUnknownVersion = "unknown";

// A library a backend runs on, and its version.
struct LibraryVersion {
  std::string name;     // a snake_case key: "cuda_runtime", "cudnn", "onednn", "openmp"
  std::string version;  // human-readable ("13.0", "9.13.0"), or kUnknownVersion
};

// A physical device behind a backend, read without creating a context on it.
struct DeviceProperties {
  int index = 0;           // the backend's ordinal (CUDA's, after CUDA_VISIBLE_DEVICES)
  std::string name;        // e.g. "NVIDIA H100 80GB HBM3"
  std::string uuid;        // as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string pci_bus_id;  // e.g. "0000:3B:00.0"
  int64_t memory_bytes = 0;
  std::string compute_capability;  // e.g. "9.0"
  int sm_count = 0;

  bool operator==(const DeviceProperties&) const = default;
};

// The physical devices a backend found.
struct DeviceSurvey {
  std::vector<DeviceProperties> devices;
  std::string error;  // why `devices` is empty or incomplete; empty when every one was read
};

// Whether one device can read and write another's memory directly.
struct PeerAccess {
  bool possible = false;
  std::string error;  // why the answer is unknown (the query failed); empty otherwise
};

// The most CPU threads one process's devices may use together: far past any core count (for
// oversubscribed runs), below where the system refuses new threads (libgomp then exits the
// process, naming nothing of ours).
constexpr int kMaxCpuThreads = 4096;

struct BackendOptions {
  // CPU: threads each device's kernels use (0: the usable cores divided by the replica count).
  int cpu_threads = 0;
  // CPU: how many devices share this process's usable cores (core/cpu_affinity.h), its own and
  // those of other processes running on the same cores (divides the default thread count).
  int cpu_devices = 1;
  // CPU and sim: a device that only plans (`models --batch`): its memory is address space with
  // nothing behind it (core/address_space.h) and its copies, fills and kernels do nothing, so
  // that planning a batch takes neither the batch's memory nor the time to fill it. CUDA
  // refuses it (its kernels' planning runs on the GPU).
  bool plan_only = false;
};

// Whether devices of `kind` can open as devices that only plan (BackendOptions::plan_only).
inline bool can_plan_only(DeviceKind kind) {
  return kind != DeviceKind::kCuda;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  const char* name() const { return to_string(kind()); }  // "cpu", "cuda"
  // Devices this backend can open now; 0 with a reason when unusable (no driver, no GPU).
  virtual int device_count() const = 0;
  // Whether its devices are logical (CPU, simulated): any number of them, each a share of
  // this machine's cores, rather than physical devices that exist or not.
  virtual bool logical() const { return false; }
  virtual std::string unavailable_reason() const = 0;
  // Opens device `index`. CPU devices are logical: any index is valid, each is one replica.
  virtual std::unique_ptr<Device> open(int index, const BackendOptions& options) = 0;

  // The libraries this backend's devices run on (CPU: OpenMP; CUDA: the driver's and the
  // runtime's CUDA versions). Never throws.
  virtual std::vector<LibraryVersion> library_versions() const = 0;
  // The physical devices, read without taking memory on them (no context is created).
  // Logical devices (CPU) have none. Never throws: DeviceSurvey::error says what failed.
  virtual DeviceSurvey survey() const { return {}; }
  // Whether device `a` can access device `b`'s memory directly (cudaDeviceCanAccessPeer).
  // REQUIRES: a != b, both indices from survey(). Creates no context; never throws. Backends
  // without physical devices answer with an error.
  virtual PeerAccess peer_access(int a, int b) const;
};

// What every library says when asked for a device kind this build lacks: that it is missing,
// how to build it, and what to use meanwhile.
std::string missing_backend_message(DeviceKind kind);

// A library's registration table: the entries of the device kinds this build has, made once
// on first use. Entries are factories and dispatchers without device or driver state, so a
// table may live in a function-local static. `Entry` has `DeviceKind kind() const`.
template <typename Entry>
class BackendRegistry {
 public:
  explicit BackendRegistry(std::vector<std::unique_ptr<Entry>> entries)
      : owned_(std::move(entries)) {
    for (const std::unique_ptr<Entry>& e : owned_) view_.push_back(e.get());
  }
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  // In registration order, CPU first.
  const std::vector<Entry*>& all() const { return view_; }
  // Null when this build lacks `kind`.
  Entry* find(DeviceKind kind) const {
    for (Entry* e : view_) {
      if (e->kind() == kind) return e;
    }
    return nullptr;
  }
  // Throws Error with missing_backend_message(kind) when this build lacks `kind`.
  Entry& get(DeviceKind kind) const {
    Entry* e = find(kind);
    if (e == nullptr) throw_error(missing_backend_message(kind));
    return *e;
  }

 private:
  std::vector<std::unique_ptr<Entry>> owned_;
  std::vector<Entry*> view_;
};

// The device backends built into this binary, CPU first.
const std::vector<Backend*>& backends();
// The backend for `kind`, or null when this build lacks it.
Backend* find_backend(DeviceKind kind);
// The backend for `kind`; throws Error with missing_backend_message(kind) when this build
// lacks it.
Backend& backend(DeviceKind kind);

}  // namespace scalescope
