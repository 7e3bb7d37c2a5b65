#include "reports/environment.h"

#include "core/check.h"
#include "reports/json_reader.h"

namespace scalescope {
namespace {

using nlohmann::json;

json to_json(const GpuInfo& g) {
  return {{"index", g.index},
          {"name", g.name},
          {"uuid", g.uuid},
          {"pci_bus_id", g.pci_bus_id},
          {"memory_bytes", g.memory_bytes},
          {"compute_capability", g.compute_capability},
          {"sm_count", g.sm_count}};
}

GpuInfo gpu_from_json(const JsonReader& r) {
  GpuInfo g;
  g.index = r.int32("index");
  g.name = r.string("name");
  g.uuid = r.string("uuid");
  g.pci_bus_id = r.string("pci_bus_id");
  g.memory_bytes = r.int64("memory_bytes");
  g.compute_capability = r.string("compute_capability");
  g.sm_count = r.int32("sm_count");
  return g;
}

}  // namespace

json to_json(const Environment& env) {
  const HostInfo& h = env.host;
  const LibraryVersions& l = env.libraries;
  const BuildInfo& b = env.build;
  json gpus = json::array();
  for (const GpuInfo& g : env.gpus) gpus.push_back(to_json(g));
  json j = {
      {"captured_at", env.captured_at},
      {"command_line", env.command_line},
      {"host",
       {{"hostname", h.hostname},
        {"cpu_model", h.cpu_model},
        {"logical_cores", h.logical_cores},
        {"usable_cores", h.usable_cores},
        {"memory_bytes", h.memory_bytes},
        {"os", h.os},
        {"kernel", h.kernel},
        {"arch", h.arch}}},
      {"gpus", std::move(gpus)},
      {"gpu_error", env.gpu_error},
      {"libraries",
       {{"cuda_driver", l.cuda_driver},
        {"cuda_runtime", l.cuda_runtime},
        {"cudnn", l.cudnn},
        {"nccl", l.nccl},
        {"cublas", l.cublas},
        {"onednn", l.onednn},
        {"gloo", l.gloo},
        {"openmp", l.openmp}}},
      {"build",
       {{"scalescope_version", b.scalescope_version},
        {"compiler", b.compiler},
        {"build_type", b.build_type},
        {"with_cuda", b.with_cuda},
        {"cuda_architectures", b.cuda_architectures},
        {"git_commit", b.git_commit},
        {"git_dirty", b.git_dirty}}},
      // A std::map converts to a JSON object with its keys in order.
      {"env_vars", env.env_vars},
  };
  if (!env.simulated_devices.empty()) j["simulated_devices"] = env.simulated_devices;
  if (env.network) {
    j["network"] = {{"interface", env.network->interface},
                    {"address", env.network->address},
                    {"chosen_by", env.network->chosen_by}};
  }
  return j;
}

Environment environment_from_json(const json& j) {
  return environment_from_json(JsonReader(j, "environment"));
}

Environment environment_from_json(const JsonReader& root) {
  Environment env;
  env.captured_at = root.string("captured_at");
  env.command_line = root.string("command_line");

  const JsonReader h = root.object("host");
  env.host.hostname = h.string("hostname");
  env.host.cpu_model = h.string("cpu_model");
  env.host.logical_cores = h.int32("logical_cores");
  env.host.usable_cores = h.int32("usable_cores");
  env.host.memory_bytes = h.int64("memory_bytes");
  env.host.os = h.string("os");
  env.host.kernel = h.string("kernel");
  env.host.arch = h.string("arch");

  const size_t gpus = root.array("gpus").size();
  for (size_t i = 0; i < gpus; ++i) env.gpus.push_back(gpu_from_json(root.element("gpus", i)));
  env.gpu_error = root.string("gpu_error");

  const JsonReader l = root.object("libraries");
  env.libraries.cuda_driver = l.string("cuda_driver");
  env.libraries.cuda_runtime = l.string("cuda_runtime");
  env.libraries.cudnn = l.string("cudnn");
  env.libraries.nccl = l.string("nccl");
  env.libraries.cublas = l.string("cublas");
  env.libraries.onednn = l.string("onednn");
  env.libraries.gloo = l.string("gloo");
  env.libraries.openmp = l.string("openmp");

  const JsonReader b = root.object("build");
  env.build.scalescope_version = b.string("scalescope_version");
  env.build.compiler = b.string("compiler");
  env.build.build_type = b.string("build_type");
  env.build.with_cuda = b.boolean("with_cuda");
  env.build.cuda_architectures = b.string("cuda_architectures");
  env.build.git_commit = b.string("git_commit");
  env.build.git_dirty = b.boolean("git_dirty");

  const JsonReader vars = root.object("env_vars");
  for (const auto& item : vars.value().items()) {
    env.env_vars.emplace(item.key(), vars.string(item.key()));
  }
  if (root.has("simulated_devices")) env.simulated_devices = root.string("simulated_devices");
  if (root.has("network")) {
    const JsonReader n = root.object("network");
    env.network = NetworkInfo{.interface = n.string("interface"),
                              .address = n.string("address"),
                              .chosen_by = n.string("chosen_by")};
  }
  return env;
}

json to_json(const ClusterInfo& c) {
  json members = json::array();
  for (const ClusterMember& m : c.members) {
    members.push_back({{"rank", m.rank},
                       {"hostname", m.hostname},
                       {"node", m.node},
                       {"local_rank", m.local_rank}});
  }
  json environments = json::array();
  for (const Environment& e : c.environments) environments.push_back(to_json(e));
  return {{"processes", c.processes},
          {"nodes", c.nodes},
          {"replicas_per_process", c.replicas_per_process},
          {"members", std::move(members)},
          {"environments", std::move(environments)}};
}

ClusterInfo cluster_from_json(const JsonReader& r) {
  ClusterInfo c;
  c.processes = r.int32("processes");
  c.nodes = r.int32("nodes");
  c.replicas_per_process = r.int32("replicas_per_process");
  const size_t members = r.array("members").size();
  for (size_t i = 0; i < members; ++i) {
    const JsonReader m = r.element("members", i);
    c.members.push_back({.rank = m.int32("rank"),
                         .hostname = m.string("hostname"),
                         .node = m.int32("node"),
                         .local_rank = m.int32("local_rank")});
  }
  const size_t environments = r.array("environments").size();
  for (size_t i = 0; i < environments; ++i) {
    c.environments.push_back(environment_from_json(r.element("environments", i)));
  }
  SS_CHECK(c.processes >= 2 && static_cast<int>(c.members.size()) == c.processes,
           "{}: a cluster of {} processes lists {} members", r.name("members"), c.processes,
           c.members.size());
  return c;
}

}  // namespace scalescope
