#include "core/device_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>

#include "core/backend.h"
#include "core/check.h"

namespace scalescope {
namespace {

constexpr const char* kAccepted =
    "accepted: cpu, cpu:N, sim, sim:N, cuda, cuda:N (N GPUs: the first N visible) or a device "
    "count N";
// More devices than this is certainly a typo: each is a thread (or several) with its own model.
constexpr int kMaxDevices = 1024;
constexpr const char* kChooseGpus =
    "which GPUs are visible is CUDA_VISIBLE_DEVICES's choice, e.g. CUDA_VISIBLE_DEVICES=2,3 "
    "with cuda:2";

struct Split {
  std::string_view head;  // "cpu", "cuda", ...; the whole text when it has no ':'
  std::string_view tail;  // after ':'; empty without one
  bool has_colon = false;
};

Split split_kind(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return {text, {}, false};
  return {text.substr(0, colon), text.substr(colon + 1), true};
}

// A kind's name, or nullopt.
std::optional<DeviceKind> named_kind(std::string_view name) {
  if (name == "cpu") return DeviceKind::kCpu;
  if (name == "sim") return DeviceKind::kSim;
  if (name == "cuda" || name == "gpu") return DeviceKind::kCuda;
  return std::nullopt;
}

// `item`, an element of the list `whole` after its first, names no kind ("sim:1,cpu:2").
void check_one_kind(std::string_view item, std::string_view whole) {
  const Split inner = split_kind(item);
  SS_CHECK_INPUT(!inner.has_colon || !named_kind(inner.head),
                 "bad device list '{}': '{}' names a device kind of its own; a list is the device "
                 "counts of one kind (cpu:1,2); sweep another kind in a sweep of its own",
                 whole, item);
}

int parse_count(std::string_view item, std::string_view whole) {
  check_one_kind(item, whole);
  int value = 0;
  const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
  SS_CHECK_INPUT(!item.empty() && ec == std::errc() && end == item.data() + item.size(),
                 "bad device list '{}': '{}' is not a whole number ({})", whole, item, kAccepted);
  return value;
}

std::vector<int> parse_counts(std::string_view text, std::string_view whole) {
  std::vector<int> counts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    counts.push_back(parse_count(text.substr(start, comma - start), whole));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return counts;
}

bool gpus_visible() {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  return cuda != nullptr && cuda->device_count() > 0;
}

// "cuda" alone: every visible GPU.
int all_visible_gpus(std::string_view whole) {
  Backend& cuda = backend(DeviceKind::kCuda);
  const int n = cuda.device_count();
  SS_CHECK_INPUT(n > 0, "device list '{}': no GPU is visible ({})", whole,
                 cuda.unavailable_reason());
  return n;
}

void check_count(DeviceKind kind, int count, std::string_view whole) {
  SS_CHECK_INPUT(
      count != 0 || kind != DeviceKind::kCuda,
      "device list '{}' asks for no GPU: cuda:N means N GPUs, the first N visible (one GPU "
      "is cuda:1; {})",
      whole, kChooseGpus);
  SS_CHECK_INPUT(count >= 1 && count <= kMaxDevices,
                 "bad device list '{}': the device count {} must be between 1 and {}", whole, count,
                 kMaxDevices);
}

}  // namespace

DeviceAxis parse_device_axis(std::string_view text) {
  SS_CHECK_INPUT(!text.empty(), "empty device list ({})", kAccepted);
  const Split s = split_kind(text);
  const std::optional<DeviceKind> kind = named_kind(s.head);
  if (!s.has_colon && kind) {  // "cpu", "sim": one device; "cuda": every visible GPU
    return DeviceAxis{*kind, {*kind == DeviceKind::kCuda ? all_visible_gpus(text) : 1}};
  }
  // "1,sim:2": the kind comes after counts.
  if (const size_t comma = s.head.rfind(','); !kind && comma != std::string_view::npos) {
    check_one_kind(text.substr(comma + 1), text);
  }
  SS_CHECK_INPUT(!s.has_colon || kind, "bad device list '{}': unknown device kind '{}' ({})", text,
                 s.head, kAccepted);
  SS_CHECK_INPUT(!s.has_colon || !s.tail.empty(), "bad device list '{}': nothing after ':' ({})",
                 text, kAccepted);
  DeviceAxis axis;
  // Bare counts: GPUs where any are visible.
  axis.kind = kind ? *kind : gpus_visible() ? DeviceKind::kCuda : DeviceKind::kCpu;
  axis.counts = parse_counts(s.has_colon ? s.tail : s.head, text);
  for (int n : axis.counts) check_count(axis.kind, n, text);
  std::sort(axis.counts.begin(), axis.counts.end());
  axis.counts.erase(std::unique(axis.counts.begin(), axis.counts.end()), axis.counts.end());
  return axis;
}

namespace {

// A list where one device set is asked for: a sweep's axis of counts, or the GPU index list
// `cuda:0,1` used to be.
[[noreturn]] void throw_list_refused(std::string_view text) {
  const Split s = split_kind(text);
  // Bare counts name no kind: the message then speaks of every kind, GPUs included.
  const DeviceKind kind =
      s.has_colon ? named_kind(s.head).value_or(DeviceKind::kCuda) : DeviceKind::kCuda;
  const bool named = s.has_colon && named_kind(s.head).has_value();
  const size_t items = static_cast<size_t>(std::count(text.begin(), text.end(), ',')) + 1;
  const std::string gpus =
      kind == DeviceKind::kCuda
          ? fmt::format(" (the first {} visible GPUs are cuda:{}; {})", items, items, kChooseGpus)
          : std::string();
  throw_error(fmt::format(
      "device list '{}' is a list, which only a sweep takes, as its axis of device counts "
      "(e.g. `scalescope sweep --devices {}:1,2,4`); here give one count: {}:N runs on N "
      "devices{}",
      text, to_string(kind), named ? to_string(kind) : "cpu, sim or cuda", gpus));
}

}  // namespace

DeviceSpec parse_device_spec(std::string_view text) {
  if (text.find(',') != std::string_view::npos) throw_list_refused(text);
  const DeviceAxis axis = parse_device_axis(text);
  return DeviceSpec{axis.kind, axis.counts.front()};
}

void check_devices_available(const DeviceSpec& spec) {
  Backend& b = backend(spec.kind);
  if (b.logical()) return;  // any number of logical devices exists
  const int available = b.device_count();
  if (spec.count() <= available) return;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  throw_usage_error(fmt::format(
      "{} asks for {} GPU{}; {} {} visible{}{}", to_string(spec), spec.count(),
      spec.count() == 1 ? "" : "s", available, available == 1 ? "is" : "are",
      visible != nullptr ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : std::string(),
      available == 0 ? fmt::format(": {}", b.unavailable_reason()) : std::string()));
}

std::string to_string(const DeviceSpec& spec) {
  return fmt::format("{}:{}", to_string(spec.kind), spec.count());
}

std::string to_string(const DeviceAxis& axis) {
  return fmt::format("{}:{}", to_string(axis.kind), fmt::join(axis.counts, ","));
}

DefaultDevices default_device_axis(int visible_gpus, int usable_cores,
                                   std::string_view no_gpu_reason, int processes) {
  DefaultDevices d;
  if (visible_gpus > 0) {
    d.axis.kind = DeviceKind::kCuda;
    for (int n = 1; n < visible_gpus; n *= 2) d.axis.counts.push_back(n);
    d.axis.counts.push_back(visible_gpus);
    d.reason = fmt::format("{} GPU{} visible", visible_gpus, visible_gpus == 1 ? " is" : "s are");
    return d;
  }
  d.axis.kind = DeviceKind::kCpu;
  if (processes > 1) {
    for (int n = 1; n < processes; n *= 2) d.axis.counts.push_back(n);
    d.axis.counts.push_back(processes);
    d.reason = fmt::format(
        "no GPU is visible ({}); one CPU device per process, up to the {} of "
        "this launch",
        no_gpu_reason, processes);
    return d;
  }
  d.axis.counts = usable_cores >= 2 ? std::vector<int>{1, 2} : std::vector<int>{1};
  d.reason = fmt::format("no GPU is visible ({}){}", no_gpu_reason,
                         usable_cores >= 2 ? "" : " and this machine has one usable core");
  return d;
}

DefaultDevices default_device_axis(int processes) {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  const int gpus = cuda != nullptr ? cuda->device_count() : 0;
  const std::string reason = cuda == nullptr ? missing_backend_message(DeviceKind::kCuda)
                             : gpus == 0     ? cuda->unavailable_reason()
                                             : std::string();
  return default_device_axis(gpus, backend(DeviceKind::kCpu).device_count(), reason, processes);
}

}  // namespace scalescope
