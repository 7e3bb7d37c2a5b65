#include "core/env.h"

#include <cerrno>
#include <cstdlib>

#include "core/check.h"

namespace scalescope {

int64_t whole_number_from_environment(const char* name, int64_t max, const char* unit) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  SS_CHECK(errno == 0 && *end == '\0' && value >= 0 && value <= max,
           "{}={}: give a whole number of {} from 0 to {}", name, text, unit, max);
  return value;
}

}  // namespace scalescope
