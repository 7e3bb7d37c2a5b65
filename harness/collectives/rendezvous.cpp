#include "harness/collectives/rendezvous.h"

#include <fmt/format.h>

#include <cstdint>

#include "core/check.h"
#include "harness/collectives/cluster.h"
#include "harness/collectives/failures.h"
#include "harness/collectives/replica_comms.h"

namespace scalescope {
namespace {

nlohmann::json binary(const std::string& bytes) {
  return nlohmann::json::binary(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

std::string text_of(const nlohmann::json& j) {
  const auto& bytes = j.get_binary();
  return {bytes.begin(), bytes.end()};
}

// This process's message of one round: the keys its replicas set since the last round.
nlohmann::json round_message(ReplicaComms& comms) {
  // A short wait: a round goes out even without news, so no process waits on another's
  // slow start here (the per-round exchange has the collective timeout).
  auto [keys, done] = comms.gloo().take_local_keys(std::chrono::milliseconds(20));
  nlohmann::json m = {{"status", "ok"}, {"done", done}, {"keys", binary(keys)}};
  if (GlooGroup* node = comms.node_gloo(); node != nullptr) {
    auto [node_keys, node_done] = node->take_local_keys(std::chrono::milliseconds(0));
    m["done"] = done && node_done;
    m["node_keys"] = binary(node_keys);
  }
  const std::vector<char>& id = comms.nccl_id();
  if (!id.empty()) m["nccl_id"] = binary(std::string(id.begin(), id.end()));
  return m;
}

// What process `from` (on node `node`) said in a round, taken in by this process's replicas.
void take_round(ReplicaComms& comms, const nlohmann::json& m, bool same_node) {
  comms.gloo().add_remote(text_of(m.at("keys")));
  GlooGroup* node = comms.node_gloo();
  if (node != nullptr && same_node && m.contains("node_keys")) {
    node->add_remote(text_of(m.at("node_keys")));
  }
  if (m.contains("nccl_id") && comms.needs_nccl_id()) {
    const std::string id = text_of(m.at("nccl_id"));
    try {
      comms.set_nccl_id(std::vector<char>(id.begin(), id.end()));
    } catch (const Error&) {
      // The replicas waiting for it fail with the reason (set_nccl_id aborted them).
    }
  }
}

}  // namespace

std::vector<nlohmann::json> exchange_messages(Cluster& cluster, const nlohmann::json& mine,
                                              std::chrono::milliseconds timeout, const char* what) {
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(mine);
  const std::vector<std::string> all =
      cluster.exchange(std::string(bytes.begin(), bytes.end()), timeout, what);
  std::vector<nlohmann::json> messages;
  for (size_t p = 0; p < all.size(); ++p) {
    try {
      messages.push_back(
          nlohmann::json::from_cbor(std::vector<uint8_t>(all[p].begin(), all[p].end())));
    } catch (const nlohmann::json::exception& e) {
      throw_error(fmt::format(
          "process {} sent a message this process cannot read ({}); are all processes the same "
          "scalescope build?",
          p, e.what()));
    }
  }
  return messages;
}

void run_rendezvous(Cluster& cluster, ReplicaComms* comms, const std::exception_ptr& setup_error,
                    std::chrono::milliseconds timeout) {
  const int me = cluster.rank();
  const int my_node = cluster.members()[static_cast<size_t>(me)].node;
  bool aborted = false;
  while (true) {
    nlohmann::json mine = {{"status", "idle"}, {"done", true}};
    if (setup_error) {
      mine = error_message(setup_error);
      mine["done"] = true;
    } else if (comms != nullptr) {
      mine = round_message(*comms);
    }
    std::vector<nlohmann::json> all;
    try {
      all = exchange_messages(cluster, mine, timeout, "the rendezvous of a run");
    } catch (...) {
      if (comms != nullptr) comms->abort("the rendezvous between the processes failed");
      throw;
    }
    bool all_done = true;
    for (size_t p = 0; p < all.size(); ++p) {
      const nlohmann::json& m = all[p];
      all_done = all_done && m.at("done").get<bool>();
      if (static_cast<int>(p) == me || comms == nullptr) continue;
      if (m.at("status") == "ok") {
        take_round(*comms, m, cluster.members()[p].node == my_node);
      } else if (m.at("status") == "error" && !aborted) {
        // Its replicas will never connect: ours must not wait for them until the timeout.
        aborted = true;
        comms->abort(fmt::format("process {} could not start its replicas",
                                 cluster.describe(static_cast<int>(p))));
      }
    }
    if (all_done) return;
  }
}

}  // namespace scalescope
