// The all-reduce benchmark behind `scalescope collectives`, in the manner of nccl-tests'
// all_reduce_perf: over a range of message sizes, warm up, barrier, time many all-reduces on
// every rank, combine the ranks by a named policy, and check the data of one more all-reduce
// against its exact result. Independent of the command line so that tests can drive it (and
// corrupt it) directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/device_spec.h"
#include "harness/collectives/communicator.h"
#include "reports/analysis/scaling.h"

namespace scalescope {

// How the ranks' times of one size become the group's: the slowest rank's, since a
// collective is not done until every rank has its result (nccl-tests reports the same).
inline constexpr const char* kRankCombinePolicy = "max";

struct AllReduceBenchOptions {
  // Message sizes in bytes, each a positive multiple of sizeof(float) (see message_sizes).
  std::vector<int64_t> sizes;
  int warmup_iters = 5;  // untimed all-reduces of each size before its timed ones
  int iters = 20;        // timed all-reduces per size
  ReduceOp op = ReduceOp::kSum;
};

struct AllReduceSizeResult {
  int64_t bytes = 0;
  int64_t count = 0;  // floats
  // Mean time of one all-reduce: per rank, and the group's (the ranks combined by
  // kRankCombinePolicy).
  double time_us = 0;
  std::vector<double> rank_time_us;
  // nccl-tests' definitions (reports/analysis/scaling.h); 0 when the time is too short to measure.
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  // Elements that differed from the exact result after the checked all-reduce: on each
  // rank, and summed over the ranks.
  int64_t wrong = 0;
  std::vector<int64_t> rank_wrong;
};

struct AllReduceBenchResult {
  std::string backend;  // the communicator's: "gloo", "nccl"
  int ranks = 0;
  AllReduceBenchOptions options;
  std::vector<AllReduceSizeResult> sizes;

  int64_t wrong() const;  // over every size and rank
  // Mean bus bandwidth over the sizes (nccl-tests' "Avg bus bandwidth").
  double average_busbw_gbps() const;
};

// "8", "64K", "64M", "1G" (K, M, G are powers of 1024, either case, optionally followed by
// "B" or "iB"). Throws Error naming `flag` and the text when it is not a positive size.
int64_t parse_byte_size(std::string_view text, std::string_view flag);
// min, min*factor, min*factor², ... up to and including max when on the way (nccl-tests'
// -b/-e/-f). Throws Error naming the bad value: min_bytes must be a positive multiple of 4
// (whole floats), max_bytes >= min_bytes, factor >= 2.
std::vector<int64_t> message_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor);
const char* to_string(ReduceOp op);  // "sum", "avg"
// "sum" or "avg"; throws Error naming the text otherwise.
ReduceOp parse_reduce_op(std::string_view text);

// The data check. Rank r's element i holds check_input(r, i), a small integer depending on
// both, so that a misplaced chunk or a rank's missing contribution changes the result. Sums
// of such values are exact in float; the average is sum / ranks divided once in float, the
// correctly rounded quotient, which is what a sum-then-divide all-reduce produces.
float check_input(int rank, int64_t index);
float check_expected(int ranks, int64_t index, ReduceOp op);
// Whether an all-reduced element `value` is right. Sums are compared exactly. An average may
// be the divided sum (Gloo, simulated devices) or, as NCCL computes a float average, the sum
// of every rank's value pre-multiplied by float(1/ranks): each rounding is within half an
// ulp, so an average is accepted within (ranks + 2) ulps of check_expected. A rank's missing
// or doubled contribution moves it by far more (at least 2/(ranks·(ranks+1)) of it).
bool check_matches(float value, int ranks, int64_t index, ReduceOp op);

// nccl-tests' timing method, one rank's part: `warmup` untimed calls of `body` (which
// enqueues collectives of `comm` on `stream`), their end awaited, a barrier so that every
// rank starts together, then `iters` calls timed back to back by events on `stream` (where
// the work runs). Returns this rank's milliseconds per call; callers combine the ranks'
// (kRankCombinePolicy). REQUIRES: the device current; iters >= 1.
double time_collective(Communicator& comm, Device& device, Stream& stream, int warmup, int iters,
                       const std::function<void()>& body);

// One rank's part of the benchmark: every rank of `comm`'s group calls it concurrently with
// the same options, each on its own thread. Per size: `warmup_iters` all-reduces, a barrier,
// `iters` all-reduces timed by events on `on` (default: `device`'s default stream; where the
// work runs: the host clock on CPU, the stream on a GPU), then one all-reduce of the check
// pattern, read
// back and compared element by element. Ranks exchange times and wrong counts with
// all_gather, so every rank returns the same result.
// REQUIRES: the device current; `comm` collectives take `device`'s memory.
// Throws Error for bad options (naming the value) or a failed collective.
// `on_size`, when set, is called on rank 0 with each size's group result as soon as it is
// known (a terminal prints the table as it goes).
using SizeCallback = std::function<void(const AllReduceSizeResult&)>;
AllReduceBenchResult benchmark_all_reduce(Communicator& comm, Device& device,
                                          const AllReduceBenchOptions& options,
                                          const SizeCallback& on_size = {}, Stream* on = nullptr);

// Lets a caller (a test) stand between a rank and its communicator, e.g. to corrupt data.
using CommunicatorWrapper =
    std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator>)>;

// benchmark_all_reduce on `ranks` CPU replicas as threads of this process, connected by
// Gloo (`timeout` per collective). Throws the Error of the lowest failing rank.
AllReduceBenchResult benchmark_all_reduce_gloo(int ranks, const AllReduceBenchOptions& options,
                                               std::chrono::milliseconds timeout,
                                               const CommunicatorWrapper& wrap = {},
                                               const SizeCallback& on_size = {});

// benchmark_all_reduce on the devices of `spec` as threads of this process: CPU ranks
// connected by Gloo, GPUs by NCCL (on each GPU's communication stream). Throws the Error of
// the lowest failing rank.
AllReduceBenchResult benchmark_all_reduce_on(const DeviceSpec& spec,
                                             const AllReduceBenchOptions& options,
                                             std::chrono::milliseconds timeout,
                                             const CommunicatorWrapper& wrap = {},
                                             const SizeCallback& on_size = {});

class Cluster;

// The ranks of `spec` each of `processes` processes runs; throws Error naming the devices
// when they do not divide evenly.
int ranks_per_process(const DeviceSpec& spec, int processes);

// benchmark_all_reduce_on across the processes of `cluster` (mpirun, srun): `spec` counts the
// ranks of every process, each process runs an equal share on its first devices, and the
// groups' rendezvous goes over the cluster's control channel. Every process returns the
// same result (`on_size` is called on the process of rank 0). Throws Error when the ranks do
// not divide evenly, for bad options, or for a failed collective or lost process.
AllReduceBenchResult benchmark_all_reduce_across(Cluster& cluster, const DeviceSpec& spec,
                                                 const AllReduceBenchOptions& options,
                                                 std::chrono::milliseconds timeout,
                                                 const SizeCallback& on_size = {});

// The α-β fit (reports/analysis/scaling.h) of the measured times over the sizes; nullopt with one
// rank (nothing moves) or fewer than two sizes.
std::optional<AlphaBetaFit> fit_all_reduce(const AllReduceBenchResult& result);

// The results as JSON (without the environment, which the caller adds).
nlohmann::json to_json(const AllReduceBenchResult& result);

}  // namespace scalescope
