// The process-wide settings that kernels read when they are built, as one value: a run sets
// them for its replicas and gives back the ones it found, so that what ran before or after it
// in the same process (a sweep's next point, a test, `scalescope models`) is not built with
// another run's precision, determinism, algorithm search or fusion.
#pragma once

#include "models/fusion.h"
#include "models/kernels.h"

namespace scalescope {

// Each setting's default is its setter's (kernel_settings() reads them); none is repeated here.
struct KernelSettings {
  Precision precision;      // set_precision
  Determinism determinism;  // set_determinism
  ConvSearch conv_search;   // set_conv_search
  bool fuse_layers;         // set_fuse_layers
  bool operator==(const KernelSettings&) const = default;
};

// The settings now in force, and all of them set at once. Thread-safe as each setting is; a
// reader on another thread may see some set and not yet the others.
KernelSettings kernel_settings();
void set_kernel_settings(const KernelSettings& settings);

// Sets the settings for a scope and restores the ones before, also when the scope throws.
class ScopedKernelSettings {
 public:
  explicit ScopedKernelSettings(const KernelSettings& settings) : saved_(kernel_settings()) {
    set_kernel_settings(settings);
  }
  ~ScopedKernelSettings() { set_kernel_settings(saved_); }
  ScopedKernelSettings(const ScopedKernelSettings&) = delete;
  ScopedKernelSettings& operator=(const ScopedKernelSettings&) = delete;

 private:
  KernelSettings saved_;
};

}  // namespace scalescope
