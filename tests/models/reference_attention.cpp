#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "tests/models/reference.h"

namespace scalescope {

// nanoGPT's CausalSelfAttention without its projections, straight from the definition: for
// each sample n, head h and query position i, att[j] = q_i·k_j / sqrt(hd) for j <= i (later
// positions masked out), softmax over j, and y_i = Σ_j att[j]·v_j in the head's columns.
std::vector<double> reference_attention(const CausalSelfAttentionSpec& spec, const Shape& in,
                                        const std::vector<double>& input) {
  SS_CHECK(in.rank() == 3 && in[2] % (3 * spec.heads) == 0,
           "reference: attention needs [N, S, 3D] with D a multiple of {} heads, got {}",
           spec.heads, in.to_string());
  const int64_t batch = in[0], seq = in[1], d = in[2] / 3, hd = d / spec.heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  // Element c of head h of part (0 q, 1 k, 2 v) at position t of sample n.
  const auto x = [&](int64_t n, int64_t t, int64_t part, int64_t h, int64_t c) {
    return input[static_cast<size_t>((n * seq + t) * 3 * d + part * d + h * hd + c)];
  };
  std::vector<double> y(static_cast<size_t>(batch * seq * d), 0.0);
  std::vector<double> att(static_cast<size_t>(seq));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t h = 0; h < spec.heads; ++h) {
      for (int64_t i = 0; i < seq; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < hd; ++c) dot += x(n, i, 0, h, c) * x(n, j, 1, h, c);
          att[static_cast<size_t>(j)] = dot * scale;
          max = std::max(max, dot * scale);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          att[static_cast<size_t>(j)] = std::exp(att[static_cast<size_t>(j)] - max);
          sum += att[static_cast<size_t>(j)];
        }
        for (int64_t c = 0; c < hd; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j)
            acc += att[static_cast<size_t>(j)] / sum * x(n, j, 2, h, c);
          y[static_cast<size_t>((n * seq + i) * d + h * hd + c)] = acc;
        }
      }
    }
  }
  return y;
}

}  // namespace scalescope
