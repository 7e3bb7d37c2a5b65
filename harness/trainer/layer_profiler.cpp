#include "harness/trainer/layer_profiler.h"

#include "core/check.h"
#include "models/layer_spec.h"
#include "models/zoo.h"

namespace scalescope {

LayerProfiler::LayerProfiler(Device& device, int layers)
    : device_(device), slots_(static_cast<size_t>(layers) * 2) {}

LayerProfiler::Slot& LayerProfiler::slot(int layer, Pass pass) {
  const size_t i = static_cast<size_t>(layer) * 2 + (pass == Pass::kBackward ? 1 : 0);
  SS_CHECK(i < slots_.size(), "layer {} is not one of the {} profiled", layer, slots_.size() / 2);
  return slots_[i];
}

void LayerProfiler::begin(int layer, Pass pass, Stream& stream) {
  Slot& s = slot(layer, pass);
  SS_CHECK(!s.open, "layer {} began twice without ending", layer);
  if (s.used == s.spans.size()) s.spans.push_back({device_.create_event(), device_.create_event()});
  s.spans[s.used].start->record(stream);
  s.open = true;
}

void LayerProfiler::end(int layer, Pass pass, Stream& stream) {
  Slot& s = slot(layer, pass);
  SS_CHECK(s.open, "layer {} ended without beginning", layer);
  s.spans[s.used].end->record(stream);
  s.open = false;
  ++s.used;
}

void LayerProfiler::end_step(bool measured) {
  for (Slot& s : slots_) {
    SS_CHECK(!s.open, "a layer's pass did not end within its step");
    if (measured) {
      for (size_t i = 0; i < s.used; ++i) {
        s.total_ms += s.spans[i].end->elapsed_ms_since(*s.spans[i].start);
      }
    }
    s.used = 0;
  }
  if (measured) ++steps_;
}

std::vector<LayerTimeRecord> LayerProfiler::records(const Model& model, int64_t batch) const {
  const ModelDef& def = model.def();
  const std::vector<Shape> shapes = layer_shapes(def, model.input_shape());
  const double steps = steps_ > 0 ? static_cast<double>(steps_) : 1.0;
  std::vector<LayerTimeRecord> out;
  for (size_t layer = 0; layer < def.layers.size(); ++layer) {
    const Shape& in = layer_input_shape(def, shapes, static_cast<int>(layer));
    out.push_back({.layer = static_cast<int>(layer),
                   .layer_name = def.names.empty()
                                     ? describe(def.layers[layer])
                                     : def.names[layer] + " " + describe(def.layers[layer]),
                   .forward_ms = slots_[layer * 2].total_ms / steps,
                   .backward_ms = slots_[layer * 2 + 1].total_ms / steps,
                   .forward_flops = forward_flops(def.layers[layer], in) * batch,
                   .forward_bytes = forward_bytes(def.layers[layer], in, batch)});
  }
  return out;
}

}  // namespace scalescope
