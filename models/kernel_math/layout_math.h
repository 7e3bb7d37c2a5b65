// Index arithmetic of our layout kernels: NHWC coordinates, the zero extension (and crop) of an
// NHWC image at its bottom and right, and batched transposes (NHWC <-> NCHW, OIHW <-> OHWI).
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

// std::min is a host function to nvcc (without --expt-relaxed-constexpr).
SS_HOST_DEVICE inline int64_t min_i64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// A half-open range [begin, end) of indices.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
};

struct Nhwc {
  int64_t n, h, w, c;
};

// The coordinates of flat index `i` of an NHWC tensor [?, height, width, channels], and back.
SS_HOST_DEVICE inline Nhwc nhwc_coords(int64_t i, int64_t height, int64_t width, int64_t channels) {
  return {i / (channels * width * height), (i / (channels * width)) % height,
          (i / channels) % width, i % channels};
}
SS_HOST_DEVICE inline int64_t nhwc_index(const Nhwc& p, int64_t height, int64_t width,
                                         int64_t channels) {
  return ((p.n * height + p.h) * width + p.w) * channels + p.c;
}

// An NHWC image [batch, height, width, channels] inside [batch, extended_height, extended_width,
// channels], in its top-left corner (extended_* >= the image's sizes).
struct ExtendShape {
  int64_t batch, height, width, channels, extended_height, extended_width;
};

// Where element `i` of the extended tensor comes from in the image, or -1 where it is a zero.
SS_HOST_DEVICE inline int64_t extend_source(const ExtendShape& s, int64_t i) {
  const Nhwc p = nhwc_coords(i, s.extended_height, s.extended_width, s.channels);
  if (p.h >= s.height || p.w >= s.width) return -1;
  return nhwc_index(p, s.height, s.width, s.channels);
}

// Where element `i` of the cropped image comes from in the extended tensor.
SS_HOST_DEVICE inline int64_t crop_source(const ExtendShape& s, int64_t i) {
  const Nhwc p = nhwc_coords(i, s.height, s.width, s.channels);
  return nhwc_index(p, s.extended_height, s.extended_width, s.channels);
}

// A batch of row-major [rows, cols] matrices and their transposes [cols, rows]: NHWC -> NCHW is
// (N, H·W, C), NCHW -> NHWC is (N, C, H·W), OIHW -> OHWI is (O, I, KH·KW), OHWI -> OIHW is
// (O, KH·KW, I).
struct TransposeShape {
  int64_t batches, rows, cols;
};

// Where element (b, r, c) of the input is, and where the transpose puts it.
SS_HOST_DEVICE inline int64_t transpose_in_index(const TransposeShape& s, int64_t b, int64_t r,
                                                 int64_t c) {
  return (b * s.rows + r) * s.cols + c;
}
SS_HOST_DEVICE inline int64_t transpose_out_index(const TransposeShape& s, int64_t b, int64_t r,
                                                  int64_t c) {
  return (b * s.cols + c) * s.rows + r;
}

}  // namespace scalescope::kernel_math
