// Float64 references of the token and position embeddings, straight from their definitions.
#include <cmath>

#include "core/check.h"
#include "tests/models/reference.h"

namespace scalescope {

std::vector<double> reference_embedding(const EmbeddingSpec& spec, const Shape& in,
                                        const std::vector<double>& input,
                                        const std::vector<double>& weight) {
  std::vector<double> out;
  out.reserve(input.size() * static_cast<size_t>(spec.dim));
  for (const double id : input) {
    SS_CHECK(id >= 0.0 && id < static_cast<double>(spec.vocab) && std::floor(id) == id,
             "reference: {} is not a token of {} in shape {}", id, describe(spec), in.to_string());
    const auto row = static_cast<size_t>(id) * static_cast<size_t>(spec.dim);
    out.insert(out.end(), weight.begin() + static_cast<std::ptrdiff_t>(row),
               weight.begin() + static_cast<std::ptrdiff_t>(row + static_cast<size_t>(spec.dim)));
  }
  return out;
}

std::vector<double> reference_position_embedding(const Shape& in, const std::vector<double>& input,
                                                 const std::vector<double>& weight) {
  const size_t row = static_cast<size_t>(in[1] * in[2]);
  std::vector<double> out(input.size());
  for (size_t i = 0; i < input.size(); ++i) out[i] = input[i] + weight[i % row];
  return out;
}

}  // namespace scalescope
