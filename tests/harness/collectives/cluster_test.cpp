// Multi-process pieces that run in one process: the launcher's variables, how a run spreads
// over processes, and a Gloo group spanning two "processes" whose rendezvous keys are carried
// between them by hand, as the trainer's main thread carries them between real processes.
// The real multi-process runs (mpirun) are tests/harness/collectives/multiprocess_test.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "harness/collectives/cluster.h"
#include "harness/collectives/communicator.h"
#include "harness/collectives/failures.h"
#include "harness/collectives/network.h"
#include "harness/trainer/trainer.h"
#include "reports/environment.h"
#include "reports/json_reader.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using std::chrono::milliseconds;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      unsetenv(name_);
    } else {
      setenv(name_, old_.c_str(), 1);
    }
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(LaunchInfo, NoLauncherMeansOneProcess) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  unsetenv("SLURM_STEP_NUM_TASKS");
  const LaunchInfo info = launch_info_from_environment();
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.variable, "");
}

TEST(LaunchInfo, ReadsOpenMpiAndSlurm) {
  {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", "4");
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", "3");
    const LaunchInfo info = launch_info_from_environment();
    EXPECT_EQ(info.size, 4);
    EXPECT_EQ(info.rank, 3);
    EXPECT_EQ(info.variable, "OMPI_COMM_WORLD_SIZE");
  }
  ScopedEnv size("SLURM_STEP_NUM_TASKS", "2");
  ScopedEnv rank("SLURM_PROCID", "1");
  EXPECT_EQ(launch_info_from_environment().rank, 1);
}

TEST(LaunchInfo, BadVariablesAreNamed) {
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "2");
  ScopedEnv rank("OMPI_COMM_WORLD_RANK", "two");
  EXPECT_CONTAINS(testing_util::error_of([] { launch_info_from_environment(); }),
                  "OMPI_COMM_WORLD_RANK=two");
  ScopedEnv rank2("OMPI_COMM_WORLD_RANK", "5");
  EXPECT_CONTAINS(testing_util::error_of([] { launch_info_from_environment(); }), "rank 5 of 2");
}

TEST(Cluster, AloneWithoutALauncher) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  const auto cluster = Cluster::join(milliseconds(1000));
  EXPECT_FALSE(cluster->multi_process());
  EXPECT_EQ(cluster->rank(), 0);
  EXPECT_EQ(cluster->node_count(), 1);
  EXPECT_EQ(cluster->local_size(), 1);
  EXPECT_EQ(cluster->exchange("mine", milliseconds(10), "a test"),
            std::vector<std::string>{"mine"});
}

// A process's error crosses to the others as a message; the error they throw must read as it
// would in one process: a usage or out-of-memory error without our source line (the sender's
// line would name code the user did not write), an internal one with the sender's.
TEST(Cluster, AnotherProcesssErrorKeepsItsClassAndItsText) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  const auto cluster = Cluster::join(milliseconds(1000));
  const std::string from = "on process " + cluster->describe(0) + ": ";
  const auto thrown = [&](const std::exception_ptr& error) -> std::exception_ptr {
    try {
      throw_first_error({error_message(error)}, *cluster);
    } catch (...) {
      return std::current_exception();
    }
    return std::make_exception_ptr(std::runtime_error("throw_first_error threw nothing"));
  };
  try {
    std::rethrow_exception(thrown(std::make_exception_ptr(
        OutOfMemoryError("out of memory: 2 GiB on cpu device 0; plans a peak of 3 GiB"))));
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(error_text(e, false),
              from + "out of memory: 2 GiB on cpu device 0; plans a peak of 3 GiB");
  }
  try {
    std::rethrow_exception(thrown(std::make_exception_ptr(UsageError("--data: no such file"))));
  } catch (const OutOfMemoryError&) {
    ADD_FAILURE() << "a usage error came back as out of memory";
  } catch (const UsageError& e) {
    EXPECT_EQ(error_text(e, false), from + "--data: no such file");
    EXPECT_FALSE(e.printed_by_process_zero()) << "process 0 is the one that prints it";
  }
  try {
    std::rethrow_exception(thrown(std::make_exception_ptr(Error("", "", "an invariant broke"))));
  } catch (const UsageError&) {
    ADD_FAILURE() << "an internal error came back as a usage error";
  } catch (const Error& e) {
    EXPECT_CONTAINS(error_text(e, false), from + "an invariant broke at cluster_test.cpp:");
  }
  EXPECT_NO_THROW(throw_first_error({{{"status", "idle"}}}, *cluster));  // nothing failed
}

// Runs `body` on each of `ranks` replica threads of a group spanning two simulated
// processes (ranks [0, split) and [split, size)), carrying the rendezvous keys between
// them in rounds as the trainer does.
void run_two_process_group(int size, int split, const std::function<void(Communicator&)>& body) {
  const milliseconds timeout(10000);
  GlooGroup a(size, 0, split, timeout, "127.0.0.1", "");
  GlooGroup b(size, split, size - split, timeout, "127.0.0.1", "");
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto comm = (rank < split ? a : b).connect(rank);
        body(*comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (int round = 0; round < 1000; ++round) {
    auto [keys_a, done_a] = a.take_local_keys(milliseconds(5));
    auto [keys_b, done_b] = b.take_local_keys(milliseconds(5));
    a.add_remote(keys_b);
    b.add_remote(keys_a);
    if (done_a && done_b) break;
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[static_cast<size_t>(rank)], "") << "rank " << rank;
  }
}

TEST(GlooGroup, SpansProcessesThroughForwardedKeys) {
  for (const auto& [size, split] : {std::pair{2, 1}, std::pair{4, 2}, std::pair{3, 1}}) {
    SCOPED_TRACE(testing::Message() << size << " ranks split at " << split);
    run_two_process_group(size, split, [n = size](Communicator& comm) {
      CpuDevice device(comm.rank(), 1);
      std::vector<float> v(1000, static_cast<float>(comm.rank() + 1));
      comm.all_reduce(v.data(), static_cast<int64_t>(v.size()), ReduceOp::kSum,
                      device.default_stream());
      const float expected = static_cast<float>(n * (n + 1) / 2);
      for (float x : v) ASSERT_EQ(x, expected);
      const double mine = comm.rank();
      const std::vector<double> all = comm.all_gather({&mine, 1});
      ASSERT_EQ(all.size(), static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], r);
    });
  }
}

TEST(GlooGroup, AbortedRendezvousFailsWaitingRanksWithTheReason) {
  const milliseconds timeout(10000);
  GlooGroup a(2, 0, 1, timeout, "127.0.0.1", "");
  std::string error;
  std::thread t([&] {
    try {
      (void)a.connect(0);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  // Its key goes out; the peer process's never comes.
  (void)a.take_local_keys(milliseconds(2000));
  a.abort("process rank 1 (node2) could not start its replicas");
  t.join();
  EXPECT_CONTAINS(error, "process rank 1 (node2) could not start its replicas");
  auto [keys, done] = a.take_local_keys(milliseconds(1));
  EXPECT_TRUE(done);
}

TEST(GlooGroup, RefusesRanksOfAnotherProcess) {
  GlooGroup a(4, 2, 2, milliseconds(1000), "127.0.0.1", "");
  EXPECT_CONTAINS(testing_util::error_of([&] { (void)a.connect(1); }),
                  "rank 1 is not one of this process's ranks [2, 4)");
  EXPECT_CONTAINS(
      testing_util::error_of([] { GlooGroup bad(4, 3, 2, milliseconds(1000), "", ""); }),
      "local ranks [3, 5) are not inside a group of 4");
}

const std::vector<LocalInterface> kInterfaces = {
    {.name = "lo", .addresses = {"127.0.0.1", "::1"}},
    {.name = "eth0", .addresses = {"10.0.0.5", "fe80::1"}},
    {.name = "ib0", .addresses = {}},
};

TEST(NetworkChoice, AnInterfaceByNameBindsByInterface) {
  const NetworkChoice c =
      resolve_network_choice("eth0", "--network-interface", "node1", kInterfaces);
  EXPECT_EQ(c.iface, "eth0");
  EXPECT_EQ(c.hostname, "");
  EXPECT_EQ(c.info,
            (NetworkInfo{
                .interface = "eth0", .address = "10.0.0.5", .chosen_by = "--network-interface"}));
}

TEST(NetworkChoice, AnAddressBindsByAddressAndNamesItsInterface) {
  const NetworkChoice v4 =
      resolve_network_choice("10.0.0.5", "GLOO_SOCKET_IFNAME", "n", kInterfaces);
  EXPECT_EQ(v4.iface, "");
  EXPECT_EQ(v4.hostname, "10.0.0.5");
  EXPECT_EQ(v4.info.interface, "eth0");
  EXPECT_EQ(v4.info.chosen_by, "GLOO_SOCKET_IFNAME");
  // The same IPv6 address written another way.
  const NetworkChoice v6 =
      resolve_network_choice("0:0::0001", "--network-interface", "n", kInterfaces);
  EXPECT_EQ(v6.hostname, "::1");
  EXPECT_EQ(v6.info.interface, "lo");
}

TEST(NetworkChoice, NothingOfThatNameListsTheInterfacesThatExist) {
  const std::string named = testing_util::error_of(
      [] { resolve_network_choice("eth9", "--network-interface", "node2", kInterfaces); });
  EXPECT_CONTAINS(named, "--network-interface eth9: node2 has no network interface named 'eth9'");
  EXPECT_CONTAINS(named, "lo (127.0.0.1, ::1), eth0 (10.0.0.5, fe80::1), ib0 (no address)");
  const std::string address = testing_util::error_of(
      [] { resolve_network_choice("10.0.0.6", "GLOO_SOCKET_IFNAME", "node2", kInterfaces); });
  EXPECT_CONTAINS(address,
                  "GLOO_SOCKET_IFNAME 10.0.0.6: node2 has no network interface with the "
                  "address '10.0.0.6'");
  EXPECT_CONTAINS(testing_util::error_of([] {
                    resolve_network_choice("ib0", "--network-interface", "node2", kInterfaces);
                  }),
                  "ib0: the interface exists on node2 but has no IPv4 or IPv6 address");
}

TEST(NetworkChoice, ThisHostHasLoopbackAndAHostNameRecordNamesIt) {
  const std::vector<LocalInterface> here = local_interfaces();
  const auto lo = std::find_if(here.begin(), here.end(),
                               [](const LocalInterface& i) { return i.name == "lo"; });
  ASSERT_NE(lo, here.end()) << describe_interfaces(here);
  EXPECT_NE(std::find(lo->addresses.begin(), lo->addresses.end(), "127.0.0.1"),
            lo->addresses.end());
  const NetworkChoice byname = network_by_host_name("localhost", here);
  EXPECT_EQ(byname.hostname, "localhost");
  EXPECT_EQ(byname.info.chosen_by, "host name");
  EXPECT_EQ(byname.info.interface, "lo") << byname.info.address;
}

// A host name that does not resolve is refused with the interfaces to choose from, where Gloo
// would bind to it and crash.
TEST(NetworkChoice, AHostNameThatDoesNotResolveIsRefusedNamingTheInterfaces) {
  const std::vector<LocalInterface> here = local_interfaces();
  const std::string message =
      testing_util::error_of([&] { (void)network_by_host_name("no-such-host.invalid", here); });
  EXPECT_CONTAINS(message, "'no-such-host.invalid' does not resolve");
  EXPECT_CONTAINS(message, "--network-interface");
  EXPECT_CONTAINS(message, describe_interfaces(here));
}

TEST(NetworkChoice, AProcessAloneRefusesAnUnknownInterface) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_CONTAINS(testing_util::error_of([] { (void)Cluster::join(milliseconds(1000), "nope0"); }),
                  "--network-interface nope0:");
  EXPECT_CONTAINS(testing_util::error_of([] { (void)Cluster::join(milliseconds(1000), "nope0"); }),
                  "lo (127.0.0.1");
  const auto alone = Cluster::join(milliseconds(1000), "lo");
  EXPECT_FALSE(alone->network().has_value());  // one process talks over loopback
}

TEST(NetworkInfo, RoundTripsThroughTheEnvironmentJson) {
  Environment env;
  env.network = NetworkInfo{.interface = "eth0", .address = "10.0.0.5", .chosen_by = "host name"};
  EXPECT_EQ(environment_from_json(to_json(env)), env);
  EXPECT_FALSE(to_json(Environment{}).contains("network"));
  EXPECT_FALSE(environment_from_json(to_json(Environment{})).network.has_value());
}

TEST(ClusterInfo, RoundTripsThroughJson) {
  ClusterInfo c;
  c.processes = 2;
  c.nodes = 2;
  c.replicas_per_process = 4;
  c.members = {{.rank = 0, .hostname = "a", .node = 0, .local_rank = 0, .cpus = "0"},
               {.rank = 1, .hostname = "b", .node = 1, .local_rank = 0, .cpus = "0"}};
  c.environments.resize(2);
  c.environments[1].host.hostname = "b";
  const nlohmann::json j = to_json(c);
  EXPECT_EQ(cluster_from_json(JsonReader(j, "test")), c);
  nlohmann::json broken = j;
  broken["members"].erase(1);
  EXPECT_CONTAINS(testing_util::error_of([&] { cluster_from_json(JsonReader(broken, "test")); }),
                  "a cluster of 2 processes lists 1 members");
  broken = j;
  broken["members"][0].erase("hostname");
  EXPECT_CONTAINS(testing_util::error_of([&] { cluster_from_json(JsonReader(broken, "test")); }),
                  "hostname");
}

}  // namespace
}  // namespace scalescope
