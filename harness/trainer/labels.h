// How a model's loss wants its labels, in the pipeline's terms.
#pragma once

#include "models/layer_spec.h"
#include "pipelines/batch.h"

namespace scalescope {

// `output` is the model's output shape for one sample ([classes], or [1] for binary).
inline LabelSpec label_spec_for(LossKind loss, const Shape& output) {
  switch (loss) {
    case LossKind::kSoftmaxCrossEntropy:
      return LabelSpec{LabelFormat::kClassIndex, output[0]};
    case LossKind::kSoftmaxCrossEntropyOneHot:
      return LabelSpec{LabelFormat::kOneHot, output[0]};
    case LossKind::kBinaryCrossEntropy:
      return LabelSpec{LabelFormat::kBinary, 2};
  }
  return LabelSpec{};
}

}  // namespace scalescope
