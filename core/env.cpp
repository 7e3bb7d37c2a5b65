#include "core/env.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "core/check.h"

namespace scalescope {

int64_t whole_number_from_environment(const char* name, int64_t max, const char* unit) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  SS_CHECK_INPUT(errno == 0 && *end == '\0' && value >= 0 && value <= max,
                 "{}={}: give a whole number of {} from 0 to {}", name, text, unit, max);
  return value;
}

int choice_from_environment(const char* name, std::initializer_list<std::string_view> words) {
  const char* text = std::getenv(name);
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

}  // namespace scalescope
