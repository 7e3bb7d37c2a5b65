#include "reports/environment.h"

#include "core/check.h"
#include "core/cpu_affinity.h"
#include "reports/json_fields.h"

namespace scalescope {

template <>
struct JsonFields<HostInfo> {
  static constexpr auto kFields = std::make_tuple(
      field("hostname", &HostInfo::hostname), field("cpu_model", &HostInfo::cpu_model),
      field("logical_cores", &HostInfo::logical_cores),
      field("usable_cores", &HostInfo::usable_cores),
      field("memory_bytes", &HostInfo::memory_bytes), field("os", &HostInfo::os),
      field("kernel", &HostInfo::kernel), field("arch", &HostInfo::arch));
};

template <>
struct JsonFields<GpuInfo> {
  static constexpr auto kFields = std::make_tuple(
      field("index", &GpuInfo::index), field("name", &GpuInfo::name), field("uuid", &GpuInfo::uuid),
      field("pci_bus_id", &GpuInfo::pci_bus_id), field("memory_bytes", &GpuInfo::memory_bytes),
      field("compute_capability", &GpuInfo::compute_capability),
      field("sm_count", &GpuInfo::sm_count));
};

template <>
struct JsonFields<LibraryVersions> {
  static constexpr auto kFields = std::make_tuple(
      field("cuda_driver", &LibraryVersions::cuda_driver),
      field("cuda_runtime", &LibraryVersions::cuda_runtime),
      field("cudnn", &LibraryVersions::cudnn), field("nccl", &LibraryVersions::nccl),
      field("cublas", &LibraryVersions::cublas), field("onednn", &LibraryVersions::onednn),
      field("gloo", &LibraryVersions::gloo), field("openmp", &LibraryVersions::openmp));
};

template <>
struct JsonFields<BuildInfo> {
  static constexpr auto kFields = std::make_tuple(
      field("scalescope_version", &BuildInfo::scalescope_version),
      field("compiler", &BuildInfo::compiler), field("build_type", &BuildInfo::build_type),
      field("with_cuda", &BuildInfo::with_cuda),
      field("cuda_architectures", &BuildInfo::cuda_architectures),
      field("git_commit", &BuildInfo::git_commit), field("git_dirty", &BuildInfo::git_dirty));
};

template <>
struct JsonFields<NetworkInfo> {
  static constexpr auto kFields = std::make_tuple(field("interface", &NetworkInfo::interface),
                                                  field("address", &NetworkInfo::address),
                                                  field("chosen_by", &NetworkInfo::chosen_by));
};

template <>
struct JsonFields<Environment> {
  static constexpr auto kFields = std::make_tuple(
      field("captured_at", &Environment::captured_at),
      field("command_line", &Environment::command_line), field("host", &Environment::host),
      field("gpus", &Environment::gpus), field("gpu_error", &Environment::gpu_error),
      field("libraries", &Environment::libraries), field("build", &Environment::build),
      field("env_vars", &Environment::env_vars),
      optional_field("simulated_devices", &Environment::simulated_devices),
      optional_field("network", &Environment::network));
};

template <>
struct JsonFields<ClusterMember> {
  static constexpr auto kFields = std::make_tuple(
      field("rank", &ClusterMember::rank), field("hostname", &ClusterMember::hostname),
      field("node", &ClusterMember::node), field("local_rank", &ClusterMember::local_rank),
      optional_field("cpus", &ClusterMember::cpus));
};

template <>
struct JsonFields<ClusterInfo> {
  static constexpr auto kFields = std::make_tuple(
      field("processes", &ClusterInfo::processes), field("nodes", &ClusterInfo::nodes),
      field("replicas_per_process", &ClusterInfo::replicas_per_process),
      field("members", &ClusterInfo::members), field("environments", &ClusterInfo::environments));
};

nlohmann::json to_json(const Environment& env) {
  return write_fields(env);
}

Environment environment_from_json(const nlohmann::json& j) {
  return environment_from_json(JsonReader(j, "environment"));
}

Environment environment_from_json(const JsonReader& r) {
  return read_fields<Environment>(r);
}

nlohmann::json to_json(const ClusterInfo& c) {
  return write_fields(c);
}

bool share_cores(const ClusterMember& a, const ClusterMember& b) {
  if (a.node != b.node || a.cpus.empty() || b.cpus.empty()) return false;
  return cpu_sets_intersect(parse_cpu_set(a.cpus), parse_cpu_set(b.cpus));
}

ClusterInfo cluster_from_json(const JsonReader& r) {
  const ClusterInfo c = read_fields<ClusterInfo>(r);
  SS_CHECK(c.processes >= 2 && static_cast<int>(c.members.size()) == c.processes,
           "{}: a cluster of {} processes lists {} members", r.name("members"), c.processes,
           c.members.size());
  for (size_t i = 0; i < c.members.size(); ++i) {
    const std::string& cpus = c.members[i].cpus;
    if (cpus.empty()) continue;
    try {
      (void)parse_cpu_set(cpus);
    } catch (const Error& e) {
      throw_error(fmt::format("{}: {}", r.element("members", i).name("cpus"), e.message()));
    }
  }
  return c;
}

}  // namespace scalescope
