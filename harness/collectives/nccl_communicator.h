// The NCCL communicator: collectives between GPU replicas, one GPU per replica thread.
//
// NCCL moves device memory only. The host-value collectives of Communicator (barrier,
// all_gather of doubles) go through a host communicator that the NCCL communicator owns
// alongside, created by the caller from a GlooGroup of the same ranks.
//
// Never hang: NCCL communicators are created non-blocking (NcclGroup refuses
// NCCL_COMM_BLOCKING=1, which would override that), and every wait on NCCL (the creation, an
// enqueue that reports ncclInProgress, wait() on a stream) polls ncclCommGetAsyncError
// against the timeout. On an error or at the timeout the communicator
// is aborted (ncclCommAbort, which also makes its kernels still on the GPU return) and Error
// (library "NCCL") is thrown naming the rank, the collective and NCCL's message. A dead
// peer thus costs at most one timeout, never a hung process.
//
// This header includes neither NCCL nor CUDA, so that it can be included anywhere; the
// implementation is compiled only into builds with the CUDA backend, which register it as
// the collectives of CUDA replicas (make_nccl_collective_backend, collective_backends.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "harness/collectives/communicator.h"

namespace scalescope {

class CollectiveBackend;

// NCCL_UNIQUE_ID_BYTES: the size of an ncclUniqueId, which is what a multi-process launch
// must carry from the process of global rank 0 to the others.
inline constexpr size_t kNcclUniqueIdBytes = 128;

class NcclCommunicator;

// The NCCL rendezvous of the replica threads of one process, one GPU per thread. A run in
// one process: NcclGroup(size, timeout); every thread r then calls connect(r, gpu, r, size).
// A run over several processes: this process hosts global ranks [first_global_rank,
// first_global_rank + size) of world_size, and every process constructs its group on its
// main thread with the same `share_id` protocol (see the constructor).
class NcclGroup {
 public:
  // The bootstrap of a multi-process run. Called exactly once, from the constructor, on the
  // constructing thread: with the 128 bytes of a fresh ncclUniqueId in the process that hosts
  // global rank 0 (first_global_rank == 0), with an empty vector in every other process. It
  // must return, in every process, the bytes that the process of global rank 0 passed in
  // (a broadcast from that process, e.g. over Cluster::exchange); a returned size other
  // than kNcclUniqueIdBytes is an Error. It may throw (a lost peer): the constructor
  // passes the exception on.
  using ShareId = std::function<std::vector<char>(std::vector<char> mine)>;

  // `size`: the ranks (threads) of this process. `timeout`: for creating the communicators,
  // and the default of every later wait. Without `share_id` the group is the whole run
  // (first_global_rank must be 0) and creates the unique id itself. Throws Error on bad
  // arguments or when NCCL cannot create an id.
  NcclGroup(int size, std::chrono::milliseconds timeout, ShareId share_id = {},
            int first_global_rank = 0);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return size_; }
  int first_global_rank() const { return first_global_rank_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Creates the communicator of local rank `rank` (0 <= rank < size()), which is global rank
  // `global_rank` (== first_global_rank() + rank) of `world_size`, on GPU `device_index`
  // (made current on the calling thread, and left current). `host_comm` is that rank's
  // communicator of a GlooGroup of the same world (rank and size must match): it carries
  // barrier() and all_gather(). Call once per local rank, each from its own thread,
  // concurrently: creation returns when every rank of the world has joined. Throws Error
  // naming the rank when NCCL fails, when the others did not join within the timeout, or
  // when the group was aborted; the half-made NCCL communicator is aborted first.
  std::unique_ptr<NcclCommunicator> connect(int rank, int device_index, int global_rank,
                                            int world_size,
                                            std::unique_ptr<Communicator> host_comm);

  // Makes every wait of this group's communicators, now or later (a connect waiting for
  // peers, wait(), a destructor), abort its NCCL communicator and throw Error with `why`:
  // a replica that failed calls it so that its siblings stop at once instead of waiting for
  // the timeout. Thread-safe.
  void abort(const std::string& why);

  struct Shared;  // the id and the abort flag, shared with the communicators

 private:
  int size_;
  int first_global_rank_;
  std::chrono::milliseconds timeout_;
  bool whole_run_;  // no share_id: this process's ranks are all there are
  std::shared_ptr<Shared> shared_;
  std::mutex mutex_;
  std::vector<bool> connected_;
};

// REQUIRES (every device-memory collective): `data` is device memory of this
// communicator's GPU, and `stream` is a CUDA stream of that GPU (normally the replica's
// comm_stream()). The collective is enqueued on `stream` after the work already enqueued
// there, and returns without waiting for it; work that consumes the result must be ordered
// after it (an event recorded on `stream`, waited on by the consumer's stream). Work that
// produced `data` on another stream (the gradients of backward on the compute stream) must
// likewise be ordered before the call: record an event after it and wait_on(stream) first.
// Not thread-safe (see Communicator).
class NcclCommunicator final : public Communicator {
 public:
  ~NcclCommunicator() override;  // finalizes within the timeout, else aborts; never throws
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;  // the global rank
  int size() const override;  // the world size
  std::string backend_name() const override { return "nccl"; }
  bool enqueues() const override { return true; }
  int device_index() const;

  // ncclAllReduce in place; kAverage is ncclAvg.
  void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) override;
  // ncclAllReduce in place of ncclFloat16 or ncclBfloat16 values, ncclSum.
  void all_reduce_half(uint16_t* data, int64_t count, kernel_math::HalfFormat format,
                       Stream& stream) override;
  // ncclBroadcast in place from global rank `root`.
  void broadcast(float* data, int64_t count, int root, Stream& stream) override;
  // Through the host communicator: orders the ranks' host threads, not their GPU work.
  void barrier() override;
  std::vector<double> all_gather(std::span<const double> mine) override;

  // Blocks the host until the work enqueued on `stream` so far has finished, polling the
  // stream (through an event recorded now) and this communicator's asynchronous error.
  // When NCCL reports an error, the group is aborted, or `timeout` (0: the group's) passes
  // first, the communicator is aborted (its kernels return) and Error is thrown naming the
  // rank and `what`. Use it instead of Stream::synchronize wherever a collective may be
  // queued, so that a dead peer cannot hang the caller. REQUIRES: `stream` is a CUDA stream
  // of this communicator's GPU.
  void wait(Stream& stream, const std::string& what = "waiting for the collectives",
            std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // wait(stream, what) with the group's timeout.
  void synchronize(Stream& stream, const std::string& what) override { wait(stream, what); }

  // The communicator of the ranks that pass the same `color`, ranked by `key`
  // (ncclCommSplit), sharing this one's group (its abort and timeout). Collective over this
  // communicator's ranks, each from its own thread. `host_comm` carries the new
  // communicator's barrier and all_gather: its rank and size must be the new communicator's.
  // Throws Error naming the rank when NCCL fails or the others do not join within the
  // timeout.
  std::unique_ptr<NcclCommunicator> split(int color, int key,
                                          std::unique_ptr<Communicator> host_comm);

  // ncclCommAbort now (idempotent): its kernels on the GPU return; later collectives throw.
  void abort(const std::string& why) noexcept override;

 private:
  friend class NcclGroup;
  struct State;  // NCCL and CUDA handles
  explicit NcclCommunicator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The collectives of CUDA replicas: NCCL's NcclGroup for device memory, and Gloo for host values.
std::unique_ptr<CollectiveBackend> make_nccl_collective_backend();

}  // namespace scalescope
