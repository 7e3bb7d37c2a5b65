// PyTorch's nn.LayerNorm over the last dimension, in float64.
#include <cmath>
#include <cstdint>

#include "tests/models/reference.h"

namespace scalescope {

// Each row of D values (a sample, or a position of a sequence) normalized with its own mean
// and biased variance, eps inside the square root, then scaled and shifted per column.
std::vector<double> reference_layer_norm(const LayerNormSpec& spec, const Shape& in,
                                         const std::vector<double>& input,
                                         const std::vector<double>& weight,
                                         const std::vector<double>& bias) {
  const auto d = static_cast<size_t>(in[in.rank() - 1]);
  std::vector<double> y(input.size());
  for (size_t row = 0; row < input.size(); row += d) {
    double sum = 0.0;
    for (size_t i = 0; i < d; ++i) sum += input[row + i];
    const double mean = sum / static_cast<double>(d);
    double squares = 0.0;
    for (size_t i = 0; i < d; ++i) squares += (input[row + i] - mean) * (input[row + i] - mean);
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(d) + spec.eps);
    for (size_t i = 0; i < d; ++i)
      y[row + i] = (input[row + i] - mean) * rstd * weight[i] + bias[i];
  }
  return y;
}

}  // namespace scalescope
