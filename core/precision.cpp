#include "core/precision.h"

#include <optional>

#include "core/check.h"
#include "core/enum_names.h"

namespace scalescope {
namespace {

constexpr auto kPrecisionNames = enum_names<Precision>("fp32", "tf32", "bf16", "fp16");

}  // namespace

std::string to_string(Precision precision) {
  return std::string(kPrecisionNames(precision));
}

Precision parse_precision(const std::string& name) {
  const std::optional<Precision> p = kPrecisionNames.parse(name);
  SS_CHECK_INPUT(p.has_value(), "precision '{}': unknown{}; use {}", name,
                 kPrecisionNames.meant(name), kPrecisionNames.accepted());
  return *p;
}

std::vector<std::string> precision_names() {
  const auto& names = kPrecisionNames.names();
  return {names.begin(), names.end()};
}

}  // namespace scalescope
