// The per-sample math of the losses and of the accuracy count, as the CPU losses compute it:
// per-sample arithmetic in double (exp, log, the log-sum-exp), gradients rounded to float once,
// at the end.
//
// A softmax row may be shared by several threads (a warp on the GPU, its lanes taking the
// classes first, first + step, ...): softmax_ce_row takes the thread's share and a `reduce` that
// combines the threads' partial values (max of floats, sum of doubles). One thread with the
// whole row (SerialReduce) adds in class order, which is the CPU's order exactly.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/element_loop.h"
#include "models/kernel_math/host_device.h"
#include "models/kernel_math/row_reduce.h"
#include "models/layer_spec.h"

namespace scalescope::kernel_math {

// Keras's epsilon: BCE clips probabilities to [kBceEpsilon, 1 - kBceEpsilon].
constexpr double kBceEpsilon = 1e-7;

// The class index a sparse label names, or -1 when it is not one (negative, not an integer,
// >= classes, NaN or infinite).
SS_HOST_DEVICE inline int64_t class_index(float label, int64_t classes) {
  const bool valid = label >= 0.0f && label < static_cast<float>(classes) && floorf(label) == label;
  return valid ? static_cast<int64_t>(label) : -1;
}

// Softmax cross-entropy of one sample with logits z[classes]. `label` is the sample's class index
// (one float) or, when `one_hot`, its targets t[classes]:
//   sparse:  loss = lse(z) - z_y,            d/dz_j = softmax_j - [j == y]
//   one-hot: loss = sum_j t_j (lse - z_j),   d/dz_j = (sum t) softmax_j - t_j
// (targets need not sum to one: label smoothing, mixup). Writes g[j] = float(scale × d/dz_j) for
// this thread's classes unless g is null, and returns the loss (all threads of the row get it). A
// sparse label that is not a class index gives NaN loss and gradients.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Reduce>
SS_HOST_DEVICE double softmax_ce_row(const float* z, const float* label, bool one_hot,
                                     int64_t classes, double scale, float* g, RowShare share,
                                     const Reduce& reduce) {
  float m = -INFINITY;
  for (int64_t j = share.first; j < classes; j += share.step) m = fmaxf(m, z[j]);
  const double max_z = reduce.max(m);  // subtracted before exp: stable for any finite z
  double s = 0.0;
  for (int64_t j = share.first; j < classes; j += share.step) {
    s += exp(static_cast<double>(z[j]) - max_z);
  }
  const double lse = max_z + log(reduce.sum(s));

  double loss = 0.0;
  double t_sum = 0.0;
  int64_t y = -1;
  if (one_hot) {
    double part = 0.0;
    double part_t = 0.0;
    for (int64_t j = share.first; j < classes; j += share.step) {
      part += static_cast<double>(label[j]) * (lse - static_cast<double>(z[j]));
      part_t += label[j];
    }
    loss = reduce.sum(part);
    t_sum = reduce.sum(part_t);
  } else {
    y = class_index(label[0], classes);
    loss = y < 0 ? NAN : lse - static_cast<double>(z[y]);
  }
  if (g == nullptr) return loss;
  struct Read {
    float z, t;
  };
  // Reads kElementsAhead classes before writing any (element_loop.h's reason: g may be z).
  for_each_element(
      share.first, share.step, classes,
      [&](int64_t j) {
        return Read{z[j], one_hot ? label[j] : 0.0f};
      },
      [&](int64_t j, const Read& r) {
        const double p = exp(static_cast<double>(r.z) - lse);
        double d = 0.0;
        if (one_hot) {
          d = t_sum * p - static_cast<double>(r.t);
        } else {
          d = y < 0 ? NAN : p - (j == y ? 1.0 : 0.0);
        }
        g[j] = static_cast<float>(scale * d);
      });
  return loss;
}

// Binary cross-entropy of one sample on its probability q clipped to [eps, 1 - eps] (a NaN stays
// NaN): loss = -(y log p + (1 - y) log(1 - p)). The gradient (p - y) / (p (1 - p)) is taken at the
// clipped p even where the clip is active, as PyTorch's BCELoss: a sigmoid saturated on the wrong
// side still gets a bounded push back.
SS_HOST_DEVICE inline double bce_clip(float q) {
  const double v = q;
  return v < kBceEpsilon ? kBceEpsilon : (1.0 - kBceEpsilon < v ? 1.0 - kBceEpsilon : v);
}
SS_HOST_DEVICE inline double bce_loss(float q, float label) {
  const double p = bce_clip(q);
  const double y = label;
  return -(y * log(p) + (1.0 - y) * log1p(-p));
}
// float(scale × dloss/dq).
SS_HOST_DEVICE inline float bce_gradient(float q, float label, double scale) {
  const double p = bce_clip(q);
  return static_cast<float>(scale * (p - static_cast<double>(label)) / (p * (1.0 - p)));
}

// The index of the largest of v[0..n): the first that beats every earlier best, so ties go to the
// lowest index and a NaN never beats anything (a NaN first stays the best).
SS_HOST_DEVICE inline int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j) {
    if (v[j] > v[best]) best = j;
  }
  return best;
}

// Whether a sample with model output z[classes] matches its labels (one class index, the
// one-hot targets, or one probability): argmax against the label, and BCE thresholds both
// sides at 0.5. A sparse label that is not a class index is never a hit.
SS_HOST_DEVICE inline bool prediction_correct(LossKind kind, const float* z, const float* label,
                                              int64_t classes) {
  if (kind == LossKind::kSoftmaxCrossEntropy) {
    const int64_t y = class_index(label[0], classes);
    return y >= 0 && y == argmax(z, classes);
  }
  if (kind == LossKind::kSoftmaxCrossEntropyOneHot) {
    return argmax(z, classes) == argmax(label, classes);
  }
  return (z[0] >= 0.5f) == (label[0] >= 0.5f);  // kBinaryCrossEntropy
}

}  // namespace scalescope::kernel_math
