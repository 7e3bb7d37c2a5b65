// The environment a report was measured in: host, GPUs, library versions, build and the
// allowlisted environment variables. Two reports are only comparable when these agree (or
// when the reader knows how they differ), so each report carries one.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"

namespace scalescope {

class JsonReader;

struct HostInfo {
  std::string hostname;
  std::string cpu_model;  // /proc/cpuinfo "model name", or "unknown"
  int logical_cores = 0;  // online logical CPUs
  int usable_cores = 0;   // of those, the ones this process may run on (affinity mask)
  int64_t memory_bytes = 0;
  std::string os;      // /etc/os-release PRETTY_NAME, or "unknown"
  std::string kernel;  // uname -r
  std::string arch;    // uname -m

  bool operator==(const HostInfo&) const = default;
};

// A GPU as the CUDA backend surveys it (index: CUDA's ordinal, after CUDA_VISIBLE_DEVICES).
using GpuInfo = DeviceProperties;

// Human-readable versions ("13.0", "9.13.0", "2.28.3"). The CUDA ones are empty in a build
// without CUDA (Environment::gpu_error then says so); cuda_driver is "none" without a driver.
struct LibraryVersions {
  std::string cuda_driver;   // the newest CUDA version the installed driver supports
  std::string cuda_runtime;  // the cudart this binary loaded
  std::string cudnn;
  std::string nccl;
  std::string cublas;
  std::string onednn;  // "major.minor.patch (git hash)"
  std::string gloo;
  std::string openmp;  // "4.5 (201511)"

  bool operator==(const LibraryVersions&) const = default;
};

// Facts fixed when the binary was built.
struct BuildInfo {
  std::string scalescope_version;
  std::string compiler;    // e.g. "GNU 12.2.0"
  std::string build_type;  // e.g. "Release"
  bool with_cuda = false;
  std::string cuda_architectures;  // e.g. "90", or "none"
  std::string git_commit;          // 40 hex digits, or "unknown" (no git at build time)
  bool git_dirty = false;          // tracked files differed from git_commit at build time

  bool operator==(const BuildInfo&) const = default;
};

// The network a multi-process run's collectives use on this process's host: what its Gloo
// devices (control channel and replicas) bind to, and what chose it.
struct NetworkInfo {
  std::string interface;  // e.g. "eth0"; "" when no local interface holds the address
  std::string address;    // the address bound to; "" when the host name did not resolve
  std::string chosen_by;  // "--network-interface", "GLOO_SOCKET_IFNAME" or "host name"

  bool operator==(const NetworkInfo&) const = default;
};

struct Environment {
  std::string captured_at;  // UTC, ISO-8601: "2025-01-31T12:34:56Z"
  std::string command_line;
  HostInfo host;
  std::vector<GpuInfo> gpus;
  // Why `gpus` is empty or incomplete (CUDA's message, or "built without CUDA"); empty
  // when every device was read.
  std::string gpu_error;
  LibraryVersions libraries;
  BuildInfo build;
  // Only allowlisted variables (NCCL_*, OMP_*, CUDA_VISIBLE_DEVICES, ...): a report is
  // shared, so nothing that could hold a secret goes into it.
  std::map<std::string, std::string> env_vars;
  // Non-empty when the measured devices were simulated accelerators: what that means for the
  // timings (kSimulatedDevicesNote). Written only then.
  std::string simulated_devices;
  // Multi-process runs only (a single process talks over loopback).
  std::optional<NetworkInfo> network;

  bool operator==(const Environment&) const = default;
};

// What a report says of simulated devices wherever their figures appear.
inline constexpr const char* kSimulatedDevicesNote =
    "sim devices are simulated accelerators: the GPU code path (streams, events, caching "
    "allocator, enqueued collectives) running on CPU threads; their timings are CPU timings, not "
    "GPU figures";

// One process of a multi-process run (mpirun, srun).
struct ClusterMember {
  int rank = 0;
  std::string hostname;
  int node = 0;        // its host's index among the run's hosts, numbered by lowest rank
  int local_rank = 0;  // its index among the processes on its host
  // The CPUs it could run on ("0-3,8": core/cpu_affinity.h); empty in sweep reports before 1.20 and
  // run reports before 2.5.
  std::string cpus;
  bool operator==(const ClusterMember&) const = default;
};
// Whether two processes of a launch run on a core in common: on the same node, their CPU
// sets intersect (core/cpu_affinity.h). Processes an MPI launcher bound to cores of their own
// do not; unbound processes of a node share all of its cores. False where either records no
// CPUs.
bool share_cores(const ClusterMember& a, const ClusterMember& b);

// How a multi-process run was laid out; single-process reports have none.
struct ClusterInfo {
  int processes = 1;
  int nodes = 1;
  // Replicas (threads) each process hosts at most; a point with fewer devices uses the
  // first processes only.
  int replicas_per_process = 0;
  std::vector<ClusterMember> members;  // rank order
  // Every process's environment, rank order (sweep reports; the report's own `environment`
  // is rank 0's).
  std::vector<Environment> environments;
  bool operator==(const ClusterInfo&) const = default;
};

nlohmann::json to_json(const ClusterInfo& cluster);
ClusterInfo cluster_from_json(const JsonReader& j);

nlohmann::json to_json(const Environment& env);
// Strict: a missing key or one of the wrong type throws Error naming the key (e.g.
// "host.logical_cores"), so that `compare` never reads a half-understood report.
Environment environment_from_json(const nlohmann::json& j);
// The same inside a larger document, so that errors name the report and the full path
// ("report run.json: missing key 'environment.host.os'").
Environment environment_from_json(const JsonReader& j);

}  // namespace scalescope
