#include "reports/environment.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "reports/json_reader.h"
#include "tests/reports/json_round_trip.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

Environment sample() {
  Environment env;
  env.captured_at = "2025-01-31T12:34:56Z";
  env.command_line = "scalescope train --devices cuda:0,1";
  env.host = {"node7",
              "Intel(R) Xeon(R) Platinum 8480+",
              224,
              112,
              int64_t{2} << 40,
              "Ubuntu 22.04.4 LTS",
              "5.15.0-105-generic",
              "x86_64"};
  env.gpus = {{0, "NVIDIA H100 80GB HBM3", "GPU-0a1b2c3d-0000-1111-2222-333344445555",
               "00000000:18:00.0", int64_t{85} << 30, "9.0", 132},
              {1, "NVIDIA H100 80GB HBM3", "GPU-0a1b2c3d-0000-1111-2222-333344445556",
               "00000000:2A:00.0", int64_t{85} << 30, "9.0", 132}};
  env.gpu_error = "";
  env.libraries = {"13.0", "13.0", "9.13.0", "2.28.3", "13.0.0", "2.6.3", "0.5.0", "4.5 (201511)"};
  env.build = {"0.1.0", "GNU 12.2.0", "Release",
               true,    "90",         "0123456789abcdef0123456789abcdef01234567",
               true};
  env.env_vars = {{"NCCL_DEBUG", "INFO"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  return env;
}

TEST(Environment, RoundTripsThroughJson) {
  const Environment env = sample();
  const nlohmann::json j = to_json(env);
  EXPECT_EQ(j["host"]["logical_cores"], 224);
  EXPECT_EQ(j["gpus"][1]["pci_bus_id"], "00000000:2A:00.0");
  EXPECT_EQ(j["env_vars"]["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(environment_from_json(j), env);
  // Through text too, as `compare` reads it.
  EXPECT_EQ(environment_from_json(nlohmann::json::parse(j.dump())), env);

  Environment empty;  // a CPU-only capture: no GPUs, no variables
  empty.gpu_error = "built without CUDA";
  EXPECT_EQ(environment_from_json(to_json(empty)), empty);
}

// Every key the writer writes is read back into its field: the environment of a multi-process
// run on simulated devices, and the cluster of two nodes that carries it.
TEST(Environment, EveryKeyRoundTrips) {
  Environment env = sample();
  env.gpu_error = "GPU 2: cudaErrorDevicesUnavailable";
  env.simulated_devices = kSimulatedDevicesNote;
  env.network = NetworkInfo{.interface = "eth0", .address = "10.0.0.7", .chosen_by = "host name"};
  env.gpus[0].index = 2;  // not the default 0, so that a reader that forgot it shows
  Environment defaults;
  defaults.gpus = {GpuInfo{}};
  testing_util::expect_round_trip(to_json(env), to_json(defaults),
                                  to_json(environment_from_json(to_json(env))));

  ClusterInfo cluster{
      .processes = 2,
      .nodes = 2,
      .replicas_per_process = 4,
      .members = {{.rank = 0, .hostname = "node7", .node = 0, .local_rank = 0, .cpus = ""},
                  {.rank = 1, .hostname = "node8", .node = 1, .local_rank = 1, .cpus = "0-3,8"}},
      .environments = {env, env}};
  ClusterInfo default_cluster;
  default_cluster.members = {ClusterMember{}};
  default_cluster.environments = {defaults};
  const nlohmann::json j = to_json(cluster);
  // The first member's rank, node and local rank are 0, as a default member's; the second's
  // are set.
  nlohmann::json second_member = j;
  second_member["members"].erase(0);
  testing_util::expect_every_key_set(second_member, to_json(default_cluster));
  EXPECT_EQ(to_json(cluster_from_json(JsonReader(j, "cluster"))), j);
}

TEST(Environment, MissingKeyIsNamed) {
  nlohmann::json j = to_json(sample());
  j["host"].erase("memory_bytes");
  const std::string message = error_of([&] { environment_from_json(j); });
  EXPECT_CONTAINS(message, "environment: missing key 'host.memory_bytes'");

  j = to_json(sample());
  j.erase("build");
  EXPECT_CONTAINS(error_of([&] { environment_from_json(j); }), "missing key 'build'");

  j = to_json(sample());
  j["gpus"][1].erase("uuid");
  EXPECT_CONTAINS(error_of([&] { environment_from_json(j); }), "missing key 'gpus[1].uuid'");

  // Inside a report, the error names the report and the full path.
  nlohmann::json report = {{"environment", to_json(sample())}};
  report["environment"]["host"].erase("os");
  EXPECT_CONTAINS(
      error_of([&] {
        environment_from_json(JsonReader(report, "report run.json").object("environment"));
      }),
      "report run.json: missing key 'environment.host.os'");
}

TEST(Environment, WrongTypeIsNamed) {
  nlohmann::json j = to_json(sample());
  j["host"]["logical_cores"] = "224";
  EXPECT_CONTAINS(error_of([&] { environment_from_json(j); }),
                  "environment: 'host.logical_cores' must be an integer, not string");

  j = to_json(sample());
  j["build"]["git_dirty"] = 1;
  EXPECT_CONTAINS(error_of([&] { environment_from_json(j); }),
                  "'build.git_dirty' must be true or false");

  j = to_json(sample());
  j["env_vars"]["NCCL_DEBUG"] = 3;
  EXPECT_CONTAINS(error_of([&] { environment_from_json(j); }),
                  "'env_vars.NCCL_DEBUG' must be a string");

  j = to_json(sample());
  j["gpus"] = nlohmann::json::object();
  EXPECT_CONTAINS(error_of([&] { environment_from_json(j); }), "'gpus' must be an array");

  EXPECT_THROW(environment_from_json(nlohmann::json::array()), Error);
}

}  // namespace
}  // namespace scalescope
