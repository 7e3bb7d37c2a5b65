// Collectives between the replicas of a run: one interface, a Gloo implementation for CPU
// replicas (the NCCL one comes with the GPU backend).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "models/kernel_math/half_math.h"

namespace scalescope {

enum class ReduceOp { kSum, kAverage };

// Not thread-safe: one thread at a time may call a communicator (the trainer hands it to its
// communication thread for the gradient buckets of a step and uses it itself only between
// steps). Gloo's collectives block the calling thread until done: the overlap of
// communication with backward comes from the caller's threads (or, on GPUs, streams).
// After a failed collective a communicator refuses further ones: the ranks may no longer
// agree on which message belongs to which collective.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;  // "gloo", "nccl"
  // Whether collectives on device memory are enqueued on the stream given (NCCL: they
  // return at once and run in stream order) rather than run by the calling thread, which
  // they block until done (Gloo). Decides how a caller overlaps them with its own work.
  virtual bool enqueues() const { return false; }
  // The host threads of its own the communicator keeps running beside the caller's (Gloo:
  // its TCP device's event loop), which a CPU replica's compute shares the cores with. A GPU
  // library's internal threads (NCCL's proxy) are not counted.
  virtual int host_threads() const { return 0; }

  // In-place all-reduce of `count` floats of device memory, ordered after the work enqueued
  // on `stream` so far; the result is ready for work enqueued on `stream` afterwards.
  // Throws Error (naming the rank and the collective) on failure or after the timeout.
  virtual void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) = 0;
  // In-place sum of `count` 16-bit floats of device memory in `format` (gradients compressed
  // and pre-divided by the replica count), each partial sum rounded to the format, as NCCL's
  // half sums do; otherwise as all_reduce. A backend without it throws Error naming itself.
  virtual void all_reduce_half(uint16_t* data, int64_t count, kernel_math::HalfFormat format,
                               Stream& stream);
  // In-place broadcast of `count` floats from `root` to every rank.
  virtual void broadcast(float* data, int64_t count, int root, Stream& stream) = 0;
  virtual void barrier() = 0;
  // Every rank's `mine` (the same length on every rank), concatenated in rank order. For
  // small host values: timings, checksums.
  virtual std::vector<double> all_gather(std::span<const double> mine) = 0;
  // Blocks the host until the work enqueued on `stream` so far has finished. Where
  // collectives are enqueued on streams (NCCL), work behind a collective with a lost peer
  // would never finish: such a communicator waits at most its timeout and throws Error
  // naming `what`. Use it for every host wait on a stream that may hold collectives.
  virtual void synchronize(Stream& stream, const std::string& what) {
    (void)what;
    stream.synchronize();
  }
  // Makes the collectives this rank has enqueued on its device return unfinished, and every
  // later call fail. An enqueued collective whose peer is gone waits on the device until
  // then (NCCL's kernels stop only at their own communicator's ncclCommAbort), and so does
  // whatever synchronizes that device (cudaFreeHost, cublasDestroy): a replica that fails
  // aborts its communicators before tearing anything else down. Nothing to do where the
  // calling thread runs the collectives (Gloo). Idempotent; never throws.
  virtual void abort(const std::string& why) noexcept { (void)why; }
};

// The rendezvous of a group of replicas, shared by the threads of this process, each of
// which then creates its own communicator (creation blocks until all ranks have joined).
// The group may span processes: this process then hosts ranks [first, first + local) of
// the `size`, and its main thread carries the rendezvous keys between the processes in
// rounds (take_local_keys() out, add_remote() in) until every rank has connected
// (harness/collectives/rendezvous.h runs those rounds). Gloo sets and waits for several keys
// per rank, in an order of its own, so every key set here is forwarded, not just the
// addresses.
class GlooGroup {
 public:
  // Every rank in this process, on loopback.
  GlooGroup(int size, std::chrono::milliseconds timeout);
  // Ranks [first, first + local) of `size` in this process, their TCP devices bound to
  // `hostname` (or to the network interface `iface` when not empty).
  GlooGroup(int size, int first, int local, std::chrono::milliseconds timeout, std::string hostname,
            std::string iface);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  int size() const { return size_; }
  int first() const { return first_; }
  int local() const { return local_; }
  // Connects rank `rank` (of the whole group) to the others. Call once per local rank (a
  // failed connect is not retried), each from its own thread, concurrently. Throws Error
  // naming the rank after the timeout, or when the group was aborted.
  std::unique_ptr<Communicator> connect(int rank);

  // Spanning processes, on the process's main thread: the rendezvous keys local ranks set
  // since the last call (serialized), returned once there are some, every local rank has
  // finished connecting, or `wait` has passed; and whether every local rank has finished.
  std::pair<std::string, bool> take_local_keys(std::chrono::milliseconds wait);
  // Adds another process's keys (from its take_local_keys()).
  void add_remote(const std::string& keys);
  // Makes every connect waiting for a peer's address, now or later, throw Error with `why`;
  // one already connecting to a peer's address ends within the timeout (gloo_connect.h).
  void abort(const std::string& why);
  // Local rank `rank` is done with connect() (connected or failed) or will not call it (its
  // replica failed before). connect() calls it itself; calling it again is harmless.
  void finished(int rank);

 private:
  class Store;
  int size_;
  int first_;
  int local_;
  std::chrono::milliseconds timeout_;
  std::string hostname_;
  std::string iface_;
  std::unique_ptr<Store> store_;
  std::mutex mutex_;
  std::vector<bool> connected_;
};

}  // namespace scalescope
