#include "core/cuda_architectures.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>
#include <tuple>
#include <vector>

namespace scalescope {
namespace {

// One entry of CMAKE_CUDA_ARCHITECTURES, as nvcc's -gencode reads it.
struct Architecture {
  int major = 0;
  int minor = 0;
  char suffix = '\0';  // 'a' arch-specific, 'f' family-specific, or none
  bool machine_code = true;
  bool ptx = true;
};

std::vector<std::string> entries(const std::string& list) {
  std::vector<std::string> out(1);
  for (const char c : list) {
    if (c == ',' || c == ';') {
      out.emplace_back();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      out.back() += c;
    }
  }
  return out;
}

// nullopt for what cannot be read as a number of two or three digits (major, then one digit of
// minor), an optional 'a' or 'f', and an optional "-real" or "-virtual".
std::optional<Architecture> parse(std::string entry) {
  Architecture a;
  for (const auto& [tail, machine_code, ptx] :
       {std::tuple{"-real", true, false}, std::tuple{"-virtual", false, true}}) {
    const std::string t = tail;
    if (entry.size() > t.size() && entry.ends_with(t)) {
      entry.resize(entry.size() - t.size());
      a.machine_code = machine_code;
      a.ptx = ptx;
    }
  }
  if (!entry.empty() && (entry.back() == 'a' || entry.back() == 'f')) {
    a.suffix = entry.back();
    entry.pop_back();
  }
  if (entry.size() < 2 || entry.size() > 3) return std::nullopt;
  for (const char c : entry) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  const int n = std::stoi(entry);
  a.major = n / 10;
  a.minor = n % 10;
  return a;
}

bool runs_on(const Architecture& a, int major, int minor) {
  if (a.suffix == 'a') return major == a.major && minor == a.minor;
  const bool same_major_at_least = major == a.major && minor >= a.minor;
  if (a.suffix == 'f') return same_major_at_least;
  if (a.machine_code && same_major_at_least) return true;
  return a.ptx && (major > a.major || same_major_at_least);
}

}  // namespace

std::string cuda_code_mismatch(const std::string& architectures, int major, int minor) {
  if (major < kMinCudaMajor) {
    return fmt::format(
        "scalescope's GPU kernels need compute capability {}.0 or later (bf16 and TF32 tensor "
        "cores), and this GPU's is {}.{}; its cpu devices still run",
        kMinCudaMajor, major, minor);
  }
  bool any = false;
  for (const std::string& entry : entries(architectures)) {
    if (entry.empty()) continue;
    if (entry == "all" || entry == "all-major" || entry == "native") return "";
    const std::optional<Architecture> a = parse(entry);
    if (!a || runs_on(*a, major, minor)) return "";
    any = true;
  }
  if (!any) return "";
  return fmt::format(
      "this build has no CUDA code that a GPU of compute capability {}.{} runs (built for "
      "CUDA architectures {}); rebuild with -DCMAKE_CUDA_ARCHITECTURES={}{} "
      "(scripts/build.sh passes it to CMake)",
      major, minor, architectures, major, minor);
}

}  // namespace scalescope
