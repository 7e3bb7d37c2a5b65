#include "core/device_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "core/backend.h"
#include "core/check.h"

namespace scalescope {
namespace {

constexpr const char* kAccepted =
    "accepted: cpu, cpu:N, cuda, cuda:I[,J...], sim, sim:N or a device count N";
// More logical replicas (CPU or simulated) than this is certainly a typo: each is a thread
// (or several) with its own model.
constexpr int kMaxLogicalDevices = 1024;

int parse_int(std::string_view text, std::string_view whole) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  SS_CHECK(ec == std::errc() && end == text.data() + text.size(),
           "bad device list '{}': '{}' is not a whole number ({})", whole, text, kAccepted);
  return value;
}

std::vector<int> parse_int_list(std::string_view text, std::string_view whole) {
  std::vector<int> values;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    values.push_back(parse_int(text.substr(start, comma - start), whole));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return values;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// CPU and simulated devices are logical: any count of them, numbered from 0.
DeviceSpec logical_spec(DeviceKind kind, int count, std::string_view whole) {
  SS_CHECK(count >= 1 && count <= kMaxLogicalDevices,
           "bad device list '{}': {} device count {} must be between 1 and {}", whole,
           kind == DeviceKind::kCpu ? "CPU" : "simulated", count, kMaxLogicalDevices);
  return DeviceSpec{kind, iota(count)};
}

}  // namespace

DeviceSpec parse_device_spec(std::string_view text) {
  SS_CHECK(!text.empty(), "empty device list ({})", kAccepted);
  const size_t colon = text.find(':');
  const std::string_view head = text.substr(0, colon);
  const std::string_view tail =
      colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  SS_CHECK(colon == std::string_view::npos || !tail.empty(),
           "bad device list '{}': nothing after ':' ({})", text, kAccepted);
  if (head == "cpu" || head == "sim") {
    return logical_spec(head == "cpu" ? DeviceKind::kCpu : DeviceKind::kSim,
                        tail.empty() ? 1 : parse_int(tail, text), text);
  }
  if (head == "cuda" || head == "gpu") {
    DeviceSpec spec{DeviceKind::kCuda, {}};
    if (tail.empty()) {
      const int n = backend(DeviceKind::kCuda).device_count();
      SS_CHECK(n > 0, "device list '{}': no CUDA device is usable ({})", text,
               backend(DeviceKind::kCuda).unavailable_reason());
      spec.indices = iota(n);
      return spec;
    }
    spec.indices = parse_int_list(tail, text);
    std::vector<int> sorted = spec.indices;
    std::sort(sorted.begin(), sorted.end());
    SS_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
             "bad device list '{}': a GPU is named twice", text);
    for (int i : spec.indices) {
      SS_CHECK(i >= 0, "bad device list '{}': GPU index {} is negative", text, i);
    }
    return spec;
  }
  SS_CHECK(colon == std::string_view::npos, "bad device list '{}': unknown backend '{}' ({})", text,
           head, kAccepted);
  const int count = parse_int(text, text);
  // Bounded before any list of that many devices is made.
  SS_CHECK(count >= 1 && count <= kMaxLogicalDevices,
           "bad device list '{}': the device count must be between 1 and {}", text,
           kMaxLogicalDevices);
  for (Backend* b : backends()) {
    if (b->kind() == DeviceKind::kCuda && b->device_count() > 0) {
      return DeviceSpec{DeviceKind::kCuda, iota(count)};
    }
  }
  return logical_spec(DeviceKind::kCpu, count, text);
}

void check_devices_available(const DeviceSpec& spec) {
  if (backend(spec.kind).logical()) return;  // any number of logical devices exists
  Backend& b = backend(spec.kind);
  const int available = b.device_count();
  for (int i : spec.indices) {
    SS_CHECK(i < available, "device {}:{} does not exist: {} {} device(s) available{}", b.name(), i,
             available, b.name(),
             available == 0 ? fmt::format(" ({})", b.unavailable_reason()) : std::string());
  }
}

std::string to_string(const DeviceSpec& spec) {
  // Logical devices are counted; physical ones listed (whether or not this build has them).
  const Backend* b = find_backend(spec.kind);
  if (b != nullptr && b->logical()) return fmt::format("{}:{}", to_string(spec.kind), spec.count());
  return fmt::format("cuda:{}", fmt::join(spec.indices, ","));
}

}  // namespace scalescope
