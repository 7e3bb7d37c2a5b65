#include "core/spelling.h"

#include <fmt/format.h>

#include <algorithm>

namespace scalescope {

size_t spelling_edits(std::string_view a, std::string_view b) {
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

std::optional<size_t> nearest_spelling(std::string_view typed,
                                       const std::vector<std::string_view>& candidates) {
  if (std::ranges::find(candidates, typed) != candidates.end()) return std::nullopt;
  std::optional<size_t> nearest;
  size_t nearest_edits = SIZE_MAX;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const size_t d = spelling_edits(typed, candidates[i]);
    if (d <= std::min<size_t>(3, candidates[i].size() / 3) && d < nearest_edits) {
      nearest = i;
      nearest_edits = d;
    }
  }
  return nearest;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string_view>& candidates) {
  const std::optional<size_t> i = nearest_spelling(typed, candidates);
  return i ? fmt::format(" (did you mean {}?)", candidates[*i]) : "";
}

}  // namespace scalescope
