#include "harness/trainer/buckets.h"

#include "core/check.h"

namespace scalescope {

std::vector<Bucket> plan_buckets(const Model& model, int64_t cap_bytes, int64_t first_cap_bytes) {
  SS_CHECK(cap_bytes > 0, "bucket cap {} bytes must be positive", cap_bytes);
  SS_CHECK(first_cap_bytes > 0, "first bucket cap {} bytes must be positive", first_cap_bytes);
  std::vector<Bucket> buckets;
  Bucket open;
  bool has_open = false;
  const int layers = static_cast<int>(model.def().layers.size());
  for (int layer = layers - 1; layer >= 0; --layer) {
    const auto [begin, end] = model.layer_grad_range(layer);
    if (begin == end) continue;  // no parameters
    if (!has_open) {
      open = Bucket{begin, end, layer, layer};
      has_open = true;
    } else {
      // Reverse layer order is the flat layout's order: the range continues the bucket's.
      SS_CHECK(begin == open.end, "gradient layout of '{}' is not in reverse layer order",
               model.def().name);
      open.end = end;
      open.first_layer = layer;
    }
    const int64_t cap = buckets.empty() ? first_cap_bytes : cap_bytes;
    if (open.bytes() >= cap) {
      buckets.push_back(open);
      has_open = false;
    }
  }
  if (has_open) buckets.push_back(open);
  return buckets;
}

}  // namespace scalescope
