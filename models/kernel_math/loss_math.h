// The per-sample math of the losses and of the accuracy count, as the CPU losses compute it:
// per-sample arithmetic in double (exp as vector_exp_f64, log, the log-sum-exp), gradients
// rounded to float once, at the end.
//
// A softmax row may be shared by several threads (a warp on the GPU, its lanes taking the
// classes first, first + step, ...): softmax_ce_row takes the thread's share and a `reduce` that
// combines the threads' partial values (max of floats, sum of doubles). One thread with the
// whole row (SerialReduce) adds in lane_sum's order, which is the CPU's order exactly.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/element_loop.h"
#include "models/kernel_math/exp_math.h"
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

// A thread's share of a row in kRowLanes interleaved parts: `part[l]` takes terms l,
// l + kRowLanes, ... of the share, and the parts are combined in lane order. One thread with a
// whole row (the CPU's) then runs a vector of kRowLanes doubles at a time, the order of every
// addition fixed by this code: each vector clone and the baseline give the same bits.
inline constexpr int kRowLanes = 8;

template <class Term>
SS_HOST_DEVICE double lane_sum(RowShare share, int64_t count, const Term& term) {
  double part[kRowLanes] = {};
  int64_t j = share.first;
  for (; j + (kRowLanes - 1) * share.step < count; j += kRowLanes * share.step) {
    SS_UNROLL
    for (int l = 0; l < kRowLanes; ++l) part[l] += term(j + l * share.step);
  }
  // The tail's lanes by constant index: a run-time one put part[] in a GPU thread's local
  // memory (a 64-byte stack frame of the loss kernel).
  SS_UNROLL
  for (int l = 0; l < kRowLanes; ++l) {
    if (j + l * share.step < count) part[l] += term(j + l * share.step);
  }
  double sum = part[0];
  SS_UNROLL
  for (int l = 1; l < kRowLanes; ++l) sum += part[l];
  return sum;
}

// The larger of m and v, v skipped where NaN (fmaxf's rule for m never NaN, without its call:
// x86 has no instruction for fmaxf, but this is maxps).
SS_HOST_DEVICE inline float max_of(float m, float v) {
  return v > m ? v : m;
}

// The largest of a thread's share of z (NaN skipped): exact, so any order gives it.
SS_HOST_DEVICE inline float lane_max(const float* z, RowShare share, int64_t count) {
  float part[kRowLanes];
  SS_UNROLL
  for (int l = 0; l < kRowLanes; ++l) part[l] = -INFINITY;
  int64_t j = share.first;
  for (; j + (kRowLanes - 1) * share.step < count; j += kRowLanes * share.step) {
    SS_UNROLL
    for (int l = 0; l < kRowLanes; ++l) part[l] = max_of(part[l], z[j + l * share.step]);
  }
  // The tail as lane_sum's.
  SS_UNROLL
  for (int l = 0; l < kRowLanes; ++l) {
    if (j + l * share.step < count) part[l] = max_of(part[l], z[j + l * share.step]);
  }
  float m = part[0];
  SS_UNROLL
  for (int l = 1; l < kRowLanes; ++l) m = max_of(m, part[l]);
  return m;
}

// What a softmax row's gradient needs beside its logit: g_j = float(scale × d/dz_j) with
//   sparse:  d/dz_j = softmax_j - [j == y]   (NaN for every j where y < 0: not a class index)
//   one-hot: d/dz_j = t_sum·softmax_j - t_j
struct SoftmaxGradient {
  double lse = 0.0;
  double scale = 1.0;
  double t_sum = 0.0;
  int64_t y = -1;
  bool one_hot = false;

  SS_HOST_DEVICE float operator()(int64_t j, float z, float t) const {
    const double p = vector_exp_f64(static_cast<double>(z) - lse);
    double d = 0.0;
    if (one_hot) {
      d = t_sum * p - static_cast<double>(t);
    } else {
      d = y < 0 ? NAN : p - (j == y ? 1.0 : 0.0);
    }
    return static_cast<float>(scale * d);
  }
};

// Softmax cross-entropy of one sample with logits z[classes]. `label` is the sample's class index
// (one float) or, when `one_hot`, its targets t[classes]:
//   sparse:  loss = lse(z) - z_y
//   one-hot: loss = sum_j t_j (lse - z_j)
// (targets need not sum to one: label smoothing, mixup). Sets `grad` to what the gradient takes
// (SoftmaxGradient) and returns the loss (all threads of the row get both). A sparse label that
// is not a class index gives NaN loss and gradients.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Reduce>
SS_HOST_DEVICE double softmax_ce_loss(const float* z, const float* label, bool one_hot,
                                      int64_t classes, double scale, RowShare share,
                                      const Reduce& reduce, SoftmaxGradient& grad) {
  // The largest logit is subtracted before exp: stable for any finite z.
  const double max_z = reduce.max(lane_max(z, share, classes));
  const double s = lane_sum(
      share, classes, [&](int64_t j) { return vector_exp_f64(static_cast<double>(z[j]) - max_z); });
  grad = SoftmaxGradient{max_z + log(reduce.sum(s)), scale, 0.0, -1, one_hot};
  if (!one_hot) {
    grad.y = class_index(label[0], classes);
    // The label's logit comes through the row's reduction from the thread whose share holds it
    // (the others add an exact 0): no thread reads a column of another's, which that one may
    // overwrite with its gradient (g may be z).
    const bool holds_y = grad.y >= share.first && (grad.y - share.first) % share.step == 0;
    const double z_y = reduce.sum(holds_y ? static_cast<double>(z[grad.y]) : 0.0);
    return grad.y < 0 ? NAN : grad.lse - z_y;
  }
  const double lse = grad.lse;
  const double loss = lane_sum(share, classes, [&](int64_t j) {
    return static_cast<double>(label[j]) * (lse - static_cast<double>(z[j]));
  });
  grad.t_sum = reduce.sum(
      lane_sum(share, classes, [&](int64_t j) { return static_cast<double>(label[j]); }));
  return reduce.sum(loss);
}

// The loss, and unless g is null g[j] for this thread's classes, through for_each_element (the
// GPU's loop: reads kElementsAhead classes before writing any, as g may be z).
template <class Reduce>
SS_HOST_DEVICE double softmax_ce_row(const float* z, const float* label, bool one_hot,
                                     int64_t classes, double scale, float* g, RowShare share,
                                     const Reduce& reduce) {
  SoftmaxGradient grad;
  const double loss = softmax_ce_loss(z, label, one_hot, classes, scale, share, reduce, grad);
  if (g == nullptr) return loss;
  struct Read {
    float z, t;
  };
  for_each_element(
      share.first, share.step, classes,
      [&](int64_t j) {
        return Read{z[j], one_hot ? label[j] : 0.0f};
      },
      [&](int64_t j, const Read& r) { g[j] = grad(j, r.z, r.t); });
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
