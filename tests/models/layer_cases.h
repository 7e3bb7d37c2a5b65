// The layer cases every backend's layer kernels are checked on (layers_test.cpp against the
// float64 reference; the CUDA tests against the CPU kernels): a spec, a batch shape and a
// thread count each.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/shape.h"
#include "models/layer_spec.h"

namespace scalescope {

struct LayerCase {
  std::string name;
  LayerSpec spec;
  Shape in;  // batch included; images NHWC
  int threads = 1;
};

inline std::ostream& operator<<(std::ostream& os, const LayerCase& c) {
  return os << c.name << ": " << describe(c.spec) << " on " << c.in.to_string();
}

std::vector<LayerCase> layer_cases();

}  // namespace scalescope
