#include "harness/cli/launch.h"

#include <chrono>
#include <exception>

#include "harness/collectives/failures.h"
#include "harness/collectives/rendezvous.h"

namespace scalescope::cli {

void add_launch_options(OptionList& list, LaunchOptions& o) {
  list.add("--ranks-per-node", o.ranks_per_node,
           "Under mpirun/srun: the processes each node must run (1: one per node hosting its "
           "devices as threads; the device count: one per device); a launch that differs is "
           "refused. 0: as launched",
           at_least(0, "must be 0 (as launched) or a number of processes per node"))
      .command_line_only();
  list.add("--network-interface", o.network_interface,
           "Under mpirun/srun: the network interface (eth0) or local address (10.0.0.5) the "
           "processes' Gloo control channel and collectives use, as GLOO_SOCKET_IFNAME (which "
           "it overrides); recorded in the report's environment. Default: GLOO_SOCKET_IFNAME, "
           "else the address the host name resolves to")
      .command_line_only();
}

Launch join_launch(const LaunchOptions& o, int64_t timeout_ms) {
  Launch launch;
  launch.cluster = Cluster::join(std::chrono::milliseconds(timeout_ms), o.network_interface);
  if (o.ranks_per_node > 0) launch.cluster->check_ranks_per_node(o.ranks_per_node);
  launch.lead = launch.cluster->rank() == 0;
  return launch;
}

void check_together(const Launch& launch, int64_t timeout_ms, const std::function<void()>& checks) {
  Cluster& cluster = *launch.cluster;
  if (!cluster.multi_process()) {
    checks();
    return;
  }
  nlohmann::json mine = {{"status", "ok"}};
  try {
    checks();
  } catch (...) {
    mine = error_message(std::current_exception());
  }
  throw_first_error(exchange_messages(cluster, mine, std::chrono::milliseconds(timeout_ms),
                                      "checking the options"),
                    cluster);
}

}  // namespace scalescope::cli
