// Which error caused a failure of a run, among the errors of its replicas and processes: a
// collective that failed because a peer left is a consequence, not a cause (those can
// arrive first: a failed replica closes its connections while unwinding).
#pragma once

#include <nlohmann/json.hpp>

#include <exception>
#include <string>
#include <vector>

namespace scalescope {

class Cluster;

// Whether errors of this library name a lost peer rather than a cause (Gloo, NCCL, the
// simulated devices' collectives).
bool is_collective_library(const std::string& library);

// The cause among one process's replica errors: the first that is not a collective failure.
// REQUIRES: `errors` non-empty.
std::exception_ptr cause_of(const std::vector<std::exception_ptr>& errors);

// A process's error as a message to the others: {"status": "error", "kind", "library",
// "message"}, where kind is "usage" or "out_of_memory" (UsageError, OutOfMemoryError, whose
// message is their brief text) or "internal" (any other error, with its source line).
nlohmann::json error_message(const std::exception_ptr& error);

// Throws the cause among the processes' messages (in rank order; those with status
// "error"), naming the process it came from, as an error of the class it was thrown as;
// returns when none failed.
void throw_first_error(const std::vector<nlohmann::json>& messages, const Cluster& cluster);

}  // namespace scalescope
