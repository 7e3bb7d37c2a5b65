// The exchanges between the processes of a multi-process run, over the cluster's control
// channel. Two per run, made by every process whatever happened to it, so that all stay in
// step for the next run: the rendezvous of the replicas' collectives, and the results.
// Messages are JSON objects, sent as CBOR, with a "status": "ok", "error" (and then
// "library" and "message") or "idle" (a process that hosts no replica of this run).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

namespace scalescope {

class Cluster;
class ReplicaComms;

// Every process's `mine`, in rank order (Cluster::exchange, decoded). Throws Error naming a
// process whose message cannot be read, and the cluster's errors for a lost process.
std::vector<nlohmann::json> exchange_messages(Cluster& cluster, const nlohmann::json& mine,
                                              std::chrono::milliseconds timeout, const char* what);

// The rendezvous, in rounds: each process forwards the keys its replicas' Gloo groups set
// (addresses and Gloo's own handshakes, the node groups' too) and, from the process of
// replica 0, the device collectives' id, until every replica of every process has
// connected or failed. All processes leave at the same round: they decide from the same
// messages. `comms`: this process's replicas' (null when it hosts none of this run);
// `setup_error`: why this process could not start its replicas (null when it could). The
// others' replicas are aborted when a process reports an error. Throws the cluster's Error
// when a process is lost, after aborting `comms`.
void run_rendezvous(Cluster& cluster, ReplicaComms* comms, const std::exception_ptr& setup_error,
                    std::chrono::milliseconds timeout);

}  // namespace scalescope
