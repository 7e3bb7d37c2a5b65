#include "harness/collectives/cluster.h"

#include <fmt/ranges.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <unistd.h>

#if SCALESCOPE_WITH_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/check.h"
#include "core/cpu_affinity.h"
#include "core/env.h"
#include "core/log.h"
#include "harness/collectives/gloo_connect.h"
#include "harness/collectives/network.h"

namespace scalescope {

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

int parse_env_int(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  SS_CHECK_INPUT(!text.empty() && *end == '\0' && v >= 0 && v < (1 << 24),
                 "the launcher's variable {}={} is not a process count or rank", name, text);
  return static_cast<int>(v);
}

std::string this_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The error of an exchange whose transfer with `peer` failed (Gloo's `failure`): a peer that
// did not answer in time, or one that is gone.
Error lost_peer_error(int rank, int size, const std::string& peer,
                      std::chrono::milliseconds timeout, std::string_view what,
                      const std::string& failure) {
  const std::string l = lower(failure);
  const bool timed_out =
      l.find("timed out") != std::string::npos || l.find("timeout") != std::string::npos;
  return Error(kClusterLibrary, "Cluster::exchange",
               timed_out ? fmt::format("process {} of {} lost contact with process {}: it did not "
                                       "answer within {} ms ({}; {})",
                                       rank, size, peer, timeout.count(), what, failure)
                         : fmt::format("process {} of {} lost process {}: it exited or its node "
                                       "failed ({}; {})",
                                       rank, size, peer, what, failure));
}

// Numbers hosts by their lowest rank and processes within a host by rank; `cpus`, each
// process's CPU set (format_cpu_set), in the same order.
std::vector<ClusterMember> layout(const std::vector<std::string>& hostnames,
                                  const std::vector<std::string>& cpus) {
  std::vector<ClusterMember> members;
  std::map<std::string, std::pair<int, int>> hosts;  // hostname → (node, processes so far)
  for (size_t r = 0; r < hostnames.size(); ++r) {
    auto [it, added] = hosts.try_emplace(hostnames[r], static_cast<int>(hosts.size()), 0);
    members.push_back({.rank = static_cast<int>(r),
                       .hostname = hostnames[r],
                       .node = it->second.first,
                       .local_rank = it->second.second++,
                       .cpus = cpus.at(r)});
  }
  return members;
}

// This process alone.
std::vector<ClusterMember> layout_alone() {
  return layout({this_hostname()}, {format_cpu_set(usable_cpus())});
}

}  // namespace

LaunchInfo launch_info_from_environment() {
  // Open MPI's mpirun; PMI (MPICH's hydra, Intel MPI, srun --mpi=pmi2); srun itself.
  const std::pair<const char*, const char*> variables[] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"},
  };
  for (const auto& [size_name, rank_name] : variables) {
    const std::string size = env_or_empty(size_name);
    if (size.empty()) continue;
    LaunchInfo info;
    info.size = parse_env_int(size_name, size);
    info.rank = parse_env_int(rank_name, env_or_empty(rank_name));
    info.variable = size_name;
    SS_CHECK_INPUT(info.size >= 1 && info.rank < info.size,
                   "the launcher says this is rank {} of {} ({}, {}), which is not a valid rank",
                   info.rank, info.size, size_name, rank_name);
    return info;
  }
  return {};
}

// The control context: one Gloo rank per process, full mesh. Used by one thread at a time
// (the process's main thread) through exchange().
struct Cluster::Control {
  // The store outlives the context: Gloo's TCP context may look peers up in it later.
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::mutex mutex;
};

#if SCALESCOPE_WITH_MPI
namespace {

void check_mpi(int status, const char* what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error("MPI", what, std::string(text, static_cast<size_t>(length)));
}

// The option wins over GLOO_SOCKET_IFNAME; without either, the host name.
NetworkChoice network_for(const std::string& option, const std::string& host) {
  const std::string variable = env_or_empty("GLOO_SOCKET_IFNAME");
  if (option.empty() && variable.empty()) return network_by_host_name(host, local_interfaces());
  return option.empty()
             ? resolve_network_choice(variable, "GLOO_SOCKET_IFNAME", host, local_interfaces())
             : resolve_network_choice(option, "--network-interface", host, local_interfaces());
}

// Every process's `mine`, in rank order.
std::vector<std::string> mpi_all_gather(const std::vector<char>& mine) {
  int size = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD),
            "MPI_Allgather");
  std::vector<int> offsets(static_cast<size_t>(size));
  int total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = total;
    total += counts[i];
  }
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  check_mpi(MPI_Allgatherv(mine.data(), count, MPI_CHAR, all.data(), counts.data(), offsets.data(),
                           MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  for (size_t i = 0; i < counts.size(); ++i) {
    out.emplace_back(all.data() + offsets[i], static_cast<size_t>(counts[i]));
  }
  return out;
}

// Gloo's rendezvous through MPI: every process calls set() once, at the same point of
// connectFullMesh, so set() can be an MPI all-gather of every process's key and value; the
// waits and gets after it only read what it gathered.
class MpiStore final : public gloo::rendezvous::Store {
 public:
  void set(const std::string& key, const std::vector<char>& data) override {
    const std::vector<std::string> keys = mpi_all_gather(std::vector<char>(key.begin(), key.end()));
    const std::vector<std::string> values = mpi_all_gather(data);
    for (size_t i = 0; i < keys.size(); ++i) {
      values_[keys[i]] = std::vector<char>(values[i].begin(), values[i].end());
    }
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    return values_.at(key);
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) {
      if (values_.count(k) == 0) {
        throw gloo::IoException("MPI rendezvous: no process published key '" + k + "'");
      }
    }
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    wait(keys);
  }

 private:
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace
#endif

Cluster::Cluster() = default;

std::unique_ptr<Cluster> Cluster::single(const std::string& network_interface) {
  std::unique_ptr<Cluster> c(new Cluster());
  c->members_ = layout_alone();
  // Checked though unused (one process talks over loopback): a typo shows on the first try
  // on one machine rather than on the cluster.
  if (!network_interface.empty()) {
    (void)resolve_network_choice(network_interface, "--network-interface", this_hostname(),
                                 local_interfaces());
  }
  return c;
}

std::unique_ptr<Cluster> Cluster::join(std::chrono::milliseconds timeout,
                                       const std::string& network_interface) {
  const LaunchInfo launch = launch_info_from_environment();
  if (launch.size <= 1) return single(network_interface);
#if !SCALESCOPE_WITH_MPI
  (void)timeout;
  throw_error(fmt::format(
      "this process is rank {} of {} processes started by a launcher ({} is set), but this "
      "scalescope was built without MPI (SCALESCOPE_WITH_MPI=OFF): rebuild it where MPI is "
      "installed (Debian: libopenmpi-dev), or run one process",
      launch.rank, launch.size, launch.variable));
#else
  std::unique_ptr<Cluster> c(new Cluster());
  int provided = 0;
  // Only the main thread calls MPI (bootstrap and finalize).
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  c->mpi_initialized_ = true;
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  // An MPI that does not speak the launcher's process-management interface may start each
  // process as a job of its own, which would then run the whole work alone.
  SS_CHECK_INPUT(
      size == launch.size,
      "the launcher started {} processes ({}={}), but MPI sees {}: the launcher and this "
      "MPI share no process-management interface (under srun, give --mpi=pmix; srun "
      "--mpi=list shows what Slurm offers)",
      launch.size, launch.variable, launch.size, size);
  if (size == 1) {
    (void)single(network_interface);  // the same check as a process alone
    c->members_ = layout_alone();
    return c;
  }
  const std::string host = this_hostname();
  // Which processes share a node goes by this name: the host name, unless
  // SCALESCOPE_NODE_NAME gives another (containers sharing a host under different names, or
  // the inter-node paths tried out on one machine).
  const std::string given_name = text_from_environment("SCALESCOPE_NODE_NAME");
  const std::string node_name = given_name.empty() ? host : given_name;
  const std::string cpus = format_cpu_set(usable_cpus());
  c->members_ = layout(mpi_all_gather(std::vector<char>(node_name.begin(), node_name.end())),
                       mpi_all_gather(std::vector<char>(cpus.begin(), cpus.end())));
  c->choose_network(network_interface);
  c->connect_control(timeout);
  return c;
#endif
}

#if SCALESCOPE_WITH_MPI
void Cluster::choose_network(const std::string& network_interface) {
  const std::string host = this_hostname();
  std::string refusal;
  try {
    const NetworkChoice network = network_for(network_interface, host);
    interface_ = network.iface;
    hostname_for_gloo_ = network.hostname;
    network_ = network.info;
  } catch (const Error& e) {
    refusal = e.message();
  }
  // Every process learns of every refusal: one that stopped alone would leave the others
  // waiting in the next MPI collective for ever.
  const std::vector<std::string> refusals =
      mpi_all_gather(std::vector<char>(refusal.begin(), refusal.end()));
  std::vector<std::string> lines;
  for (int r = 0; r < size(); ++r) {
    const std::string& text = refusals[static_cast<size_t>(r)];
    if (!text.empty()) lines.push_back(fmt::format("process {}: {}", describe(r), text));
  }
  SS_CHECK_INPUT(lines.empty(), "the processes cannot all use the network they were given: {}",
                 fmt::join(lines, "; "));
}

void Cluster::connect_control(std::chrono::milliseconds timeout) {
  const std::string host = this_hostname();
  control_ = std::make_unique<Control>();
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size());
  try {
    gloo::transport::tcp::attr attr;
    if (!interface_.empty()) {
      attr.iface = interface_;
    } else {
      attr.hostname = hostname_for_gloo_;
    }
    control_->store = std::make_unique<MpiStore>();
    connect_full_mesh(context, *control_->store, gloo::transport::tcp::CreateDevice(attr), timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(
        "Gloo", "connectFullMesh",
        fmt::format("process {} of {} on {}: connecting the control context to the other "
                    "processes failed: {} (if the host name does not resolve to an "
                    "address the other nodes reach, name the network interface to use "
                    "with --network-interface or GLOO_SOCKET_IFNAME; interfaces here: {})",
                    rank_, size(), host, e.what(), describe_interfaces(local_interfaces())));
  }
  control_->context = std::move(context);
}
#endif

Cluster::~Cluster() {
  // Closing the control context first: peers blocked on this process then fail at once
  // (connection closed) instead of at their timeout.
  try {
    control_.reset();
  } catch (const std::exception& e) {
    SS_LOG_ERROR("cluster: closing the control context failed: {}", e.what());
  } catch (...) {
    SS_LOG_ERROR("cluster: closing the control context failed");
  }
#if SCALESCOPE_WITH_MPI
  if (mpi_initialized_ && !lost_peer_) MPI_Finalize();
#endif
}

bool Cluster::shares_cores_with(int rank) const {
  return share_cores(members_.at(static_cast<size_t>(rank)), members_[static_cast<size_t>(rank_)]);
}

int Cluster::processes_sharing_cores() const {
  int n = 0;
  for (int r = 0; r < size(); ++r) n += shares_cores_with(r) ? 1 : 0;
  return n;
}

int Cluster::local_size() const {
  const int node = members_[static_cast<size_t>(rank_)].node;
  return static_cast<int>(std::count_if(members_.begin(), members_.end(),
                                        [&](const ClusterMember& m) { return m.node == node; }));
}

int Cluster::node_count() const {
  int nodes = 0;
  for (const ClusterMember& m : members_) nodes = std::max(nodes, m.node + 1);
  return nodes;
}

void Cluster::check_ranks_per_node(int expected) const {
  std::map<std::string, int> per_node;  // host name → processes
  for (const ClusterMember& m : members_) ++per_node[m.hostname];
  std::vector<std::string> wrong;
  for (const auto& [host, count] : per_node) {
    if (count != expected) wrong.push_back(fmt::format("{} runs {}", host, count));
  }
  SS_CHECK_INPUT(wrong.empty(),
                 "--ranks-per-node {}: {}; launch that many per node (mpirun --map-by ppr:{}:node, "
                 "srun --ntasks-per-node={})",
                 expected, fmt::join(wrong, ", "), expected, expected);
}

std::string Cluster::describe(int rank) const {
  return fmt::format("rank {} ({})", rank, members_.at(static_cast<size_t>(rank)).hostname);
}

std::vector<std::string> Cluster::exchange(const std::string& mine,
                                           std::chrono::milliseconds timeout,
                                           std::string_view what) {
  if (!multi_process()) return {mine};
  const std::lock_guard lock(control_->mutex);
  gloo::Context& context = *control_->context;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto remaining = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  // Waits for one transfer with `peer`; a failure names the peer: pairwise messages (not a
  // ring) so that the process that is gone is the one we were waiting for.
  const auto guard = [&](int peer, auto&& body) {
    std::string failure;
    try {
      body();
      return;
    } catch (const gloo::Exception& e) {
      failure = e.what();
    } catch (const gloo::EnforceNotMet& e) {
      failure = e.what();
    }
    lost_peer_ = true;
    throw lost_peer_error(rank_, size(), describe(peer), timeout, what, failure);
  };
  const int n = size();
  const auto size_slot = static_cast<uint64_t>(context.nextSlot());
  const auto data_slot = static_cast<uint64_t>(context.nextSlot());
  // Sizes first, then the payloads (a receiver must know how much to expect).
  uint64_t my_size = mine.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(n), 0);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives(static_cast<size_t>(n));
  std::unique_ptr<gloo::transport::UnboundBuffer> send =
      context.createUnboundBuffer(&my_size, sizeof(my_size));
  // Every receive posted, then every peer's copy of the send.
  const auto wait_all = [&] {
    for (int p = 0; p < n; ++p) {
      const auto& receive = receives[static_cast<size_t>(p)];
      if (receive) guard(p, [&] { receive->waitRecv(remaining()); });
    }
    for (int p = 0; p < n && send; ++p) {
      if (p != rank_) guard(p, [&] { send->waitSend(remaining()); });
    }
  };
  for (int p = 0; p < n; ++p) {
    if (p == rank_) continue;
    receives[static_cast<size_t>(p)] =
        context.createUnboundBuffer(&sizes[static_cast<size_t>(p)], sizeof(uint64_t));
    guard(p, [&] {
      receives[static_cast<size_t>(p)]->recv(p, size_slot);
      send->send(p, size_slot);
    });
  }
  wait_all();

  std::vector<std::string> all(static_cast<size_t>(n));
  all[static_cast<size_t>(rank_)] = mine;
  // Gloo's buffers take a non-const pointer but a send only reads it.
  std::string outgoing = mine;
  send = outgoing.empty() ? nullptr : context.createUnboundBuffer(outgoing.data(), outgoing.size());
  for (int p = 0; p < n; ++p) {
    const auto i = static_cast<size_t>(p);
    receives[i].reset();
    if (p == rank_) continue;
    all[i].resize(sizes[i]);
    guard(p, [&] {
      if (sizes[i] > 0) {
        receives[i] = context.createUnboundBuffer(all[i].data(), all[i].size());
        receives[i]->recv(p, data_slot);
      }
      if (send) send->send(p, data_slot);
    });
  }
  wait_all();
  return all;
}

}  // namespace scalescope
