// The bias of a [rows, channels] tensor (NHWC images are [N·H·W, C]): its broadcast, and the
// partition of its gradient db[c] = sum over r of dy[r, c] among GPU threads, so that the sum is
// added in an order fixed by the shape alone (atomics would make it vary from run to run):
//
// - The rows split into `parts` consecutive ranges of rows_per_part rows (the last one shorter),
//   each summed by its own block; with one part the block writes db itself, with more their
//   partial sums are added in part order.
// - Within a part, each of kBiasTileRows row-threads sums the rows first, first + kBiasTileRows,
//   ... (first = the part's begin + the thread's index), and their sums are added in thread
//   order.
// Every row is added exactly once, and every addition is a float addition starting from +0.
#pragma once

#include <cstdint>

#include "models/kernel_math/half_math.h"
#include "models/kernel_math/host_device.h"
#include "models/kernel_math/int_divider.h"
#include "models/kernel_math/layout_math.h"

namespace scalescope::kernel_math {

// Channels per block: consecutive, so that a warp reads one coalesced row segment.
constexpr int kBiasTileChannels = 32;
// Row-threads per channel within a block.
constexpr int kBiasTileRows = 8;
// Rows each part covers at least: fewer would make the second pass the larger one.
constexpr int64_t kBiasMinRowsPerPart = 512;
constexpr int64_t kBiasMaxParts = 128;

// The channel of element i, by a divider of the channel count (int_divider.h).
template <class Divider>
SS_HOST_DEVICE inline int64_t bias_channel(int64_t i, const Divider& by_channels) {
  return by_channels.remainder(i);
}

struct BiasGradPlan {
  int64_t parts = 1;
  int64_t rows_per_part = 0;
};

SS_HOST_DEVICE inline BiasGradPlan bias_grad_plan(int64_t rows) {
  int64_t parts = (rows + kBiasMinRowsPerPart - 1) / kBiasMinRowsPerPart;
  parts = parts < 1 ? 1 : (parts > kBiasMaxParts ? kBiasMaxParts : parts);
  return {parts, (rows + parts - 1) / parts};
}

SS_HOST_DEVICE inline IndexRange bias_grad_part_rows(const BiasGradPlan& plan, int64_t rows,
                                                     int64_t part) {
  const int64_t begin = part * plan.rows_per_part;
  return {min_i64(rows, begin), min_i64(rows, begin + plan.rows_per_part)};
}

// What the bias gradient adds of each dy: the value, or under bf16 and fp16 its 16-bit
// rounding, the value the 16-bit copy of dy holds that the weights' products read (as the CPU's
// oneDNN kernels sum their bf16 diff_dst, and autocast its 16-bit gradient).
struct BiasGradRead {
  bool rounded = false;
  HalfFormat format = HalfFormat::kBf16;
  SS_HOST_DEVICE float operator()(float v) const {
    return rounded ? from_half(to_half(v, format), format) : v;
  }
};

// How many of dy's values strided_column_sum loads before it rounds and adds them. nvcc
// pipelines the loads of a plain sum on its own (10 or more in flight in its SASS for sm_90),
// but not those of a sum that rounds each value first (one at a time: the loop is latency
// bound); loading a batch first gives it the same.
constexpr int kColumnLoadsAhead = 8;

// dy[first, c] + dy[first + step, c] + ... over the rows below `end`, in that order, each value
// as `read` takes it.
SS_HOST_DEVICE inline float strided_column_sum(const float* dy, int64_t channels, int64_t c,
                                               int64_t first, int64_t end, int64_t step,
                                               BiasGradRead read = {}) {
  float sum = 0.0f;
  int64_t r = first;
  for (; r + (kColumnLoadsAhead - 1) * step < end; r += kColumnLoadsAhead * step) {
    float v[kColumnLoadsAhead];
    SS_UNROLL
    for (int u = 0; u < kColumnLoadsAhead; ++u) v[u] = dy[(r + u * step) * channels + c];
    SS_UNROLL
    for (int u = 0; u < kColumnLoadsAhead; ++u) sum += read(v[u]);
  }
  for (; r < end; r += step) sum += read(dy[r * channels + c]);
  return sum;
}

// values[0] + values[stride] + ... + values[(count - 1)·stride], in that order.
SS_HOST_DEVICE inline float ordered_sum(const float* values, int64_t count, int64_t stride) {
  float sum = 0.0f;
  for (int64_t j = 0; j < count; ++j) sum += values[j * stride];
  return sum;
}

// ---- the same order on the host, each part's rows read once and in order (the CPU dense layers)

// value(r·channels + c) summed over the rows r of `part` into out[c] for every channel c, as
// bias_grad_kernel adds them: row r joins row-thread (r − the part's begin) mod kBiasTileRows,
// whose sums `acc` holds (kBiasTileRows·channels floats), and the threads' sums are added in
// thread order at the end. The parts' sums then go through ordered_sum in part order.
template <class Value>
void bias_grad_part_on_host(const Value& value, int64_t rows, int64_t channels,
                            const BiasGradPlan& plan, int64_t part, float* acc, float* out) {
  const IndexRange range = bias_grad_part_rows(plan, rows, part);
  for (int64_t i = 0; i < kBiasTileRows * channels; ++i) acc[i] = 0.0f;
  for (int64_t r = range.begin; r < range.end; ++r) {
    float* sums = acc + ((r - range.begin) % kBiasTileRows) * channels;
    for (int64_t c = 0; c < channels; ++c) sums[c] += value(r * channels + c);
  }
  for (int64_t c = 0; c < channels; ++c) out[c] = ordered_sum(acc + c, kBiasTileRows, channels);
}

}  // namespace scalescope::kernel_math
