// The memory cache of one device whose work is enqueued on streams (a GPU, the simulated
// accelerator). Getting memory from the system is slow there (cudaMalloc), and giving it back
// synchronizes the whole device (cudaFree), which would both cost time inside a step and erase
// the overlap of compute, copies and collectives that the trainer measures. Freed blocks are
// therefore kept, keyed by their rounded size, and handed out again: a training step that
// allocates the same sizes every step reaches a steady state with no system allocation.
//
// Stream safety. Device::deallocate names no stream, and a block may be freed while work
// enqueued earlier (on any stream of the device) still reads or writes it: a system free
// would have waited for that work. Instead, a freed block carries a fence: an ordering event
// recorded on every registered stream that still had work queued at the moment of the free.
// The block is handed out again only once all of its fences have been reached, so no later
// user can race with an earlier one. Until then a request of that size gets another block
// (one more system allocation while the cache warms up; at most as many extra blocks as
// there are steps in flight).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"

namespace scalescope {

class CachingAllocator {
 public:
  // Where the device's memory comes from (cudaMalloc, aligned_alloc), and how its fences
  // are made. Called with the allocator's lock held.
  class Source {
   public:
    virtual ~Source() = default;
    // `bytes` of device memory, or nullptr with `error` saying why (out of memory).
    virtual void* allocate(size_t bytes, std::string& error) noexcept = 0;
    virtual void free(void* ptr, size_t bytes) noexcept = 0;
    // An ordering event of the device (Device::create_ordering_event).
    virtual std::unique_ptr<Event> make_fence() = 0;
  };

  // Requests up to kSmallLimit bytes are rounded up to a multiple of kSmallGranule, larger
  // ones to a multiple of kLargeGranule: a step's tensors reuse each other's blocks when
  // their sizes differ slightly, and the waste stays under 2 MiB per large block.
  static constexpr size_t kSmallGranule = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kLargeGranule = size_t{2} << 20;

  // `name` ("cuda device 0") names the device in logged problems. `source` outlives the allocator.
  CachingAllocator(std::string name, Source& source);
  // Waits for the fences of cached blocks and frees every block, cached or still handed out
  // (a buffer that outlives its device is a bug: logged). Never throws.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The block size a request of `bytes` occupies (at least one small granule, so that even
  // a 0-byte request gets a distinct pointer).
  static size_t round_size(size_t bytes);

  // A block of round_size(bytes) bytes, from the cache when one of that size is free and
  // no longer in use by queued work, else from the source. When the source runs out of
  // memory, the cached blocks whose work has finished are released (without waiting for the
  // others: a collective stuck on a lost peer must not hang an allocation) and the source is
  // asked once more. Returns nullptr with `error` set when that fails too (the device names the
  // sizes and the memory in use in its error); throws only std::bad_alloc of host memory.
  // Thread-safe.
  void* allocate(size_t bytes, std::string& error);
  // Returns a block from allocate() to the cache, fenced against the work queued so far on
  // every registered stream. An unknown pointer is logged and ignored. Thread-safe.
  void deallocate(void* ptr) noexcept;

  // The streams whose queued work may use this device's memory. REQUIRES: every stream
  // that touches memory from this allocator is registered for as long as it exists (the
  // device's streams register themselves); unregister before destroying the stream.
  void register_stream(Stream& stream);
  void unregister_stream(Stream& stream) noexcept;

  // Frees the cached blocks once their fences are reached, waiting at most the wait timeout
  // for them; a block whose work does not finish by then stays cached (logged). Blocks
  // handed out stay.
  void release_cached() noexcept;
  // How long release_cached() and the destructor wait for queued work (default 5 minutes);
  // a device sets it to the run's collective timeout.
  void set_wait_timeout(std::chrono::milliseconds timeout) {
    const std::lock_guard lock(mutex_);
    wait_timeout_ = timeout;
  }
  // Waits until every registered stream has run the work queued on it so far (failures are
  // logged, not thrown): what a system free that synchronizes the device does.
  void wait_for_streams() noexcept;

  // System allocations that succeeded since construction.
  int64_t device_allocations() const { return device_allocations_.load(std::memory_order_relaxed); }
  // Bytes held from the source: handed out plus cached.
  int64_t reserved_bytes() const { return reserved_.load(std::memory_order_relaxed); }
  // Bytes in the cache, waiting for reuse.
  int64_t cached_bytes() const { return cached_.load(std::memory_order_relaxed); }

 private:
  struct FreeBlock {
    void* ptr = nullptr;
    size_t size = 0;
    std::vector<std::unique_ptr<Event>> fences;  // empty: reusable now
  };

  // All REQUIRE mutex_ held.
  bool fences_reached(FreeBlock& block) noexcept;
  bool fence(FreeBlock& block) noexcept;
  void* take_cached(size_t size) noexcept;
  void free_block(void* ptr, size_t size) noexcept;
  // Frees the cached blocks whose fences are reached within `wait`.
  void release_cached_locked(std::chrono::milliseconds wait) noexcept;
  bool fences_reached_within(FreeBlock& block,
                             std::chrono::steady_clock::time_point deadline) noexcept;
  void wait_for_streams_locked() noexcept;
  std::unique_ptr<Event> spare_fence();

  const std::string name_;
  Source& source_;
  std::mutex mutex_;
  std::multimap<size_t, FreeBlock> cache_;  // by block size
  std::unordered_map<void*, size_t> live_;  // handed out: block size
  std::vector<Stream*> streams_;
  std::vector<std::unique_ptr<Event>> spare_fences_;  // reached, for reuse
  std::string last_wait_failure_;                     // what wait_for_streams_locked last logged
  std::chrono::milliseconds wait_timeout_{std::chrono::minutes(5)};
  std::atomic<int64_t> device_allocations_{0};
  std::atomic<int64_t> reserved_{0};
  std::atomic<int64_t> cached_{0};
};

}  // namespace scalescope
