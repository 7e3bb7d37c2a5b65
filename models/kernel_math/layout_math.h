// Index arithmetic of our layout kernels: NHWC coordinates, the zero extension (and crop) of an
// NHWC image at its bottom and right, and batched transposes (NHWC <-> NCHW, OIHW <-> OHWI).
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"
#include "models/kernel_math/int_divider.h"

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

// The divisions that split a flat index of an NHWC tensor [?, height, width, channels]: by the
// channels, the width and the height, each of kind `Divider` (int_divider.h: the GPU kernels
// take IntDivider where the tensor is below its limit).
template <class Divider>
struct NhwcDividers {
  Divider channels, width, height;
};
template <class Divider>
inline NhwcDividers<Divider> nhwc_dividers(int64_t height, int64_t width, int64_t channels) {
  return {Divider{channels}, Divider{width}, Divider{height}};
}

// The divisions of a strided layer's index arithmetic (pooling, the CIFAR ResNets' shortcut):
// its input's and output's flat indices into coordinates, and by its stride.
template <class Divider>
struct StridedDividers {
  NhwcDividers<Divider> in, out;
  Divider stride;
};

// The coordinates of flat index `i` of an NHWC tensor [?, height, width, channels], and back.
template <class Divider>
SS_HOST_DEVICE inline Nhwc nhwc_coords(int64_t i, const NhwcDividers<Divider>& d, int64_t height,
                                       int64_t width, int64_t channels) {
  const int64_t pixel = d.channels(i);
  const int64_t image_row = d.width(pixel);
  const int64_t n = d.height(image_row);
  return {n, image_row - n * height, pixel - image_row * width, i - pixel * channels};
}
SS_HOST_DEVICE inline Nhwc nhwc_coords(int64_t i, int64_t height, int64_t width, int64_t channels) {
  const NhwcDividers<PlainDivider> plain{{channels}, {width}, {height}};
  return nhwc_coords(i, plain, height, width, channels);
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

// The divisions of the extended tensor's indices, and of the image's.
template <class Divider>
inline NhwcDividers<Divider> extended_dividers(const ExtendShape& s) {
  return nhwc_dividers<Divider>(s.extended_height, s.extended_width, s.channels);
}
template <class Divider>
inline NhwcDividers<Divider> image_dividers(const ExtendShape& s) {
  return nhwc_dividers<Divider>(s.height, s.width, s.channels);
}

// Where element `i` of the extended tensor comes from in the image, or -1 where it is a zero;
// `d` divides the extended tensor's indices.
template <class Divider>
SS_HOST_DEVICE inline int64_t extend_source(const ExtendShape& s, const NhwcDividers<Divider>& d,
                                            int64_t i) {
  const Nhwc p = nhwc_coords(i, d, s.extended_height, s.extended_width, s.channels);
  if (p.h >= s.height || p.w >= s.width) return -1;
  return nhwc_index(p, s.height, s.width, s.channels);
}

// Where element `i` of the cropped image comes from in the extended tensor; `d` divides the
// image's indices.
template <class Divider>
SS_HOST_DEVICE inline int64_t crop_source(const ExtendShape& s, const NhwcDividers<Divider>& d,
                                          int64_t i) {
  const Nhwc p = nhwc_coords(i, d, s.height, s.width, s.channels);
  return nhwc_index(p, s.extended_height, s.extended_width, s.channels);
}

// Rows of `width` values between two row pitches: a GEMM's buffer whose rows are padded to a
// multiple of 8 values, and the tensor without the padding (either way round). The destination
// holds its rows `to_pitch` values apart, the source `from_pitch` apart; both are >= width.
struct PitchedRows {
  int64_t width, from_pitch, to_pitch;
};

// Where element `i` of the destination comes from in the source, or -1 for a pad column of the
// destination (which takes a zero: the GEMMs that read such a buffer never read its pads);
// `by_pitch` divides by to_pitch.
template <class Divider>
SS_HOST_DEVICE inline int64_t pitched_row_source(const PitchedRows& s, const Divider& by_pitch,
                                                 int64_t i) {
  const int64_t row = by_pitch(i);
  const int64_t column = i - row * s.to_pitch;
  return column < s.width ? row * s.from_pitch + column : -1;
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
