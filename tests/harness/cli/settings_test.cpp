// The SCALESCOPE_* settings as a command reads them: every one at its start, a bad value named
// whatever the run builds, a name mistyped named with the setting meant.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "harness/cli/commands.h"

#include "tests/harness/cli/run_cli.h"

namespace {

namespace fs = std::filesystem;
using scalescope::testing_util::contains;
using scalescope::testing_util::run_cli;

// Every SCALESCOPE_* name the sources pass to core/env.h's readers.
std::set<std::string> names_read_in_sources() {
  const char* dir = std::getenv("SCALESCOPE_SOURCE_DIR");
  const fs::path root =
      dir != nullptr ? fs::path(dir) : fs::path(__FILE__).parent_path() / "../../..";
  const std::regex reader(
      R"re((whole_number|choice|text)_from_environment\(\s*"(SCALESCOPE_\w+)")re");
  std::set<std::string> names;
  for (const char* folder : {"core", "models", "harness", "pipelines", "reports"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      for (std::sregex_iterator m(s.begin(), s.end(), reader), end; m != end; ++m)
        names.insert((*m)[2].str());
    }
  }
  return names;
}

// A setting read by some kernel or device but not at a command's start would neither have a bad
// value named on every run nor count as a setting for the mistyped names' warning.
TEST(CliSettings, EverySettingTheSourcesReadIsReadWhenACommandStarts) {
  const std::set<std::string> in_sources = names_read_in_sources();
  ASSERT_GE(in_sources.size(), 8u) << "the sources were not found";
  scalescope::cli::check_settings();
  const std::vector<std::string> asked = scalescope::settings_asked();
  for (const std::string& name : in_sources)
    EXPECT_TRUE(std::ranges::find(asked, name) != asked.end()) << name << " is not read";
}

TEST(CliSettings, ABadValueIsNamedWhereNothingInTheRunReadsIt) {
  struct Case {
    const char* environment;
    const char* message;
  };
  // dense-100 on a CPU builds no attention and no CUDA kernel, and `models` no device.
  const Case cases[] = {
      {"SCALESCOPE_ATTENTION=flsh", "SCALESCOPE_ATTENTION=flsh: give chunks or flash"},
      {"SCALESCOPE_ATTENTION_CHUNK_ROWS=-1", "SCALESCOPE_ATTENTION_CHUNK_ROWS=-1: give a whole"},
      {"SCALESCOPE_ATTENTION_PRODUCTS=blas", "SCALESCOPE_ATTENTION_PRODUCTS=blas: give tiles or"},
      {"SCALESCOPE_SIM_LINK_MBPS=fast", "SCALESCOPE_SIM_LINK_MBPS=fast: give a whole number"},
  };
  for (const Case& c : cases) {
    for (const char* command :
         {"train --model dense-100 --steps 1 --devices cpu:1", "models dense-100"}) {
      const scalescope::testing_util::CliResult r = run_cli(command, c.environment);
      EXPECT_EQ(r.status, 1) << c.environment << " " << command << " gave: " << r.output;
      EXPECT_TRUE(contains(r.output, c.message)) << c.environment << " gave: " << r.output;
      EXPECT_FALSE(contains(r.output, "step")) << r.output;
    }
  }
}

// To a CI job, compare's status 1 means "regression": a bad setting there is bad input, 2.
TEST(CliSettings, ABadSettingIsBadInputToCompare) {
  for (const char* environment : {"SCALESCOPE_ATTENTION=flsh", "SCALESCOPE_DENORMALS=some"}) {
    const scalescope::testing_util::CliResult r = run_cli("compare a.json b.json", environment);
    EXPECT_EQ(r.status, 2) << environment << " gave: " << r.output;
    EXPECT_TRUE(contains(r.output, environment)) << r.output;
  }
}

TEST(CliSettings, ANameMistypedIsNamedWithTheSettingMeant) {
  const scalescope::testing_util::CliResult r =
      run_cli("models dense-100", "SCALESCOPE_ATENTION=flash SCALESCOPE_ANCHORS_VENV=/v");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "SCALESCOPE_ATENTION is not a setting scalescope reads, so it changes "
                       "nothing: did you mean SCALESCOPE_ATTENTION?"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "SCALESCOPE_ANCHORS_VENV")) << r.output;
  EXPECT_FALSE(
      contains(run_cli("models dense-100", "SCALESCOPE_ATTENTION=flash").output, "not a setting"));
}

TEST(CliSettings, AMistypedNameIsNamedByTheFirstProcessOfALaunchAlone) {
  const auto output = [](const std::string& rank) {
    return run_cli("models dense-100", "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=" + rank +
                                           " SCALESCOPE_ATENTION=flash")
        .output;
  };
  EXPECT_TRUE(contains(output("0"), "SCALESCOPE_ATENTION is not a setting")) << output("0");
  EXPECT_FALSE(contains(output("1"), "not a setting")) << output("1");
  EXPECT_TRUE(contains(output("x"), "not a setting"));  // a launcher's nonsense: said once
}

}  // namespace
