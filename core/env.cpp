#include "core/env.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "core/check.h"

namespace scalescope {
namespace {

constexpr std::string_view kPrefix = "SCALESCOPE_";

std::mutex& asked_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& asked() {
  static std::set<std::string> names;
  return names;
}

// Every reader goes through here, so that the set of names asked is the settings read.
const char* ask(const char* name) {
  {
    const std::lock_guard<std::mutex> lock(asked_mutex());
    asked().insert(name);
  }
  return std::getenv(name);
}

// Edits (a letter deleted, inserted or changed, two neighbours swapped) from `a` to `b`.
size_t edits(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t changed = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + changed});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

int64_t whole_number_from_environment(const char* name, int64_t max, const char* unit) {
  const char* text = ask(name);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  SS_CHECK_INPUT(errno == 0 && *end == '\0' && value >= 0 && value <= max,
                 "{}={}: give a whole number of {} from 0 to {}", name, text, unit, max);
  return value;
}

int choice_from_environment(const char* name, std::initializer_list<std::string_view> words) {
  const char* text = ask(name);
  if (text == nullptr || *text == '\0') return 0;
  std::string listed;
  int index = 0;
  for (const std::string_view word : words) {
    if (word == text) return index;
    const bool last = index + 1 == static_cast<int>(words.size());
    listed += fmt::format("{}{}", index == 0 ? "" : (last ? " or " : ", "), word);
    ++index;
  }
  throw_usage_error(fmt::format("{}={}: give {}", name, text, listed));
}

std::string text_from_environment(const char* name) {
  const char* text = ask(name);
  return text != nullptr ? text : "";
}

std::vector<std::string> settings_asked() {
  const std::lock_guard<std::mutex> lock(asked_mutex());
  return {asked().begin(), asked().end()};
}

std::vector<MisspeltSetting> misspelt_settings(const std::vector<std::string>& environment,
                                               const std::vector<std::string>& known) {
  std::vector<MisspeltSetting> misspelt;
  for (const std::string& entry : environment) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (!name.starts_with(kPrefix) || std::ranges::find(known, name) != known.end()) continue;
    const std::string_view rest = name.substr(kPrefix.size());
    size_t nearest = SIZE_MAX;
    const std::string* meant = nullptr;
    for (const std::string& setting : known) {
      if (!std::string_view(setting).starts_with(kPrefix)) continue;
      const std::string_view setting_rest = std::string_view(setting).substr(kPrefix.size());
      const size_t d = edits(rest, setting_rest);
      if (d <= std::min<size_t>(3, setting_rest.size() / 3) && d < nearest) {
        nearest = d;
        meant = &setting;
      }
    }
    if (meant != nullptr) misspelt.push_back({std::string(name), *meant});
  }
  return misspelt;
}

}  // namespace scalescope
