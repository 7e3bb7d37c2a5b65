// The processes of one run: one process (the usual case, no MPI involved) or several started
// by an MPI launcher (mpirun, srun), each hosting its local replicas as threads.
//
// MPI carries only the bootstrap: when the processes start, MPI exchanges their host names
// and the addresses of one Gloo "control" context between the processes. Everything after
// that (the rendezvous of each run's collectives, the NCCL unique id, the results gathered
// to rank 0) goes over the control context, not over MPI, because its exchanges have a
// timeout and name the process that stopped answering: an MPI collective with a dead peer
// blocks forever, and a sweep must never hang when a node is lost.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/environment.h"

namespace scalescope {

// Errors raised when a process of the cluster is lost carry this library name: a sweep
// treats them as fatal (the other points would fail the same way) instead of recording a
// failed point and going on.
inline constexpr const char* kClusterLibrary = "cluster";

class Cluster {
 public:
  // Joins the processes of an MPI launch when this process was started by one (Open MPI's,
  // PMIx's or PMI's rank variables are set) and the launch has more than one process;
  // otherwise the cluster of this process alone, without touching MPI. Throws Error when
  // launched by MPI with several processes but built without MPI, or when the bootstrap
  // fails (naming what failed and, after `timeout`, the processes that did not join).
  // `network_interface`: the interface or local address the Gloo devices bind to (network.h;
  // empty: GLOO_SOCKET_IFNAME, else the host name); one that names nothing on this host is
  // refused with the interfaces there, also by a process alone (which itself uses loopback).
  static std::unique_ptr<Cluster> join(std::chrono::milliseconds timeout,
                                       const std::string& network_interface = "");
  // This process alone.
  static std::unique_ptr<Cluster> single(const std::string& network_interface = "");

  // Closes the control context, then finalizes MPI (unless a peer was lost); never throws.
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  bool multi_process() const { return size() > 1; }
  // The processes on this process's node (this one included), and this one's index there.
  int local_rank() const { return members_[static_cast<size_t>(rank_)].local_rank; }
  int local_size() const;
  int node_count() const;
  // Whether process `rank` runs on a core this one also runs on (share_cores in
  // reports/environment.h); true for this process itself.
  bool shares_cores_with(int rank) const;
  // How many processes do (this one included).
  int processes_sharing_cores() const;
  const std::vector<ClusterMember>& members() const { return members_; }
  // Throws Error unless every node runs `expected` processes, naming the nodes that do not
  // and how to launch that many.
  void check_ranks_per_node(int expected) const;
  // The host name a process reports in errors: "rank 1 (node2)".
  std::string describe(int rank) const;

  // What the Gloo TCP devices of this process bind to: an interface (by name), else a host
  // name or address (multi-process: the chosen address or the host name; single process:
  // loopback).
  std::string gloo_interface() const { return interface_; }
  std::string gloo_hostname() const { return hostname_for_gloo_; }
  // What the report's environment records of that choice; null for a single process.
  const std::optional<NetworkInfo>& network() const { return network_; }

  // Every process's `mine`, in rank order (each process's own included). Collective: every
  // process calls it the same number of times, in the same order, from one thread at a time.
  // A peer that exited (its connection closed) or did not answer within `timeout` raises an
  // Error of kClusterLibrary naming it and `what`. The cluster of one returns {mine}.
  std::vector<std::string> exchange(const std::string& mine, std::chrono::milliseconds timeout,
                                    std::string_view what);

 private:
  Cluster();
  // Multi-process join, after the members are known: what the Gloo devices bind to (every
  // process refuses when any cannot use its choice, naming it), then the control context.
  void choose_network(const std::string& network_interface);
  void connect_control(std::chrono::milliseconds timeout);
  struct Control;  // the Gloo control context
  int rank_ = 0;
  std::vector<ClusterMember> members_;
  std::string interface_;
  std::string hostname_for_gloo_ = "127.0.0.1";
  std::optional<NetworkInfo> network_;
  bool mpi_initialized_ = false;
  // A peer was lost: MPI_Finalize would wait for it (Open MPI's finalize is collective), so
  // the process leaves without it and the launcher reports the job as failed anyway.
  bool lost_peer_ = false;
  std::unique_ptr<Control> control_;
};

// The rank of this process in an MPI launch from the launcher's environment variables, and
// the number of processes: {0, 1} when not launched by MPI.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  std::string variable;  // which variable said so ("OMPI_COMM_WORLD_SIZE"), "" when none
};
LaunchInfo launch_info_from_environment();

}  // namespace scalescope
