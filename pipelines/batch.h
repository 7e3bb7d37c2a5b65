// What the input pipeline hands to a replica: a batch of samples and their labels.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace scalescope {

// How labels are encoded, as the model's loss expects them. Pipelines know nothing of
// models; the harness maps a loss to one of these.
enum class LabelFormat {
  kClassIndex,  // one float per sample holding the class index
  kOneHot,      // `classes` floats per sample
  kBinary,      // one float per sample, 0 or 1
};

struct LabelSpec {
  LabelFormat format = LabelFormat::kClassIndex;
  int64_t classes = 10;  // 2 for kBinary
  // Class indices per sample: a sequence's next tokens (kClassIndex only), else 1.
  int64_t positions = 1;
  // Floats per sample.
  int64_t width() const { return format == LabelFormat::kOneHot ? classes : positions; }
};

// A batch in host memory. Images are NHWC.
struct HostBatch {
  int64_t size = 0;
  Shape sample_shape;
  std::vector<float> inputs;  // size × sample_shape.numel()
  std::vector<float> labels;  // size × label width
};

}  // namespace scalescope
