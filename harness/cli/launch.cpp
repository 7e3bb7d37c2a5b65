#include "harness/cli/launch.h"

#include <chrono>

namespace scalescope::cli {

void add_launch_options(OptionList& list, LaunchOptions& o) {
  list.add("--ranks-per-node", o.ranks_per_node,
           "Under mpirun/srun: the processes each node must run (1: one per node hosting its "
           "devices as threads; the device count: one per device); a launch that differs is "
           "refused. 0: as launched",
           at_least(0, "must be 0 (as launched) or a number of processes per node"))
      .command_line_only();
}

Launch join_launch(const LaunchOptions& o, int64_t timeout_ms) {
  Launch launch;
  launch.cluster = Cluster::join(std::chrono::milliseconds(timeout_ms));
  if (o.ranks_per_node > 0) launch.cluster->check_ranks_per_node(o.ranks_per_node);
  launch.lead = launch.cluster->rank() == 0;
  return launch;
}

}  // namespace scalescope::cli
