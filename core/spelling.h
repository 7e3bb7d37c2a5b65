// The word a user most likely meant when they typed one scalescope does not know: a flag, a
// command, a setting, a config key, a model. Said beside the error, it saves a trip to --help.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scalescope {

// Edits (a letter left out, added or changed, or two neighbours swapped) from `a` to `b`.
size_t spelling_edits(std::string_view a, std::string_view b);

// The index in `candidates` of the one nearest to `typed` by spelling_edits, where it is near
// enough to be a slip rather than another word: at most a third of the candidate's letters
// and at most 3 edits (so "--lr" suggests nothing, "--bach" suggests "--batch"); the first of
// equally near ones; nullopt when `typed` is one of them or none is that near.
std::optional<size_t> nearest_spelling(std::string_view typed,
                                       const std::vector<std::string_view>& candidates);

// " (did you mean X?)" with the nearest of `candidates`, or "" when none is near.
std::string did_you_mean(std::string_view typed, const std::vector<std::string_view>& candidates);

}  // namespace scalescope
