// --profile-layers: times each layer's forward and backward on the device, with a pair of
// events recorded on the compute stream around the layer's work (Model's LayerProbe) and read
// once the step has ended, as the step's phases are (step_timer.h). Micro-batches add up.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "models/model.h"
#include "reports/run_report.h"

namespace scalescope {

class LayerProfiler final : public LayerProbe {
 public:
  LayerProfiler(Device& device, int layers);

  void begin(int layer, Pass pass, Stream& stream) override;
  void end(int layer, Pass pass, Stream& stream) override;
  // REQUIRES: the step's work has finished on the device. Adds its layers' times when
  // `measured`, and makes the events ready for the next step either way.
  void end_step(bool measured);

  // Per layer of `model`, the mean times over the measured steps and the forward FLOPs of a
  // batch of `batch` samples.
  std::vector<LayerTimeRecord> records(const Model& model, int64_t batch) const;

 private:
  struct Span {
    std::unique_ptr<Event> start, end;
  };
  struct Slot {
    std::vector<Span> spans;  // one per micro-batch, reused from step to step
    size_t used = 0;          // spans begun this step
    bool open = false;        // the last one begun and not yet ended
    double total_ms = 0.0;
  };
  Slot& slot(int layer, Pass pass);

  Device& device_;
  std::vector<Slot> slots_;  // [layer][pass]
  int64_t steps_ = 0;
};

}  // namespace scalescope
