#include "core/cuda/caching_allocator.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/check.h"

namespace scalescope {
namespace {

// Makes `device` current for a scope and restores the previous one; for paths that must
// not throw (the allocator is called from destructors), so failures are logged and ok()
// says whether the device could be made current.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      previous_ = -1;
      (void)cudaGetLastError();  // not sticky: keep it from surfacing in a later check
    }
    if (previous_ == device) {
      ok_ = true;
      return;
    }
    const cudaError_t status = cudaSetDevice(device);
    ok_ = status == cudaSuccess;
    if (!ok_) {
      SS_LOG_ERROR("CUDA error: cannot make cuda:{} current: {}", device,
                   cudaGetErrorString(status));
    }
  }
  ~CurrentDevice() {
    if (ok_ && previous_ >= 0) SS_CHECK_CUDA_LOG(cudaSetDevice(previous_));
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

  bool ok() const { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = false;
};

}  // namespace

CachingAllocator::CachingAllocator(int device) : device_(device) {}

CachingAllocator::~CachingAllocator() {
  const CurrentDevice current(device_);
  const std::lock_guard lock(mutex_);
  release_cached_locked();
  if (!live_.empty()) {
    size_t bytes = 0;
    for (const auto& [ptr, size] : live_) bytes += size;
    SS_LOG_WARN(
        "cuda:{}: {} device block(s) ({} bytes) still in use when the device closed; "
        "freeing them",
        device_, live_.size(), bytes);
    for (const auto& [ptr, size] : live_) free_block(ptr, size);
    live_.clear();
  }
  for (cudaEvent_t event : spare_events_) SS_CHECK_CUDA_LOG(cudaEventDestroy(event));
  spare_events_.clear();
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= kSmallLimit) {
    return std::max<size_t>(1, (bytes + kSmallGranule - 1) / kSmallGranule) * kSmallGranule;
  }
  return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

void* CachingAllocator::allocate(size_t bytes, cudaError_t* status) {
  *status = cudaSuccess;
  const size_t size = round_size(bytes);
  const std::lock_guard lock(mutex_);
  if (void* ptr = take_cached(size)) return ptr;

  // Held under the lock: cudaMalloc is slow, but only this device's threads wait, and a
  // concurrent release_cached() must not free blocks while a retry counts on them.
  const CurrentDevice current(device_);
  void* ptr = nullptr;
  cudaError_t result = cudaMalloc(&ptr, size);
  if (result == cudaErrorMemoryAllocation && !cache_.empty()) {
    // Out of memory is not sticky; clear it so that a later SS_CHECK_LAUNCH does not
    // report it against an unrelated kernel. Then give the cache back and try once more.
    (void)cudaGetLastError();
    release_cached_locked();
    result = cudaMalloc(&ptr, size);
  }
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    *status = result;
    return nullptr;
  }
  try {
    live_.emplace(ptr, size);
  } catch (...) {
    SS_CHECK_CUDA_LOG(cudaFree(ptr));
    throw;
  }
  device_allocations_.fetch_add(1, std::memory_order_relaxed);
  reserved_.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  const std::lock_guard lock(mutex_);
  const auto it = live_.find(ptr);
  if (it == live_.end()) {
    SS_LOG_ERROR(
        "cuda:{}: deallocate of {} which this device did not allocate (or freed "
        "twice); ignored",
        device_, ptr);
    return;
  }
  const size_t size = it->second;
  live_.erase(it);

  FreeBlock block{ptr, size, {}};
  bool fenced = false;
  try {
    const CurrentDevice current(device_);  // events are created on the current device
    fenced = current.ok();
    for (cudaStream_t stream : streams_) {
      if (!fenced) break;
      // An idle stream has nothing queued that could still use the block: no fence needed.
      // A stream with work queued gets an event after that work; later work on it cannot
      // use the block (it was freed before being enqueued).
      const cudaError_t query = cudaStreamQuery(stream);
      if (query == cudaSuccess) continue;
      if (query != cudaErrorNotReady) {
        SS_LOG_ERROR("CUDA error: cudaStreamQuery failed while freeing a block on cuda:{}: {}",
                     device_, cudaGetErrorString(query));
        fenced = false;
        break;
      }
      const cudaEvent_t event = spare_event();
      if (event == nullptr) {
        fenced = false;
        break;
      }
      block.fences.push_back(event);
      const cudaError_t record = cudaEventRecord(event, stream);
      if (record != cudaSuccess) {
        SS_LOG_ERROR("CUDA error: cudaEventRecord failed while freeing a block on cuda:{}: {}",
                     device_, cudaGetErrorString(record));
        fenced = false;
      }
    }
    if (fenced) {
      cache_.emplace(size, std::move(block));
      cached_.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
      return;
    }
  } catch (const std::exception& e) {
    SS_LOG_ERROR("cuda:{}: caching a freed block failed: {}", device_, e.what());
  }
  // Without a fence the block cannot be reused safely: cudaFree waits for the device.
  for (cudaEvent_t event : block.fences) SS_CHECK_CUDA_LOG(cudaEventDestroy(event));
  free_block(ptr, size);
}

void CachingAllocator::register_stream(cudaStream_t stream) {
  const std::lock_guard lock(mutex_);
  streams_.push_back(stream);
}

void CachingAllocator::unregister_stream(cudaStream_t stream) noexcept {
  const std::lock_guard lock(mutex_);
  // Fences already recorded on the stream stay valid: its queued work still runs.
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

void CachingAllocator::release_cached() noexcept {
  const std::lock_guard lock(mutex_);
  release_cached_locked();
}

bool CachingAllocator::fences_complete(FreeBlock& block) noexcept {
  while (!block.fences.empty()) {
    const cudaEvent_t event = block.fences.back();
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaErrorNotReady) return false;
    if (status != cudaSuccess) {
      // The work before the fence failed; the context is likely unusable. Not reusing the
      // block is the safe answer; the failure itself surfaces at the caller's next check.
      return false;
    }
    block.fences.pop_back();
    try {
      spare_events_.push_back(event);
    } catch (...) {
      SS_CHECK_CUDA_LOG(cudaEventDestroy(event));
    }
  }
  return true;
}

void* CachingAllocator::take_cached(size_t size) noexcept {
  const auto [first, last] = cache_.equal_range(size);
  for (auto it = first; it != last; ++it) {
    if (!fences_complete(it->second)) continue;
    void* ptr = it->second.ptr;
    try {
      live_.emplace(ptr, size);
    } catch (...) {
      return nullptr;  // no host memory to track it: leave it cached
    }
    cache_.erase(it);
    cached_.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
    return ptr;
  }
  return nullptr;
}

void CachingAllocator::free_block(void* ptr, size_t size) noexcept {
  const CurrentDevice current(device_);
  SS_CHECK_CUDA_LOG(cudaFree(ptr));
  reserved_.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
}

void CachingAllocator::release_cached_locked() noexcept {
  for (auto& [size, block] : cache_) {
    // cudaFree synchronizes the device as well; waiting for the fences first makes the
    // dependency explicit instead of relying on that.
    for (cudaEvent_t event : block.fences) {
      SS_CHECK_CUDA_LOG(cudaEventSynchronize(event));
      SS_CHECK_CUDA_LOG(cudaEventDestroy(event));
    }
    free_block(block.ptr, size);
  }
  cache_.clear();
  cached_.store(0, std::memory_order_relaxed);
}

cudaEvent_t CachingAllocator::spare_event() noexcept {
  if (!spare_events_.empty()) {
    const cudaEvent_t event = spare_events_.back();
    spare_events_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  // Without timing: a fence only orders, and timing-less events are cheaper to record.
  const cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (status != cudaSuccess) {
    SS_LOG_ERROR("CUDA error: cudaEventCreateWithFlags failed on cuda:{}: {}", device_,
                 cudaGetErrorString(status));
    return nullptr;
  }
  return event;
}

}  // namespace scalescope
