// NVTX's categories come from the phase table: a category per phase that has one of its own,
// named by its key and in its colour, which the phases sharing it point to; and the two that
// are not phases.
#include "core/phases.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/nvtx.h"

namespace scalescope {
namespace {

std::string name_and_color(const nvtx::Category& c) {
  return fmt::format("{} #{:02x}{:02x}{:02x}", c.name, c.color.red, c.color.green, c.color.blue);
}

TEST(PhaseTable, NvtxCategoriesAreThePhasesOwnPlusStepAndProfile) {
  std::set<std::string> from_table;
  for (const PhaseDef& d : kPhases) {
    if (d.nvtx.of) continue;
    const Rgb c = d.nvtx.color;
    from_table.insert(fmt::format("{} #{:02x}{:02x}{:02x}", d.key, c.red, c.green, c.blue));
  }
  from_table.insert("step #787878");
  from_table.insert("profile #000000");
  std::set<std::string> registered;
  std::set<uint32_t> ids;
  for (const nvtx::Category& c : nvtx::kCategories) {
    registered.insert(name_and_color(c));
    ids.insert(c.id);
  }
  EXPECT_EQ(registered, from_table);
  EXPECT_EQ(ids.size(), nvtx::kCategories.size());
  EXPECT_EQ(ids.count(0), 0u) << "NVTX's category 0 is no category";
}

TEST(PhaseTable, APhaseRangeCarriesItsOwnCategoryOrTheOneItShares) {
  for (const PhaseDef& d : kPhases) {
    const nvtx::Category c = nvtx::category(d.phase);
    const PhaseDef& owner = phase_def(d.nvtx.of.value_or(d.phase));
    EXPECT_STREQ(c.name, owner.key) << d.key;
    EXPECT_EQ(name_and_color(c), name_and_color(nvtx::category(owner.phase))) << d.key;
    EXPECT_EQ(phase_color(d.phase).blue, owner.nvtx.color.blue) << d.key;
  }
  EXPECT_STREQ(nvtx::category(Phase::kAllReduceExposed).name, "allreduce");
  EXPECT_STREQ(nvtx::category(Phase::kH2DTotal).name, "h2d");
  EXPECT_STREQ(nvtx::category(Phase::kBatchNormSync).name, "batchnorm_sync");
}

}  // namespace
}  // namespace scalescope
