// What `train` and `sweep` do first: started by mpirun or srun, their processes join one
// cluster (alone: a cluster of one) and rank 0 leads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "harness/collectives/cluster.h"
#include "harness/options/option_schema.h"

namespace scalescope::cli {

struct LaunchOptions {
  // The processes each node must run (0: whatever was launched).
  int ranks_per_node = 0;
  // The interface or local address the processes' Gloo devices use ("": GLOO_SOCKET_IFNAME,
  // else the host name).
  std::string network_interface;
};
// --ranks-per-node, --network-interface.
void add_launch_options(OptionList& list, LaunchOptions& options);

struct Launch {
  std::unique_ptr<Cluster> cluster;
  // Rank 0 alone prints and writes files; every process runs the same work.
  bool lead = true;
};
// Joins the launch's processes, giving up on a lost one after `timeout_ms`, and refuses a
// launch whose processes per node differ from --ranks-per-node (when given).
Launch join_launch(const LaunchOptions& options, int64_t timeout_ms);

// Runs a command's checks before its work (the options' validation, the lead's check that it
// can write its files) in every process of the launch and has the processes agree: where one
// process's checks failed, every process throws that error, which the lead alone prints. A
// process that stopped alone would leave the others to report only that it was lost.
void check_together(const Launch& launch, int64_t timeout_ms, const std::function<void()>& checks);

}  // namespace scalescope::cli
