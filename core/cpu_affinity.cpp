#include "core/cpu_affinity.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include "core/check.h"

namespace scalescope {

std::vector<int> usable_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) {
    const int online = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int cpu = 0; cpu < online; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

int usable_core_count() {
  return static_cast<int>(usable_cpus().size());
}

bool cpu_sets_intersect(const std::vector<int>& a, const std::vector<int>& b) {
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return true;
    *i < *j ? ++i : ++j;
  }
  return false;
}

std::string format_cpu_set(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    if (!text.empty()) text += ',';
    text += last == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[last]);
    i = last + 1;
  }
  return text;
}

namespace {

int parse_cpu(std::string_view part, const std::string& text) {
  int cpu = -1;
  const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), cpu);
  SS_CHECK(
      error == std::errc() && end == part.data() + part.size() && cpu >= 0 && cpu < CPU_SETSIZE,
      "CPU set '{}': '{}' is not a CPU number from 0 to {}", text, part, CPU_SETSIZE - 1);
  return cpu;
}

}  // namespace

std::vector<int> parse_cpu_set(const std::string& text) {
  std::vector<int> cpus;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view range = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = range.find('-');
    const int first = parse_cpu(range.substr(0, dash), text);
    const int last =
        dash == std::string_view::npos ? first : parse_cpu(range.substr(dash + 1), text);
    SS_CHECK(first <= last && (cpus.empty() || cpus.back() < first),
             "CPU set '{}': its CPUs are not in ascending order", text);
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  SS_CHECK(!cpus.empty(), "CPU set '{}' names no CPU", text);
  return cpus;
}

}  // namespace scalescope
