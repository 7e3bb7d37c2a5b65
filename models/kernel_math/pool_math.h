// Max pooling and global average pooling over NHWC images, one output or input element at a
// time, with the CPU kernels' rules:
//
// - Max pooling's padding is PyTorch's: `pad` implicit -inf on every side, so a window is its
//   part inside the image and padded positions never win (nor receive a gradient).
// - A window's maximum is its first element (row-major) that compares greater than all before
//   it, except that NaN wins: the window's last NaN, bits included.
// - Backward gives a window's gradient to the first element of the window whose bits equal the
//   window's output (so ties send it to one element only), and an input element adds the
//   gradients of the windows that chose it in the CPU's order: output rows, then columns,
//   ascending, starting from +0. Elements no window chose get +0. Forward records each
//   window's choice (its offset in the window, 16 bits), so that backward reads one number per
//   window instead of finding the window's maximum again: on an H200 the search made ResNet-50's
//   stem pool's backward 2.2 ms, seven times its forward.
// - The global average is the float sum over the pixels in order, divided by their count; its
//   gradient is dy divided by the count.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"
#include "models/kernel_math/int_divider.h"
#include "models/kernel_math/layout_math.h"

namespace scalescope::kernel_math {

struct PoolShape {
  int64_t batch, in_h, in_w, channels, out_h, out_w, pool, stride;
  int64_t pad = 0;  // on every side; at most pool / 2, so every window holds a pixel
};

// The windows o (< out) along one axis that contain input position i of an axis padded by
// `pad`: those with o·stride - pad <= i < o·stride - pad + pool. `by_stride(v)` is v / stride
// (an IntDivider or a PlainDivider).
template <class Divider>
SS_HOST_DEVICE inline IndexRange pool_windows_covering(int64_t i, int64_t pool,
                                                       const Divider& by_stride, int64_t out,
                                                       int64_t pad = 0) {
  const int64_t p = i + pad;  // the position in the padded axis, where windows start at o·stride
  const int64_t begin = p < pool ? 0 : by_stride(p - pool) + 1;
  return {begin, min_i64(out, by_stride(p) + 1)};
}

// The part of window (oh, ow) inside the image: rows [h0, h1), columns [w0, w1). Without
// padding, the whole window.
struct PoolWindow {
  int64_t h0, h1, w0, w1;
};
SS_HOST_DEVICE inline PoolWindow pool_window(const PoolShape& s, int64_t oh, int64_t ow) {
  const int64_t h = oh * s.stride - s.pad;
  const int64_t w = ow * s.stride - s.pad;
  return {h < 0 ? 0 : h, min_i64(h + s.pool, s.in_h), w < 0 ? 0 : w, min_i64(w + s.pool, s.in_w)};
}

SS_HOST_DEVICE inline float max_pool_window_max(const PoolShape& s, const float* x, int64_t n,
                                                int64_t oh, int64_t ow, int64_t c) {
  const PoolWindow win = pool_window(s, oh, ow);
  float best = x[nhwc_index({n, win.h0, win.w0, c}, s.in_h, s.in_w, s.channels)];
  for (int64_t h = win.h0; h < win.h1; ++h) {
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const float v = x[nhwc_index({n, h, w, c}, s.in_h, s.in_w, s.channels)];
      best = (v > best || v != v) ? v : best;
    }
  }
  return best;
}

// The input position (h, w) of window (oh, ow) that receives its gradient: the first, row-major,
// whose bits equal `maximum`; (-1, -1) if none does.
struct Position {
  int64_t h, w;
};
SS_HOST_DEVICE inline Position max_pool_window_argmax(const PoolShape& s, const float* x, int64_t n,
                                                      int64_t oh, int64_t ow, int64_t c,
                                                      float maximum) {
  const uint32_t target = float_bits(maximum);
  const PoolWindow win = pool_window(s, oh, ow);
  for (int64_t h = win.h0; h < win.h1; ++h) {
    for (int64_t w = win.w0; w < win.w1; ++w) {
      if (float_bits(x[nhwc_index({n, h, w, c}, s.in_h, s.in_w, s.channels)]) == target) {
        return {h, w};
      }
    }
  }
  return {-1, -1};
}

// The largest pool whose offsets max_pool_window_choice can record (pool² < kNoChoice).
inline constexpr int64_t kMaxRecordedPool = 255;
// A window none of whose elements has its maximum's bits (never for the maximum of the window).
inline constexpr uint16_t kNoChoice = 0xffff;

// The offset of input position (h, w) in window (oh, ow): (h - top)·pool + (w - left), top
// and left the window's corner in the padded image. In [0, pool²) for positions in the window.
SS_HOST_DEVICE inline int64_t pool_window_offset(const PoolShape& s, int64_t oh, int64_t ow,
                                                 int64_t h, int64_t w) {
  return (h - (oh * s.stride - s.pad)) * s.pool + (w - (ow * s.stride - s.pad));
}

// What forward records of window (oh, ow) for backward: the offset of the element that
// receives its gradient (max_pool_window_argmax of `maximum`, the window's output), or
// kNoChoice. REQUIRES: s.pool <= kMaxRecordedPool.
SS_HOST_DEVICE inline uint16_t max_pool_window_choice(const PoolShape& s, const float* x, int64_t n,
                                                      int64_t oh, int64_t ow, int64_t c,
                                                      float maximum) {
  const Position at = max_pool_window_argmax(s, x, n, oh, ow, c, maximum);
  if (at.h < 0) return kNoChoice;
  return static_cast<uint16_t>(pool_window_offset(s, oh, ow, at.h, at.w));
}

// The divisions of max pooling's index arithmetic (the output's indices forward, the input's
// and the windows covering an input position backward). IntDivider where every index is below
// IntDivider::kLimit, PlainDivider otherwise.
template <class Divider>
using PoolDividers = StridedDividers<Divider>;
template <class Divider>
inline PoolDividers<Divider> pool_dividers(const PoolShape& s) {
  return {nhwc_dividers<Divider>(s.in_h, s.in_w, s.channels),
          nhwc_dividers<Divider>(s.out_h, s.out_w, s.channels), Divider{s.stride}};
}

// y at flat output index i (NHWC), max_pool_window_max of its window, and where `choose` the
// window's max_pool_window_choice (else kNoChoice).
struct PoolOutput {
  float maximum;
  uint16_t choice;
};
// The windows of at most kSmallPool² elements, read all at once: every load of the window in
// flight together, and the maximum and the choice then found in registers in the loops' order,
// so with the loops' bits. A GPU thread of the loops waited for each load in turn (their bounds
// are the window's, known only at run time), the ImageNet ResNets' 3×3 stem pool among them.
inline constexpr int64_t kSmallPool = 3;
SS_HOST_DEVICE inline PoolOutput max_pool_small_window(const PoolShape& s, const float* x,
                                                       const Nhwc& o, bool choose) {
  const PoolWindow win = pool_window(s, o.h, o.w);
  float v[kSmallPool][kSmallPool];
  bool in[kSmallPool][kSmallPool];
  SS_UNROLL
  for (int a = 0; a < kSmallPool; ++a) {
    SS_UNROLL
    for (int b = 0; b < kSmallPool; ++b) {
      const int64_t h = win.h0 + a, w = win.w0 + b;
      in[a][b] = h < win.h1 && w < win.w1;
      v[a][b] = in[a][b] ? x[nhwc_index({o.n, h, w, o.c}, s.in_h, s.in_w, s.channels)] : 0.0f;
    }
  }
  float best = v[0][0];  // a window holds its corner (pad <= pool / 2)
  SS_UNROLL
  for (int a = 0; a < kSmallPool; ++a) {
    SS_UNROLL
    for (int b = 0; b < kSmallPool; ++b) {
      if (in[a][b]) best = (v[a][b] > best || v[a][b] != v[a][b]) ? v[a][b] : best;
    }
  }
  uint16_t choice = kNoChoice;
  if (choose) {
    const uint32_t target = float_bits(best);
    SS_UNROLL
    for (int a = kSmallPool - 1; a >= 0; --a) {  // backwards: the first equal one is kept
      SS_UNROLL
      for (int b = kSmallPool - 1; b >= 0; --b) {
        if (in[a][b] && float_bits(v[a][b]) == target) {
          choice = static_cast<uint16_t>(pool_window_offset(s, o.h, o.w, win.h0 + a, win.w0 + b));
        }
      }
    }
  }
  return {best, choice};
}

// y at flat output index i (NHWC) through max_pool_small_window (REQUIRES: s.pool <=
// kSmallPool) or the loops; max_pool_output takes whichever the shape allows. The GPU kernels
// choose once per launch (`kSmall`), so that a thread's elements keep their loads together.
template <bool kSmall, class Divider>
SS_HOST_DEVICE inline PoolOutput max_pool_output_by(const PoolShape& s,
                                                    const PoolDividers<Divider>& d, const float* x,
                                                    int64_t i, bool choose) {
  const Nhwc o = nhwc_coords(i, d.out, s.out_h, s.out_w, s.channels);
  if constexpr (kSmall) {
    return max_pool_small_window(s, x, o, choose);
  } else {
    const float maximum = max_pool_window_max(s, x, o.n, o.h, o.w, o.c);
    return {maximum,
            choose ? max_pool_window_choice(s, x, o.n, o.h, o.w, o.c, maximum) : kNoChoice};
  }
}
template <class Divider>
SS_HOST_DEVICE inline PoolOutput max_pool_output(const PoolShape& s, const PoolDividers<Divider>& d,
                                                 const float* x, int64_t i, bool choose) {
  return s.pool <= kSmallPool ? max_pool_output_by<true>(s, d, x, i, choose)
                              : max_pool_output_by<false>(s, d, x, i, choose);
}

// dx at flat input index i (NHWC), gathered from the windows that contain it and chose it:
// `choices` holds max_pool_window_choice of every output of the forward, and an input adds
// the gradients of the windows that chose it in the loops' order.
//
// Where no position lies in more than two windows along an axis (pool <= 2·stride: the stem
// pool's 3 and 2, and 2 and 2), max_pool_candidates reads the four candidate windows' choices
// and gradients, all at once, and max_pool_chosen_sum adds the chosen ones in the loops' order:
// a GPU thread of the loops waited for a choice and then a gradient, window after window. The
// GPU kernel reads its elements' candidates before it sums any (for_each_element's load and
// store) and chooses the way once per launch.
// Input element i's coordinates and the ranges of output rows and columns whose windows hold it.
struct CoveringWindows {
  Nhwc at;
  IndexRange rows, cols;
};
template <class Divider>
SS_HOST_DEVICE inline CoveringWindows covering_windows(const PoolShape& s,
                                                       const PoolDividers<Divider>& d, int64_t i) {
  const Nhwc p = nhwc_coords(i, d.in, s.in_h, s.in_w, s.channels);
  return {p, pool_windows_covering(p.h, s.pool, d.stride, s.out_h, s.pad),
          pool_windows_covering(p.w, s.pool, d.stride, s.out_w, s.pad)};
}

struct CandidateWindows {
  uint16_t choice[4];  // row-major over the 2×2 candidates
  uint16_t want[4];    // the input's offset in each window; kNotCovering where it is not in it
  float gradient[4];
};
// Never a choice: offsets are below kMaxRecordedPool² and a window without one has kNoChoice.
inline constexpr uint16_t kNotCovering = 0xfffe;

// REQUIRES: s.pool <= 2·s.stride (else windows past the first two an axis are left out).
template <class Divider>
SS_HOST_DEVICE inline CandidateWindows max_pool_candidates(const PoolShape& s,
                                                           const PoolDividers<Divider>& d,
                                                           const uint16_t* choices, const float* dy,
                                                           int64_t i) {
  const CoveringWindows cover = covering_windows(s, d, i);
  const Nhwc& p = cover.at;
  const IndexRange &rows = cover.rows, &cols = cover.cols;
  CandidateWindows w;
  SS_UNROLL
  for (int k = 0; k < 4; ++k) {
    const int64_t oh = rows.begin + k / 2, ow = cols.begin + k % 2;
    w.want[k] = oh < rows.end && ow < cols.end
                    ? static_cast<uint16_t>(pool_window_offset(s, oh, ow, p.h, p.w))
                    : kNotCovering;
    // A candidate past the output's last row or column reads that one instead: a valid
    // address, its values unused.
    const int64_t o = nhwc_index({p.n, min_i64(oh, s.out_h - 1), min_i64(ow, s.out_w - 1), p.c},
                                 s.out_h, s.out_w, s.channels);
    w.choice[k] = choices[o];
    w.gradient[k] = dy[o];
  }
  return w;
}

SS_HOST_DEVICE inline float max_pool_chosen_sum(const CandidateWindows& w) {
  float grad = 0.0f;
  SS_UNROLL
  for (int k = 0; k < 4; ++k) {
    if (w.choice[k] == w.want[k]) grad += w.gradient[k];
  }
  return grad;
}

// The loops: every shape.
template <class Divider>
SS_HOST_DEVICE inline float max_pool_input_grad_loops(const PoolShape& s,
                                                      const PoolDividers<Divider>& d,
                                                      const uint16_t* choices, const float* dy,
                                                      int64_t i) {
  const CoveringWindows cover = covering_windows(s, d, i);
  const Nhwc& p = cover.at;
  const IndexRange &rows = cover.rows, &cols = cover.cols;
  float grad = 0.0f;
  for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
    for (int64_t ow = cols.begin; ow < cols.end; ++ow) {
      const int64_t o = nhwc_index({p.n, oh, ow, p.c}, s.out_h, s.out_w, s.channels);
      if (choices[o] == pool_window_offset(s, oh, ow, p.h, p.w)) grad += dy[o];
    }
  }
  return grad;
}

template <class Divider>
SS_HOST_DEVICE inline float max_pool_input_grad(const PoolShape& s, const PoolDividers<Divider>& d,
                                                const uint16_t* choices, const float* dy,
                                                int64_t i) {
  return s.pool <= 2 * s.stride ? max_pool_chosen_sum(max_pool_candidates(s, d, choices, dy, i))
                                : max_pool_input_grad_loops(s, d, choices, dy, i);
}

// The mean of channel c of sample n of x [batch, pixels, channels].
SS_HOST_DEVICE inline float global_avg_pool_mean(const float* x, int64_t pixels, int64_t channels,
                                                 int64_t n, int64_t c) {
  const float* sample = x + n * pixels * channels;
  float sum = 0.0f;
  for (int64_t p = 0; p < pixels; ++p) sum += sample[p * channels + c];
  return sum / static_cast<float>(pixels);
}

// dx at flat index i of [batch, pixels, channels], from dy [batch, channels]; by_channels and
// by_pixels divide by the channels and the pixels (int_divider.h).
template <class Divider>
SS_HOST_DEVICE inline float global_avg_pool_grad(const float* dy, int64_t pixels, int64_t channels,
                                                 const Divider& by_channels,
                                                 const Divider& by_pixels, int64_t i) {
  const int64_t pixel = by_channels(i);  // n·pixels + p
  const int64_t c = i - pixel * channels;
  return dy[by_pixels(pixel) * channels + c] / static_cast<float>(pixels);
}

}  // namespace scalescope::kernel_math
