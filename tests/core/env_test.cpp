// The settings read from SCALESCOPE_* variables: which names count as settings, and which set
// variables read as a setting mistyped.
#include "core/env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace scalescope {
namespace {

const std::vector<std::string> kKnown = {
    "SCALESCOPE_ATTENTION", "SCALESCOPE_ATTENTION_PRODUCTS", "SCALESCOPE_DENORMALS",
    "SCALESCOPE_LOG",       "SCALESCOPE_SIM_JITTER_US",      "SCALESCOPE_SIM_LINK_MBPS"};

std::vector<MisspeltSetting> misspelt(const std::string& entry) {
  return misspelt_settings({entry}, kKnown);
}

TEST(EnvSettings, ASettingMistypedIsNamedWithTheOneMeant) {
  using M = std::vector<MisspeltSetting>;
  EXPECT_EQ(misspelt("SCALESCOPE_ATENTION=flash"),
            (M{{"SCALESCOPE_ATENTION", "SCALESCOPE_ATTENTION"}}));
  EXPECT_EQ(misspelt("SCALESCOPE_DENROMALS=flush"),  // two letters swapped: one edit
            (M{{"SCALESCOPE_DENROMALS", "SCALESCOPE_DENORMALS"}}));
  EXPECT_EQ(misspelt("SCALESCOPE_SIM_JITTER=200"),  // the unit left out: three edits
            (M{{"SCALESCOPE_SIM_JITTER", "SCALESCOPE_SIM_JITTER_US"}}));
  EXPECT_EQ(misspelt("SCALESCOPE_LOGS=debug"), (M{{"SCALESCOPE_LOGS", "SCALESCOPE_LOG"}}));
  EXPECT_EQ(misspelt("SCALESCOPE_ATTENTION_PRODUCT=sgemm"),  // the nearer of two
            (M{{"SCALESCOPE_ATTENTION_PRODUCT", "SCALESCOPE_ATTENTION_PRODUCTS"}}));
  EXPECT_EQ(misspelt("SCALESCOPE_SIM_LINK_MBPS"), M{});  // no value still names the setting
}

TEST(EnvSettings, SettingsAndOtherVariablesAreNotNamed) {
  for (const char* entry :
       {"SCALESCOPE_ATTENTION=flsh", "SCALESCOPE_LOG=", "PATH=/usr/bin", "ATTENTION=flash",
        "SCALESCOPE_VARIANTS=asan",  // a script's own variable, far from every setting
        "SCALESCOPE_FOO=1",          // three edits from LOG, of three letters: too many
        "SCALESCOPE_SOURCE_DIR=/src", "SCALESCOPE_=1", "SCALESCOPE_ANCHORS_VENV=/v"}) {
    EXPECT_TRUE(misspelt(entry).empty()) << entry;
  }
  EXPECT_TRUE(misspelt_settings({"SCALESCOPE_ATENTION=flash"}, {}).empty());
}

TEST(EnvSettings, EveryNameAskedForCountsAsASetting) {
  ASSERT_EQ(setenv("SCALESCOPE_TEST_WORDS", "b", 1), 0);
  EXPECT_EQ(choice_from_environment("SCALESCOPE_TEST_WORDS", {"a", "b"}), 1);
  unsetenv("SCALESCOPE_TEST_WORDS");
  EXPECT_EQ(text_from_environment("SCALESCOPE_TEST_TEXT"), "");
  EXPECT_EQ(whole_number_from_environment("SCALESCOPE_TEST_NUMBER", 5, "things"), 0);
  const std::vector<std::string> asked = settings_asked();
  EXPECT_TRUE(std::ranges::is_sorted(asked));
  for (const char* name :
       {"SCALESCOPE_TEST_NUMBER", "SCALESCOPE_TEST_TEXT", "SCALESCOPE_TEST_WORDS"})
    EXPECT_NE(std::ranges::find(asked, name), asked.end()) << name;
  // Once asked for, a name is a setting: no longer a mistyped one.
  EXPECT_EQ(misspelt_settings({"SCALESCOPE_TEST_TEXT=x"}, {"SCALESCOPE_TEST_TEXTS"}).size(), 1u);
  EXPECT_TRUE(misspelt_settings({"SCALESCOPE_TEST_TEXT=x"}, asked).empty());
}

}  // namespace
}  // namespace scalescope
