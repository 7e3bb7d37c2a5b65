// The word a user meant: near enough to be a slip, never a different word.
#include "core/spelling.h"

#include <gtest/gtest.h>

#include <optional>
#include <string_view>
#include <vector>

namespace scalescope {
namespace {

TEST(Spelling, EditsCountLettersLeftOutAddedChangedAndNeighboursSwapped) {
  EXPECT_EQ(spelling_edits("batch", "batch"), 0u);
  EXPECT_EQ(spelling_edits("bach", "batch"), 1u);       // left out
  EXPECT_EQ(spelling_edits("batchh", "batch"), 1u);     // added
  EXPECT_EQ(spelling_edits("botch", "batch"), 1u);      // changed
  EXPECT_EQ(spelling_edits("devicse", "devices"), 1u);  // swapped: one edit, not two
  EXPECT_EQ(spelling_edits("", "abc"), 3u);
  EXPECT_EQ(spelling_edits("kitten", "sitting"), 3u);
}

TEST(Spelling, TheNearestCandidateIsSuggestedOnlyWhenItIsASlip) {
  const std::vector<std::string_view> flags = {"--batch", "--bucket-cap-mb", "--devices", "--lr",
                                               "-o"};
  EXPECT_EQ(nearest_spelling("--bach", flags), std::optional<size_t>(0));
  EXPECT_EQ(nearest_spelling("--devicse", flags), std::optional<size_t>(2));
  EXPECT_EQ(nearest_spelling("--batch", flags), std::nullopt);  // known: nothing to suggest
  EXPECT_EQ(nearest_spelling("--zzz", flags), std::nullopt);
  EXPECT_EQ(nearest_spelling("-x", flags), std::nullopt);  // 2 letters allow no edit
  // At most a third of the candidate's letters: "lr" is not "--lr" mistyped, "sweep" not "seed".
  EXPECT_EQ(nearest_spelling("lr", flags), std::nullopt);
  EXPECT_EQ(nearest_spelling("sweep", {"seed"}), std::nullopt);
  // At most 3 edits however long the word.
  EXPECT_EQ(nearest_spelling("--bucket", flags), std::nullopt);
  EXPECT_EQ(nearest_spelling("--bucket-cap", flags), std::optional<size_t>(1));
  EXPECT_EQ(nearest_spelling("--bucket-capmb", flags), std::optional<size_t>(1));
}

TEST(Spelling, OfEquallyNearCandidatesTheFirstIsSuggested) {
  EXPECT_EQ(nearest_spelling("steps", {"stepz", "steqs"}), std::optional<size_t>(0));
  EXPECT_EQ(nearest_spelling("steps", {"steqs", "stepz"}), std::optional<size_t>(0));
  EXPECT_EQ(nearest_spelling("steps", {"stxyz", "stepss"}), std::optional<size_t>(1));
}

TEST(Spelling, DidYouMeanNamesTheSuggestionOrSaysNothing) {
  EXPECT_EQ(did_you_mean("trian", {"train", "sweep"}), " (did you mean train?)");
  EXPECT_EQ(did_you_mean("frobnicate", {"train", "sweep"}), "");
}

}  // namespace
}  // namespace scalescope
