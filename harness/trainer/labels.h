// How a model's loss wants its labels, in the pipeline's terms.
#pragma once

#include "models/layer_spec.h"
#include "pipelines/batch.h"

namespace scalescope {

// `output` is the model's output shape for one sample ([classes], [positions, classes] for a
// sequence's logits, or [1] for binary).
inline LabelSpec label_spec_for(LossKind loss, const Shape& output) {
  switch (loss) {
    case LossKind::kSoftmaxCrossEntropy:
      if (output.rank() == 2) return LabelSpec{LabelFormat::kClassIndex, output[1], output[0]};
      return LabelSpec{LabelFormat::kClassIndex, output[0], 1};
    case LossKind::kSoftmaxCrossEntropyOneHot:
      return LabelSpec{LabelFormat::kOneHot, output[0], 1};
    case LossKind::kBinaryCrossEntropy:
      return LabelSpec{LabelFormat::kBinary, 2, 1};
  }
  return LabelSpec{};
}

}  // namespace scalescope
