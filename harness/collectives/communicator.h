// Collectives between the replicas of a run: one interface, a Gloo implementation for CPU
// replicas (the NCCL one comes with the GPU backend).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"

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

  // In-place all-reduce of `count` floats of device memory, ordered after the work enqueued
  // on `stream` so far; the result is ready for work enqueued on `stream` afterwards.
  // Throws Error (naming the rank and the collective) on failure or after the timeout.
  virtual void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) = 0;
  // In-place broadcast of `count` floats from `root` to every rank.
  virtual void broadcast(float* data, int64_t count, int root, Stream& stream) = 0;
  virtual void barrier() = 0;
  // Every rank's `mine` (the same length on every rank), concatenated in rank order. For
  // small host values: timings, checksums.
  virtual std::vector<double> all_gather(std::span<const double> mine) = 0;
};

// The rendezvous of the replicas of one process: shared by their threads, each of which
// then creates its own communicator (creation blocks until all ranks have joined).
class GlooGroup {
 public:
  GlooGroup(int size, std::chrono::milliseconds timeout);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  int size() const { return size_; }
  // Connects rank `rank` to the others over TCP on loopback. Call once per rank (a failed
  // connect is not retried), each from its own thread, concurrently. Throws Error naming
  // the rank after the timeout.
  std::unique_ptr<Communicator> connect(int rank);

 private:
  struct Shared;
  int size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace scalescope
