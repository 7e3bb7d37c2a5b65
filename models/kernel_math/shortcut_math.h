// The option-A shortcut of He et al.'s CIFAR ResNets (PadShortcutSpec) over NHWC images, one
// element at a time: output pixel (oh, ow) is input pixel (oh·stride, ow·stride), and output
// channel c is input channel c - before, where `before` zero channels come first and as many
// after. Backward is the transpose: an input element whose pixel is on the stride grid gets
// its output's gradient, every other input element +0.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

struct ShortcutShape {
  int64_t in_h, in_w, in_c, out_h, out_w, out_c, stride;
  SS_HOST_DEVICE int64_t before() const { return (out_c - in_c) / 2; }
};

// The input index an output element copies, or -1 for the zero channels.
SS_HOST_DEVICE inline int64_t shortcut_source(const ShortcutShape& s, int64_t out_index) {
  const int64_t c = out_index % s.out_c;
  const int64_t pixel = out_index / s.out_c;
  const int64_t ow = pixel % s.out_w;
  const int64_t oh = pixel / s.out_w % s.out_h;
  const int64_t n = pixel / (s.out_w * s.out_h);
  const int64_t ic = c - s.before();
  if (ic < 0 || ic >= s.in_c) return -1;
  return ((n * s.in_h + oh * s.stride) * s.in_w + ow * s.stride) * s.in_c + ic;
}

// The output index whose gradient an input element takes, or -1 when none reads it.
SS_HOST_DEVICE inline int64_t shortcut_reader(const ShortcutShape& s, int64_t in_index) {
  const int64_t c = in_index % s.in_c;
  const int64_t pixel = in_index / s.in_c;
  const int64_t iw = pixel % s.in_w;
  const int64_t ih = pixel / s.in_w % s.in_h;
  const int64_t n = pixel / (s.in_w * s.in_h);
  if (ih % s.stride != 0 || iw % s.stride != 0) return -1;
  return ((n * s.out_h + ih / s.stride) * s.out_w + iw / s.stride) * s.out_c + c + s.before();
}

}  // namespace scalescope::kernel_math
