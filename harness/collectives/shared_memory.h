// Collectives between the replica threads of one process through shared memory: every rank
// reads the others' buffers where they lie, so nothing is copied through sockets. Each
// collective is a few barrier rounds: for an all-reduce, rank r sums slice r over the ranks in
// rank order and writes the sum into slice r of every rank's buffer (so every rank ends with
// the same bits, in one pass over the memory). Used by simulated devices (enqueued on their
// streams, sim_collectives.h) and by CPU replicas of one process (blocking the calling thread, as
// Gloo's collectives do), where it is what NCCL's shared-memory transport is within a node.
// Host values (barrier, all_gather) stay with the replicas' Gloo communicators.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "harness/collectives/communicator.h"

namespace scalescope {

// The library named by errors of CPU replicas' shared-memory collectives.
inline constexpr const char* kSharedMemoryLibrary = "shared-memory collectives";

// Who runs a world's collectives, which decides what ends their waits.
enum class SharedMemoryWaits {
  // The ranks' own threads (CPU replicas): a rank that gives up, or abort(), breaks the
  // world, so that the others fail at once instead of each waiting out its own timeout.
  kHost,
  // The ranks' stream workers (sim devices), as NCCL's kernels on a GPU: a rank's waits end
  // only when the others come, when that rank is abandoned (its communicator's abort, as
  // ncclCommAbort stops that communicator's kernels and no other's) or at the timeout (a
  // safety net a GPU does not have). abort() ends none of them: it is what the host waits
  // poll (aborted()). Once a rank has left, no collective completes any more.
  kDevice,
};

// The ranks of one group. Every wait gives up at `timeout`. Errors name `library`.
class SharedMemoryWorld {
 public:
  SharedMemoryWorld(int size, std::chrono::milliseconds timeout, std::string library,
                    SharedMemoryWaits waits = SharedMemoryWaits::kHost);

  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // In place; the ranks must pass the same count (else every rank fails, naming both).
  void all_reduce(int rank, float* data, int64_t count, ReduceOp op);
  // Each partial sum rounded to `format`, as NCCL's half sums do.
  void all_reduce_half(int rank, uint16_t* data, int64_t count, kernel_math::HalfFormat format);
  void broadcast(int rank, float* data, int64_t count, int root);
  // kHost: makes every collective, waiting now or later, throw Error with `why`. kDevice:
  // records `why` for aborted(). Thread-safe.
  void abort(const std::string& why);
  // Why the world was aborted or broken ("" while it was not). Thread-safe.
  std::string aborted() const;
  // kDevice: makes rank `rank`'s collectives, waiting now or later, throw Error with `why`,
  // and no other collective complete. Thread-safe.
  void abandon(int rank, const std::string& why);
  [[noreturn]] void fail(int rank, const std::string& message) const;

 private:
  struct Buffer {
    void* data = nullptr;
    int64_t count = 0;
    size_t element = 0;  // bytes per value
  };

  template <class T, class Sum, class Finish>
  void reduce(int rank, T* data, int64_t count, const char* what, Sum sum, Finish finish);
  std::pair<int64_t, int64_t> slice(int rank, int64_t count) const;
  std::vector<Buffer> post(int rank, void* data, int64_t count, size_t element, const char* what);
  void wait_all(int rank, const char* what);
  bool anyone_left() const;  // REQUIRES: mutex_ held

  const int size_;
  const std::chrono::milliseconds timeout_;
  const std::string library_;
  const bool device_;  // SharedMemoryWaits::kDevice
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Buffer> data_;  // guarded by mutex_, as are the members below
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string broken_;             // kHost: why every later collective fails; kDevice: aborted()
  std::vector<std::string> left_;  // kDevice: why each rank was abandoned ("" while it was not)
};

// CPU rank `rank` of `world`: all_reduce, all_reduce_half and broadcast through the world,
// run by the calling thread (which they block until done, as Gloo's do); barrier and
// all_gather through `host` (that rank's Gloo communicator).
std::unique_ptr<Communicator> make_shared_memory_communicator(
    std::shared_ptr<SharedMemoryWorld> world, int rank, std::unique_ptr<Communicator> host);

}  // namespace scalescope
