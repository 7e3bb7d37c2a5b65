// The phases of a replica's step, timed where the work runs: an event recorded on the
// compute stream at every phase boundary, read once the step has ended (the clock on CPU
// devices, CUDA events on GPUs; never a host clock around an asynchronous launch). A phase's
// time is the distance from the previous boundary, so the exposed phases add up to the
// step's time by construction; phases that repeat (forward and backward, once per
// micro-batch) add up.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/nvtx.h"
#include "harness/trainer/clock_anchor.h"
#include "harness/trainer/reducer.h"
#include "reports/phases.h"

namespace scalescope {

class StepTimer {
 public:
  // At most `max_phases` phase ends per step. `clock` puts the steps' start times on the
  // run's host clock. REQUIRES: `stream` belongs to `device`, as does `clock`'s.
  StepTimer(Device& device, Stream& stream, int max_phases, const ClockAnchor& clock);

  // The phase ends of a step of `micro_batches` micro-batches with `sync_points` sync points
  // in all (where split() inserts a phase), from the phase table's timer column.
  static int ends_per_step(int micro_batches, int64_t sync_points);

  // While in scope, the work enqueued on the stream belongs to the phase, and an NVTX range
  // of the phase is open on the calling thread. Cannot be copied or heap-allocated.
  class Scope {
   public:
    Scope(StepTimer& timer, Phase phase, int64_t step)
        : timer_(timer), phase_(phase), range_(phase, step) {}
    // Records the phase's end (not while an exception unwinds the step: it is lost anyway).
    ~Scope() {
      if (std::uncaught_exceptions() == 0) timer_.end_phase(phase_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    void* operator new(std::size_t) = delete;

   private:
    StepTimer& timer_;
    Phase phase_;
    nvtx::Range range_;
  };

  // Inside phase `current`: ends its part so far, runs `work` as phase `inserted` (work
  // enqueued on the stream, or the host waiting for it), and lets `current` go on after it
  // (it ends where its scope does). Throws Error when the step has no room for two more ends.
  template <class Work>
  void split(Phase current, Phase inserted, int64_t step, Work&& work) {
    check_room(2);
    end_phase(current);
    {
      const nvtx::Range range(inserted, step);
      std::forward<Work>(work)();
    }
    end_phase(inserted);
  }

  // Starts a step: its first phase begins with the work enqueued from now.
  void start();
  // The step's batch was copied between these events, on another stream of the device (the
  // copy may have begun during the step before): the copy's total time. Null: no copy.
  // REQUIRES: both stay recorded where they are until read() (the stager's slots do).
  void copied_between(const Event* start, const Event* end) {
    copy_start_ = start;
    copy_end_ = end;
  }
  // Throws Error when the step already has its most phases.
  [[nodiscard]] Scope phase(Phase phase, int64_t step) {
    check_room();
    return Scope(*this, phase, step);
  }
  // The step's end, after its last work (the read-back that ends it). Throws what recording
  // a phase's end failed with, if anything did.
  void end();
  // The step's phases; the total all-reduce time and the buckets come from `reduced`.
  // REQUIRES: the step's end has been reached (the caller synchronised).
  PhaseTimes read(const ReduceTimes& reduced) const;
  // When the step's end was reached, on the run's host clock (ms since the run began).
  // REQUIRES: the step's end has been reached.
  double end_host_ms() const { return clock_.host_ms(*end_); }

 private:
  void check_room(size_t ends = 1) const;
  // Never throws (a scope's destructor calls it): a failure waits for end().
  void end_phase(Phase phase) noexcept;

  Stream& stream_;
  const ClockAnchor& clock_;
  std::unique_ptr<Event> start_;
  std::unique_ptr<Event> end_;
  const Event* copy_start_ = nullptr;
  const Event* copy_end_ = nullptr;
  struct Mark {
    Phase phase = Phase::kInput;
    std::unique_ptr<Event> event;
  };
  std::vector<Mark> marks_;   // created once, reused every step
  size_t used_ = 0;           // marks recorded in this step
  std::exception_ptr error_;  // from recording a phase's end, thrown by end()
};

}  // namespace scalescope
