#include "harness/collectives/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <source_location>
#include <string_view>
#include <utility>

#include "core/backoff.h"
#include "core/check.h"
#include "core/cuda/cuda_device.h"

namespace scalescope {

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes &&
                  NCCL_UNIQUE_ID_BYTES == kNcclUniqueIdBytes,
              "kNcclUniqueIdBytes must be the size of NCCL's unique id");

namespace {

constexpr const char* kLibrary = "NCCL";
using Clock = std::chrono::steady_clock;

std::string describe(ncclResult_t result, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  if (last == nullptr || *last == '\0') return ncclGetErrorString(result);
  return fmt::format("{} ({})", ncclGetErrorString(result), last);
}

// A non-blocking communicator's configuration: its calls return at once and we poll them
// against the collective timeout.
ncclConfig_t non_blocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// NCCL_COMM_BLOCKING=1 overrides that setting (NCCL 2.28's envConfigOverride) and makes
// every call block with no timeout, so that a lost peer would hang the run.
void refuse_blocking_environment() {
  const char* env = std::getenv("NCCL_COMM_BLOCKING");
  SS_CHECK(env == nullptr || std::strtol(env, nullptr, 10) != 1,
           "NCCL_COMM_BLOCKING=1 is set: NCCL's calls would block with no timeout and a lost "
           "replica would hang the run; unset it (scalescope's NCCL communicators are "
           "non-blocking and give up after --collective-timeout-ms)");
}

}  // namespace

struct NcclGroup::Shared {
  ncclUniqueId id{};
  std::atomic<bool> aborted{false};
  std::mutex mutex;
  std::string why;  // guarded by mutex

  std::string abort_reason() {
    const std::lock_guard lock(mutex);
    return why;
  }
};

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int rank = 0;  // global
  int size = 0;
  int device = 0;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<NcclGroup::Shared> group;
  std::unique_ptr<Communicator> host;
  cudaEvent_t done = nullptr;  // wait()'s marker on the stream; ordering only
  bool broken = false;
  std::string broken_reason;

  ~State() { close(); }

  std::string who() const { return fmt::format("rank {} of {}", rank, size); }

  void abort_comm() noexcept {
    if (comm == nullptr) return;
    SS_CHECK_CUDA_LOG(cudaSetDevice(device));
    // Makes NCCL's kernels still queued or running on the GPU return, so that the streams
    // they hold drain and nothing waits on a dead peer any more.
    SS_CHECK_NCCL_LOG(ncclCommAbort(comm));
    comm = nullptr;
  }

  // Marks the communicator broken, aborts it and throws: after a failure the ranks may no
  // longer agree on which collective comes next, so nothing further may be enqueued.
  [[noreturn]] void fail(const char* library, std::string_view expression, std::string_view what,
                         const std::string& message,
                         std::source_location where = std::source_location::current()) {
    broken = true;
    broken_reason = fmt::format("{}: {}", what, message);
    abort_comm();
    throw Error(library, std::string(expression), fmt::format("{}: {}: {}", who(), what, message),
                where);
  }

  void check_usable(std::string_view collective) const {
    SS_CHECK(!broken && comm != nullptr,
             "{}: {}: this NCCL communicator is unusable after an earlier failure ({})", who(),
             collective, broken_reason.empty() ? "aborted" : broken_reason);
  }

  void check_stream(const Stream& stream, std::string_view collective) const {
    const DeviceId id = stream.device().id();
    SS_CHECK(id.kind == DeviceKind::kCuda && id.index == device,
             "{}: {}: the NCCL communicator of {} takes a stream of that GPU (normally its "
             "comm_stream()); got a stream of {} (CPU replicas use Gloo)",
             who(), collective, to_string(DeviceId{DeviceKind::kCuda, device}), to_string(id));
  }

  // NCCL's asynchronous state: ncclSuccess or ncclInProgress; anything else fails.
  ncclResult_t async_state(std::string_view what) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) {
      fail(kLibrary, "ncclCommGetAsyncError", what, describe(result, comm));
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      fail(kLibrary, "ncclCommGetAsyncError", what, describe(state, comm));
    }
    return state;
  }

  void check_abort_and_deadline(std::string_view what, Clock::time_point deadline,
                                std::chrono::milliseconds limit) {
    if (group->aborted.load()) {
      fail(kLibrary, "ncclCommAbort", what,
           fmt::format("the group was aborted: {}", group->abort_reason()));
    }
    if (Clock::now() >= deadline) {
      fail(kLibrary, "ncclCommGetAsyncError", what,
           fmt::format("timed out after {} ms (a peer may have died or never joined)",
                       limit.count()));
    }
  }

  // Waits until NCCL has finished the operation it answered ncclInProgress to (creation, or
  // an enqueue on a non-blocking communicator).
  void wait_ready(std::string_view what, std::chrono::milliseconds limit) {
    const Clock::time_point deadline = Clock::now() + limit;
    Backoff backoff;
    while (async_state(what) == ncclInProgress) {
      check_abort_and_deadline(what, deadline, limit);
      backoff.pause();
    }
  }

  // Checks the result of an NCCL call on this communicator; ncclInProgress means the
  // non-blocking communicator is still working on it, which must end before the next call.
  void check_call(ncclResult_t result, std::string_view expression, std::string_view what) {
    if (result == ncclInProgress) {
      wait_ready(what, timeout);
    } else if (result != ncclSuccess) {
      fail(kLibrary, expression, what, describe(result, comm));
    }
  }

  // Finalizes (flushing what was enqueued) within the timeout, else aborts; never throws.
  void close() noexcept {
    if (comm != nullptr) {
      SS_CHECK_CUDA_LOG(cudaSetDevice(device));
      bool clean = !broken && !group->aborted.load();
      if (clean) {
        ncclResult_t result = ncclCommFinalize(comm);
        const Clock::time_point deadline = Clock::now() + timeout;
        Backoff backoff;
        while (result == ncclInProgress || result == ncclSuccess) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) {
            result = ncclInternalError;
            break;
          }
          result = state;
          if (state != ncclInProgress) break;
          if (group->aborted.load() || Clock::now() >= deadline) {
            SS_LOG_ERROR(
                "NCCL: {}: finalizing the communicator did not finish within {} ms; "
                "aborting it",
                who(), timeout.count());
            result = ncclInProgress;
            break;
          }
          backoff.pause();
        }
        clean = result == ncclSuccess;
        if (!clean && result != ncclInProgress) {
          SS_LOG_ERROR("NCCL: {}: finalizing the communicator failed: {}; aborting it", who(),
                       describe(result, comm));
        }
      }
      if (clean) {
        SS_CHECK_NCCL_LOG(ncclCommDestroy(comm));
        comm = nullptr;
      } else {
        abort_comm();
      }
    }
    if (done != nullptr) {
      SS_CHECK_CUDA_LOG(cudaEventDestroy(done));
      done = nullptr;
    }
    try {
      host.reset();
    } catch (...) {
      SS_LOG_ERROR("NCCL: {}: closing the host communicator failed", who());
    }
  }
};

NcclGroup::NcclGroup(int size, std::chrono::milliseconds timeout, ShareId share_id,
                     int first_global_rank)
    : size_(size), first_global_rank_(first_global_rank), timeout_(timeout), whole_run_(!share_id) {
  SS_CHECK(size >= 1, "NcclGroup: size must be >= 1, got {}", size);
  SS_CHECK(timeout.count() > 0, "NcclGroup: timeout must be > 0 ms, got {} ms", timeout.count());
  SS_CHECK(first_global_rank >= 0, "NcclGroup: first global rank must be >= 0, got {}",
           first_global_rank);
  SS_CHECK(share_id || first_global_rank == 0,
           "NcclGroup: the ranks from {} on need share_id to receive global rank 0's unique id",
           first_global_rank);
  refuse_blocking_environment();
  shared_ = std::make_shared<Shared>();

  std::vector<char> mine;
  if (first_global_rank == 0) {
    // Only the process of global rank 0 creates an id: creating one also starts NCCL's
    // bootstrap root, which listens for the ranks of exactly that id.
    ncclUniqueId id{};
    SS_CHECK_NCCL(ncclGetUniqueId(&id));
    mine.assign(id.internal, id.internal + kNcclUniqueIdBytes);
  }
  std::vector<char> id = share_id ? share_id(mine) : mine;
  SS_CHECK(id.size() == kNcclUniqueIdBytes,
           "NcclGroup: share_id returned {} bytes; an NCCL unique id has {}", id.size(),
           kNcclUniqueIdBytes);
  SS_CHECK(first_global_rank != 0 || id == mine,
           "NcclGroup: share_id returned another id than the one this process (global rank 0) "
           "created");
  std::memcpy(shared_->id.internal, id.data(), kNcclUniqueIdBytes);
  connected_.assign(static_cast<size_t>(size), false);
}

NcclGroup::~NcclGroup() = default;

void NcclGroup::abort(const std::string& why) {
  {
    const std::lock_guard lock(shared_->mutex);
    if (shared_->why.empty()) shared_->why = why.empty() ? "aborted" : why;
  }
  shared_->aborted.store(true);
}

std::unique_ptr<NcclCommunicator> NcclGroup::connect(int rank, int device_index, int global_rank,
                                                     int world_size,
                                                     std::unique_ptr<Communicator> host_comm) {
  SS_CHECK(rank >= 0 && rank < size_, "NcclGroup::connect: rank {} is out of range [0, {})", rank,
           size_);
  SS_CHECK(world_size >= first_global_rank_ + size_,
           "NcclGroup::connect: a world of {} cannot hold this process's ranks [{}, {})",
           world_size, first_global_rank_, first_global_rank_ + size_);
  SS_CHECK(!whole_run_ || world_size == size_,
           "NcclGroup::connect: a group made without share_id is the whole run ({} ranks), "
           "not a world of {}",
           size_, world_size);
  SS_CHECK(global_rank == first_global_rank_ + rank,
           "NcclGroup::connect: local rank {} is global rank {}, not {}", rank,
           first_global_rank_ + rank, global_rank);
  SS_CHECK(device_index >= 0, "NcclGroup::connect: GPU index {} is negative", device_index);
  SS_CHECK(host_comm != nullptr,
           "NcclGroup::connect: rank {} needs a host communicator (from a GlooGroup) for "
           "barrier and all_gather",
           global_rank);
  SS_CHECK(host_comm->rank() == global_rank && host_comm->size() == world_size,
           "NcclGroup::connect: the host communicator is rank {} of {}, but NCCL's is rank {} of "
           "{}",
           host_comm->rank(), host_comm->size(), global_rank, world_size);
  {
    // Each rank joins once: NCCL would wait for a second copy of a rank that never comes.
    const std::lock_guard lock(mutex_);
    SS_CHECK(!connected_[static_cast<size_t>(rank)],
             "NcclGroup::connect: rank {} is already connected", global_rank);
    connected_[static_cast<size_t>(rank)] = true;
  }
  SS_CHECK(!shared_->aborted.load(), "NcclGroup::connect: rank {}: the group was aborted: {}",
           global_rank, shared_->abort_reason());

  auto state = std::make_unique<NcclCommunicator::State>();
  state->rank = global_rank;
  state->size = world_size;
  state->device = device_index;
  state->timeout = timeout_;
  state->group = shared_;
  state->host = std::move(host_comm);

  SS_CHECK_CUDA(cudaSetDevice(device_index));  // NCCL binds the communicator to it
  SS_CHECK_CUDA(cudaEventCreateWithFlags(&state->done, cudaEventDisableTiming));

  // Non-blocking: the call returns at once and NCCL connects in the background, which lets
  // this thread give up at the timeout (or on abort) instead of waiting for a peer forever.
  ncclConfig_t config = non_blocking_config();
  const ncclResult_t result =
      ncclCommInitRankConfig(&state->comm, world_size, shared_->id, global_rank, &config);
  const std::string what =
      fmt::format("creating the NCCL communicator on {} (waiting for {} ranks to join)",
                  to_string(DeviceId{DeviceKind::kCuda, device_index}), world_size);
  if (result != ncclSuccess && result != ncclInProgress) {
    state->fail(kLibrary, "ncclCommInitRankConfig", what, describe(result, state->comm));
  }
  state->wait_ready(what, timeout_);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state)));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() = default;  // State::close

int NcclCommunicator::rank() const {
  return state_->rank;
}
int NcclCommunicator::size() const {
  return state_->size;
}
int NcclCommunicator::device_index() const {
  return state_->device;
}

void NcclCommunicator::all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) {
  State& s = *state_;
  s.check_stream(stream, "all_reduce");
  SS_CHECK(count >= 0, "{}: all_reduce: count must be >= 0, got {}", s.who(), count);
  if (count == 0) return;
  s.check_usable("all_reduce");
  const cudaStream_t cuda = cuda_stream(stream);
  const ScopedCudaDevice scope(s.device);
  // ncclAvg divides on the GPU as part of the reduction: no second pass over the buffer.
  const ncclRedOp_t nccl_op = op == ReduceOp::kAverage ? ncclAvg : ncclSum;
  s.check_call(
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32, nccl_op, s.comm, cuda),
      "ncclAllReduce", fmt::format("all_reduce of {} floats", count));
}

void NcclCommunicator::all_reduce_half(uint16_t* data, int64_t count,
                                       kernel_math::HalfFormat format, Stream& stream) {
  State& s = *state_;
  s.check_stream(stream, "all_reduce_half");
  SS_CHECK(count >= 0, "{}: all_reduce_half: count must be >= 0, got {}", s.who(), count);
  if (count == 0) return;
  s.check_usable("all_reduce_half");
  const cudaStream_t cuda = cuda_stream(stream);
  const ScopedCudaDevice scope(s.device);
  const ncclDataType_t type = format == kernel_math::HalfFormat::kFp16 ? ncclFloat16 : ncclBfloat16;
  s.check_call(ncclAllReduce(data, data, static_cast<size_t>(count), type, ncclSum, s.comm, cuda),
               "ncclAllReduce", fmt::format("all_reduce_half of {} values", count));
}

void NcclCommunicator::broadcast(float* data, int64_t count, int root, Stream& stream) {
  State& s = *state_;
  s.check_stream(stream, "broadcast");
  SS_CHECK(count >= 0, "{}: broadcast: count must be >= 0, got {}", s.who(), count);
  SS_CHECK(root >= 0 && root < s.size, "{}: broadcast: root {} is out of range for a group of {}",
           s.who(), root, s.size);
  if (count == 0) return;
  s.check_usable("broadcast");
  const cudaStream_t cuda = cuda_stream(stream);
  const ScopedCudaDevice scope(s.device);
  s.check_call(
      ncclBroadcast(data, data, static_cast<size_t>(count), ncclFloat32, root, s.comm, cuda),
      "ncclBroadcast", fmt::format("broadcast of {} floats from rank {}", count, root));
}

void NcclCommunicator::barrier() {
  state_->host->barrier();
}

std::vector<double> NcclCommunicator::all_gather(std::span<const double> mine) {
  return state_->host->all_gather(mine);
}

void NcclCommunicator::wait(Stream& stream, const std::string& what,
                            std::chrono::milliseconds timeout) {
  State& s = *state_;
  s.check_stream(stream, what);
  s.check_usable(what);
  const std::chrono::milliseconds limit = timeout.count() > 0 ? timeout : s.timeout;
  const ScopedCudaDevice scope(s.device);
  // An event pins "what was enqueued so far": cudaStreamQuery would also wait for work that
  // other threads enqueue on the stream meanwhile.
  SS_CHECK_CUDA(cudaEventRecord(s.done, cuda_stream(stream)));
  const Clock::time_point deadline = Clock::now() + limit;
  Backoff backoff;
  for (;;) {
    const cudaError_t status = cudaEventQuery(s.done);
    if (status == cudaSuccess) break;
    if (status != cudaErrorNotReady) {
      s.fail("CUDA", "cudaEventQuery", what,
             fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status)));
    }
    (void)s.async_state(what);
    s.check_abort_and_deadline(what, deadline, limit);
    backoff.pause();
  }
  // A collective that failed may still have let the stream drain: NCCL's verdict decides.
  (void)s.async_state(what);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::split(int color, int key,
                                                          std::unique_ptr<Communicator> host_comm) {
  State& s = *state_;
  SS_CHECK(color >= 0, "{}: split: colour {} must not be negative", s.who(), color);
  SS_CHECK(host_comm != nullptr, "{}: split: the new communicator needs a host communicator",
           s.who());
  s.check_usable("split");
  auto state = std::make_unique<NcclCommunicator::State>();
  state->rank = host_comm->rank();
  state->size = host_comm->size();
  state->device = s.device;
  state->timeout = s.timeout;
  state->group = s.group;
  state->host = std::move(host_comm);
  const ScopedCudaDevice scope(s.device);
  SS_CHECK_CUDA(cudaEventCreateWithFlags(&state->done, cudaEventDisableTiming));
  ncclConfig_t config = non_blocking_config();
  const std::string what = fmt::format("splitting the NCCL communicator (colour {})", color);
  const ncclResult_t result = ncclCommSplit(s.comm, color, key, &state->comm, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    state->fail(kLibrary, "ncclCommSplit", what, describe(result, s.comm));
  }
  // Both the parent (non-blocking: the split runs in its background) and the child must be
  // ready before either is used. A parent that fails leaves a child NCCL may never finish
  // making: it is aborted at its destruction, not finalized (which would wait out the timeout).
  try {
    s.wait_ready(what, s.timeout);
  } catch (...) {
    state->broken = true;
    throw;
  }
  state->wait_ready(what, s.timeout);
  int nccl_rank = -1;
  int nccl_size = 0;
  SS_CHECK_NCCL(ncclCommUserRank(state->comm, &nccl_rank));
  SS_CHECK_NCCL(ncclCommCount(state->comm, &nccl_size));
  SS_CHECK(nccl_rank == state->rank && nccl_size == state->size,
           "{}: split: NCCL made rank {} of {}, but the host communicator is rank {} of {}",
           s.who(), nccl_rank, nccl_size, state->rank, state->size);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state)));
}

void NcclCommunicator::abort(const std::string& why) noexcept {
  State& s = *state_;
  if (!s.broken) {
    s.broken = true;
    try {
      s.broken_reason = why.empty() ? "aborted" : why;
    } catch (...) {
      // Out of host memory for the reason: the communicator is still aborted.
    }
  }
  s.abort_comm();
}

}  // namespace scalescope
