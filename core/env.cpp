#include "core/env.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "core/check.h"
#include "core/spelling.h"

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
  std::vector<const std::string*> settings;  // the known SCALESCOPE_* names
  std::vector<std::string_view> rests;       // and their letters after the prefix
  for (const std::string& setting : known) {
    if (!std::string_view(setting).starts_with(kPrefix)) continue;
    settings.push_back(&setting);
    rests.push_back(std::string_view(setting).substr(kPrefix.size()));
  }
  std::vector<MisspeltSetting> misspelt;
  for (const std::string& entry : environment) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (!name.starts_with(kPrefix) || std::ranges::find(known, name) != known.end()) continue;
    const std::optional<size_t> meant = nearest_spelling(name.substr(kPrefix.size()), rests);
    if (meant) misspelt.push_back({std::string(name), *settings[*meant]});
  }
  return misspelt;
}

}  // namespace scalescope
