// The option-A shortcut of He et al.'s CIFAR ResNets (PadShortcutSpec) over NHWC images, one
// element at a time: output pixel (oh, ow) is input pixel (oh·stride, ow·stride), and output
// channel c is input channel c - before, where `before` zero channels come first and as many
// after. Backward is the transpose: an input element whose pixel is on the stride grid gets
// its output's gradient, every other input element +0.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"
#include "models/kernel_math/layout_math.h"

namespace scalescope::kernel_math {

struct ShortcutShape {
  int64_t in_h, in_w, in_c, out_h, out_w, out_c, stride;
  SS_HOST_DEVICE int64_t before() const { return (out_c - in_c) / 2; }
};

// The divisions of the shortcut's index arithmetic, each of kind `Divider` (int_divider.h).
template <class Divider>
inline StridedDividers<Divider> shortcut_dividers(const ShortcutShape& s) {
  return {nhwc_dividers<Divider>(s.in_h, s.in_w, s.in_c),
          nhwc_dividers<Divider>(s.out_h, s.out_w, s.out_c), Divider{s.stride}};
}

// The input index an output element copies, or -1 for the zero channels.
template <class Divider>
SS_HOST_DEVICE inline int64_t shortcut_source(const ShortcutShape& s,
                                              const StridedDividers<Divider>& d,
                                              int64_t out_index) {
  const Nhwc o = nhwc_coords(out_index, d.out, s.out_h, s.out_w, s.out_c);
  const int64_t ic = o.c - s.before();
  if (ic < 0 || ic >= s.in_c) return -1;
  return nhwc_index({o.n, o.h * s.stride, o.w * s.stride, ic}, s.in_h, s.in_w, s.in_c);
}

// The output index whose gradient an input element takes, or -1 when none reads it.
template <class Divider>
SS_HOST_DEVICE inline int64_t shortcut_reader(const ShortcutShape& s,
                                              const StridedDividers<Divider>& d, int64_t in_index) {
  const Nhwc p = nhwc_coords(in_index, d.in, s.in_h, s.in_w, s.in_c);
  const int64_t oh = d.stride(p.h);
  const int64_t ow = d.stride(p.w);
  if (oh * s.stride != p.h || ow * s.stride != p.w) return -1;
  return nhwc_index({p.n, oh, ow, p.c + s.before()}, s.out_h, s.out_w, s.out_c);
}

}  // namespace scalescope::kernel_math
