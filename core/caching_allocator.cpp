#include "core/caching_allocator.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/log.h"

namespace scalescope {

CachingAllocator::CachingAllocator(std::string name, Source& source)
    : name_(std::move(name)), source_(source) {}

CachingAllocator::~CachingAllocator() {
  const std::lock_guard lock(mutex_);
  release_cached_locked(wait_timeout_);
  if (!live_.empty()) {
    size_t bytes = 0;
    for (const auto& [ptr, size] : live_) bytes += size;
    SS_LOG_WARN(
        "{}: {} device block(s) ({} bytes) still in use when the device closed; freeing "
        "them",
        name_, live_.size(), bytes);
    for (const auto& [ptr, size] : live_) free_block(ptr, size);
    live_.clear();
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= kSmallLimit) {
    return std::max<size_t>(1, (bytes + kSmallGranule - 1) / kSmallGranule) * kSmallGranule;
  }
  return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

void* CachingAllocator::allocate(size_t bytes, std::string& error) {
  const size_t size = round_size(bytes);
  // Held while the source allocates: slow, but only this device's threads wait, and a
  // concurrent release_cached() must not free blocks while a retry counts on them.
  const std::lock_guard lock(mutex_);
  if (void* ptr = take_cached(size)) return ptr;
  void* ptr = source_.allocate(size, error);
  if (ptr == nullptr && !cache_.empty()) {
    // Give back what no queued work uses any more, and try once more.
    release_cached_locked(std::chrono::milliseconds(0));
    error.clear();
    ptr = source_.allocate(size, error);
  }
  if (ptr == nullptr) return nullptr;
  try {
    live_.emplace(ptr, size);
  } catch (...) {
    source_.free(ptr, size);
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
        "{}: deallocate of {} which this device did not allocate (or freed twice); "
        "ignored",
        name_, ptr);
    return;
  }
  FreeBlock block{ptr, it->second, {}};
  live_.erase(it);
  if (fence(block)) {
    try {
      const size_t size = block.size;
      cache_.emplace(size, std::move(block));
      cached_.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
      return;
    } catch (const std::exception& e) {
      SS_LOG_ERROR("{}: caching a freed block failed: {}", name_, e.what());
    }
  }
  // Without its fences the block cannot be reused safely: wait for the device's streams, as
  // a system free would, and give it back.
  wait_for_streams_locked();
  free_block(block.ptr, block.size);
}

void CachingAllocator::wait_for_streams() noexcept {
  const std::lock_guard lock(mutex_);
  wait_for_streams_locked();
}

void CachingAllocator::wait_for_streams_locked() noexcept {
  for (Stream* stream : streams_) {
    try {
      stream->synchronize();
    } catch (const std::exception& e) {
      // A device's fault fails every later wait of its streams alike: said once.
      if (last_wait_failure_ != e.what()) {
        SS_LOG_ERROR("{}: waiting for a stream's work failed: {}", name_, e.what());
        try {
          last_wait_failure_ = e.what();
        } catch (...) {
          // Out of host memory: the next failure is logged again.
        }
      }
    }
  }
}

bool CachingAllocator::fence(FreeBlock& block) noexcept {
  try {
    for (Stream* stream : streams_) {
      // An idle stream has nothing queued that could still use the block: no fence needed.
      // A stream with work queued gets a fence after that work; later work on it cannot use
      // the block (it was freed before being enqueued).
      if (stream->idle()) continue;
      block.fences.push_back(spare_fence());
      block.fences.back()->record(*stream);
    }
    return true;
  } catch (const std::exception& e) {
    SS_LOG_ERROR("{}: fencing a freed block failed: {}", name_, e.what());
    return false;
  }
}

void CachingAllocator::register_stream(Stream& stream) {
  const std::lock_guard lock(mutex_);
  streams_.push_back(&stream);
}

void CachingAllocator::unregister_stream(Stream& stream) noexcept {
  const std::lock_guard lock(mutex_);
  // Fences already recorded on the stream stay valid: its queued work still runs.
  streams_.erase(std::remove(streams_.begin(), streams_.end(), &stream), streams_.end());
}

void CachingAllocator::release_cached() noexcept {
  const std::lock_guard lock(mutex_);
  release_cached_locked(wait_timeout_);
}

bool CachingAllocator::fences_reached(FreeBlock& block) noexcept {
  while (!block.fences.empty()) {
    // A fence whose work failed is never reached: not reusing the block is the safe answer;
    // the failure itself surfaces at the owner's next synchronisation.
    if (!block.fences.back()->query()) return false;
    try {
      spare_fences_.push_back(std::move(block.fences.back()));
    } catch (...) {
      // no room to keep it for reuse: it is simply destroyed
    }
    block.fences.pop_back();
  }
  return true;
}

void* CachingAllocator::take_cached(size_t size) noexcept {
  const auto [first, last] = cache_.equal_range(size);
  for (auto it = first; it != last; ++it) {
    if (!fences_reached(it->second)) continue;
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
  source_.free(ptr, size);
  reserved_.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
}

bool CachingAllocator::fences_reached_within(
    FreeBlock& block, std::chrono::steady_clock::time_point deadline) noexcept {
  for (const std::unique_ptr<Event>& fence : block.fences) {
    try {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (!fence->synchronize_for(std::max(left, std::chrono::milliseconds(0)))) return false;
    } catch (const std::exception& e) {
      // The work before the fence failed: it will never use the block again.
      SS_LOG_ERROR("{}: the work before a freed block's fence failed: {}", name_, e.what());
    }
  }
  return true;
}

void CachingAllocator::release_cached_locked(std::chrono::milliseconds wait) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  size_t kept = 0;
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!fences_reached_within(it->second, deadline)) {
      ++kept;
      ++it;
      continue;
    }
    free_block(it->second.ptr, it->first);
    cached_.fetch_sub(static_cast<int64_t>(it->first), std::memory_order_relaxed);
    it = cache_.erase(it);
  }
  if (kept > 0 && wait.count() > 0) {
    SS_LOG_ERROR("{}: {} freed block(s) still used by queued work after {} ms: kept, not freed",
                 name_, kept, wait.count());
  }
}

std::unique_ptr<Event> CachingAllocator::spare_fence() {
  if (spare_fences_.empty()) return source_.make_fence();
  std::unique_ptr<Event> fence = std::move(spare_fences_.back());
  spare_fences_.pop_back();
  return fence;
}

}  // namespace scalescope
