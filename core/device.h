// Devices, streams and events: the execution abstraction every backend implements.
//
// Work is enqueued on a Stream and runs in stream order; an Event records a point on a
// stream, later streams can wait for it, and the time between two events is measured where
// the work ran. The CPU implementation runs enqueued work inline on the calling thread, so
// its events read a steady clock when recorded; the CUDA implementation maps one to one on
// cudaStream_t / cudaEvent_t. Callers never need to know which one they hold.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace scalescope {

// kSim: the simulated accelerator (core/sim), a GPU-like device that computes on the CPU.
enum class DeviceKind { kCpu, kCuda, kSim };

const char* to_string(DeviceKind kind);

struct DeviceId {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  friend bool operator==(const DeviceId&, const DeviceId&) = default;
};

std::string to_string(const DeviceId& id);  // "cpu device 0", "cuda device 1"

class Device;

class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  virtual Device& device() const = 0;
  // Blocks the host until everything enqueued so far has finished.
  virtual void synchronize() = 0;
  // Whether everything enqueued so far has finished; never blocks. A failure of the work is
  // left for synchronize() to report (idle() is then true).
  virtual bool idle() const = 0;

 protected:
  Stream() = default;
};

class Event {
 public:
  virtual ~Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Records the point after all work enqueued on `stream` so far.
  // REQUIRES: `stream` belongs to the device that created this event.
  virtual void record(Stream& stream) = 0;
  // Makes all work enqueued on `stream` later wait for this event; does not block the host.
  virtual void wait_on(Stream& stream) const = 0;
  // Blocks the host until the recorded point has been reached.
  virtual void synchronize() const = 0;
  // synchronize(), giving up after `timeout`: false when the point has not been reached by
  // then (work behind a collective whose peer is gone may never reach it).
  virtual bool synchronize_for(std::chrono::milliseconds timeout) const = 0;
  // Whether the recorded point has been reached (true for an event never recorded); never
  // blocks. A failure of the work before it counts as not reached.
  virtual bool query() const = 0;
  // Milliseconds from `start` to this event. REQUIRES: both recorded (and, on CUDA, reached:
  // the caller synchronizes once per step, never per phase) on the same device.
  virtual double elapsed_ms_since(const Event& start) const = 0;

 protected:
  Event() = default;
  // elapsed_ms_since's precondition: `start_as_mine` is the start event cast to the
  // implementation's own type (null when it is another backend's), and both can time.
  // Throws Error naming what is wrong.
  static void check_elapsed(const Event* start_as_mine, bool timing, bool start_timing);
};

// One device. A replica owns its Device; everything it creates belongs to that device.
class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual DeviceId id() const = 0;
  virtual std::string name() const = 0;
  // The PCI bus id of a GPU as CUDA prints it ("0000:3B:00.0"), which NVML looks devices up
  // by; empty for devices that have none (CPU).
  virtual std::string pci_bus_id() const { return {}; }
  // Makes this device current for the calling thread (cudaSetDevice; the CPU device sets
  // the calling thread's OpenMP thread count). Called at the start of every replica thread.
  virtual void make_current() = 0;
  // Whether the host may read and write this device's memory directly (CPU devices, whose
  // memory is host memory); otherwise only copies reach it.
  virtual bool host_accessible() const { return false; }
  // Whether the device only plans (BackendOptions::plan_only): nothing may read or write its
  // memory, and nothing enqueued on it runs.
  virtual bool plans_only() const { return false; }
  // Host threads this device's kernels run on (a CPU device's share of the cores); 0 for a
  // device whose kernels run elsewhere.
  virtual int threads() const { return 0; }

  // Memory. allocate returns 64-byte aligned memory or throws Error naming the size.
  // A backend may keep freed memory for reuse (CUDA caches its blocks, because cudaMalloc
  // and cudaFree synchronize the device and would serialize a step that allocates).
  // deallocate may be called while work enqueued earlier still uses the memory, as with
  // cudaFree. REQUIRES: that work runs on streams of this device (its own three, or from
  // create_stream()), whose progress the cache waits for before handing the memory out again.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) noexcept = 0;
  // How many times this device asked its system allocator for device memory (cudaMalloc,
  // aligned_alloc) since it was opened. A training step in steady state should not change it
  // on a caching backend: the trainer records the difference across a step. The default
  // counts the calls of allocate() (through count_allocation()), right for a backend that
  // allocates on every call. Thread-safe.
  virtual int64_t device_allocations() const {
    return accounted_allocations_.load(std::memory_order_relaxed);
  }
  // Device memory held from the system: memory_in_use() plus what a cache keeps for reuse.
  virtual int64_t memory_reserved() const { return memory_in_use(); }
  // Gives cached device memory back to the system (between runs that use other sizes),
  // after waiting for queued work that may still use it; memory handed out stays.
  virtual void release_cached_memory() noexcept {}
  // The most the device's own waits for queued work (before giving memory back) may take:
  // work stuck behind a collective whose peer is gone must not hang them. A run sets its
  // collective timeout.
  virtual void set_wait_timeout(std::chrono::milliseconds timeout) { (void)timeout; }
  // Host memory that copies to and from this device can use asynchronously (pinned on
  // CUDA; ordinary aligned memory on CPU).
  virtual void* allocate_host(size_t bytes) = 0;
  virtual void deallocate_host(void* ptr) noexcept = 0;

  virtual std::unique_ptr<Stream> create_stream() = 0;
  // An event that can also time the work between two records (elapsed_ms_since).
  virtual std::unique_ptr<Event> create_event() = 0;
  // An event for ordering only (record, wait_on, synchronize): on CUDA it is created without
  // timing, which makes recording and waiting cheaper; its elapsed_ms_since throws. A
  // separate function rather than a flag of create_event so that every existing override
  // of create_event() stays one.
  virtual std::unique_ptr<Event> create_ordering_event() { return create_event(); }

  // The streams of a replica. The default stream is the compute stream: the work that
  // nobody sends elsewhere goes there. Host-to-device copies go to copy_stream() and
  // collectives to comm_stream(), so that they can overlap compute; the caller orders them
  // with events. On a backend that runs work inline (CPU) all three are the same stream.
  virtual Stream& default_stream() = 0;
  virtual Stream& copy_stream() { return default_stream(); }
  virtual Stream& comm_stream() { return default_stream(); }

  // Copies enqueued on `stream`. Host pointers are ordinary (or pinned) host memory.
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes, Stream& stream) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes, Stream& stream) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes, Stream& stream) = 0;
  virtual void fill_zero(void* dst, size_t bytes, Stream& stream) = 0;

  // Opens and closes a profiler's capture range (cudaProfilerStart/Stop, which
  // `nsys --capture-range=cudaProfilerApi` waits for); nothing on devices without one.
  virtual void start_profiler() {}
  virtual void stop_profiler() {}

  // Device memory handed out by allocate() and not yet given back: now, and the most at any
  // time since the device was opened (or since reset_peak_memory()). Thread-safe.
  int64_t memory_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  int64_t peak_memory() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak_memory() { peak_.store(memory_in_use(), std::memory_order_relaxed); }
  // A cap on memory_in_use() (0: none), to emulate a smaller device: an allocation beyond it
  // fails as running out of memory would.
  void set_memory_limit(int64_t bytes) { limit_ = bytes; }
  int64_t memory_limit() const { return limit_; }
  // Device memory this process holds outside allocate(): libraries' own buffers (NCCL's
  // channel and NVLS buffers, allocated lazily at the first collectives; cuBLAS's
  // workspaces). 0 where there are none.
  virtual int64_t memory_outside_allocator() const { return 0; }
  // Counts memory_outside_allocator(), as it is now, against the memory limit from now on
  // (call it once the libraries have allocated: after a first step). Returns the bytes.
  // Throws Error naming both shares when they pass the limit together.
  int64_t count_outside_memory();

 protected:
  Device() = default;
  // Implementations call these from allocate() (before allocating: it throws Error when the
  // limit would be passed) and deallocate() (or when the allocation itself failed).
  void count_allocation(size_t bytes) {
    accounted_allocations_.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = in_use_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                        static_cast<int64_t>(bytes);
    if (limit_ > 0 && now + outside_.load(std::memory_order_relaxed) > limit_) {
      in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
      accounted_allocations_.fetch_sub(1, std::memory_order_relaxed);
      throw_memory_limit(bytes, now - static_cast<int64_t>(bytes));
    }
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void count_deallocation(size_t bytes) {
    in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> accounted_allocations_{0};
  std::atomic<int64_t> outside_{0};  // counted by count_outside_memory()
  int64_t limit_ = 0;
  [[noreturn]] void throw_memory_limit(size_t bytes, int64_t in_use) const;
};

}  // namespace scalescope
