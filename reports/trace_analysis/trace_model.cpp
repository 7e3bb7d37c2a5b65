#include "reports/trace_analysis/trace_model.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace scalescope::traces {

std::string_view to_string(TraceFormat format) {
  switch (format) {
    case TraceFormat::kKineto:
      return "kineto";
    case TraceFormat::kTorchLegacy:
      return "torch-legacy";
    case TraceFormat::kNsys:
      return "nsys";
    case TraceFormat::kScalescope:
      return "scalescope";
  }
  return "?";
}

std::string_view to_string(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kHostOp:
      return "host op";
    case ActivityKind::kAnnotation:
      return "annotation";
    case ActivityKind::kRuntime:
      return "runtime call";
    case ActivityKind::kOsRuntime:
      return "OS runtime call";
    case ActivityKind::kKernel:
      return "kernel";
    case ActivityKind::kMemcpy:
      return "memcpy";
    case ActivityKind::kMemset:
      return "memset";
  }
  return "?";
}

Name NameTable::intern(const std::string& text) {
  const auto it = names_.find(text);
  if (it != names_.end()) return it->second;
  return names_.emplace(text, Name(text)).first->second;
}

bool RankTrace::has_device() const {
  return std::any_of(activities.begin(), activities.end(),
                     [](const Activity& a) { return on_device(a.kind); });
}

void RankTrace::sort() {
  std::stable_sort(activities.begin(), activities.end(), [](const Activity& a, const Activity& b) {
    return a.start_us != b.start_us ? a.start_us < b.start_us : a.end_us > b.end_us;
  });
}

std::optional<int> rank_from_file_name(std::string_view path) {
  const std::string name = std::filesystem::path(path).filename().string();
  for (size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
    size_t i = at + 4;
    if (i < name.size() && (name[i] == '-' || name[i] == '_')) ++i;
    size_t digits = 0;
    int value = 0;
    while (i + digits < name.size() && std::isdigit(static_cast<unsigned char>(name[i + digits])) &&
           digits < 7) {
      value = value * 10 + (name[i + digits] - '0');
      ++digits;
    }
    if (digits > 0) return value;
  }
  return std::nullopt;
}

}  // namespace scalescope::traces
