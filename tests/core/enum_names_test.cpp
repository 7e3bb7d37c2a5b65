// One table of names per enum: printing and reading back agree.
#include <gtest/gtest.h>

#include "core/enum_names.h"

namespace scalescope {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr auto kColors = enum_names<Color>("red", "green", "blue");

TEST(EnumNames, PrintAndParseAgree) {
  static_assert(kColors(Color::kGreen) == "green");
  EXPECT_EQ(kColors(Color::kBlue), "blue");
  for (const Color c : {Color::kRed, Color::kGreen, Color::kBlue}) {
    EXPECT_EQ(kColors.parse(kColors(c)), c);
  }
  EXPECT_EQ(kColors.parse("purple"), std::nullopt);
  EXPECT_EQ(kColors.parse(""), std::nullopt);
  EXPECT_EQ(kColors(static_cast<Color>(7)), "?");
  EXPECT_EQ(kColors.accepted(), "red, green or blue");
  EXPECT_EQ(enum_names<Color>("only").accepted(), "only");
}

}  // namespace
}  // namespace scalescope
