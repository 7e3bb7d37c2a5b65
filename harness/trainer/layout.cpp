#include "harness/trainer/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/check.h"
#include "harness/collectives/cluster.h"

namespace scalescope {

ProcessLayout process_layout(const Cluster* cluster, int replicas_per_process, int devices) {
  ProcessLayout l;
  const int processes = cluster != nullptr ? cluster->size() : 1;
  SS_CHECK(replicas_per_process >= 0, "replicas per process {} must not be negative",
           replicas_per_process);
  if (processes == 1) {
    l.replicas_per_process = l.local = l.on_node = l.sharing_cores = devices;
    return l;
  }
  int per = replicas_per_process;
  if (per == 0) {
    SS_CHECK(devices % processes == 0,
             "devices: {} devices do not divide over the {} processes of this launch; use a "
             "multiple of {}",
             devices, processes, processes);
    per = devices / processes;
  }
  // Fewer devices than one process hosts: one process runs them all (intra-node first).
  per = std::min(per, devices);
  SS_CHECK(devices % per == 0 && devices / per <= processes,
           "devices: {} devices do not fit {} processes of {} replicas each (use a multiple of "
           "{} up to {})",
           devices, processes, per, per, per * processes);
  l.processes = devices / per;
  l.replicas_per_process = per;
  const int rank = cluster->rank();
  l.first = std::min(rank * per, devices);
  l.local = rank < l.processes ? per : 0;
  l.on_node = 0;
  l.sharing_cores = 0;
  const int node = cluster->members()[static_cast<size_t>(rank)].node;
  std::vector<bool> used(cluster->members().size(), false);
  for (const ClusterMember& m : cluster->members()) {
    if (m.rank >= l.processes) continue;
    used[static_cast<size_t>(m.node)] = true;
    if (cluster->shares_cores_with(m.rank)) l.sharing_cores += per;
    if (m.node != node) continue;
    if (m.rank < rank) l.node_first += per;
    l.on_node += per;
  }
  l.nodes = static_cast<int>(std::count(used.begin(), used.end(), true));
  return l;
}

int device_index(const ProcessLayout& l, int rank, int visible) {
  if (l.processes == 1) return rank;
  const int mine = rank - l.first;
  return visible >= l.on_node ? l.node_first + mine : mine;
}

void check_visible_devices(const ProcessLayout& l, DeviceKind kind, int visible) {
  if (l.processes == 1 || visible >= l.local) return;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  throw_error(fmt::format(
      "this process hosts {} replica(s) on {} devices but sees {} of them{}: give each process "
      "its node's devices, or at least its own {}",
      l.local, to_string(kind), visible,
      env != nullptr ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", env) : std::string(), l.local));
}

}  // namespace scalescope
