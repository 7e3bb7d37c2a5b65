// The phase schema: the table itself, the sums it drives, the named records of PhaseTimes and
// the replica that sets a step's time.
#include "reports/phases.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/nvtx.h"
#include "reports/run_report.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// Phase i takes 2^i ms: every sum of phases is a distinct number, so a sum that takes a
// wrong phase in or leaves one out cannot match by chance.
PhaseTimes powers_of_two() {
  PhaseTimes p;
  for (const PhaseDef& d : kPhases) p[d.phase] = static_cast<double>(1 << index_of(d.phase));
  return p;
}

TEST(Phases, TheTableIsInStepOrderWithUniqueKeys) {
  EXPECT_EQ(kPhaseCount, 10u);
  std::set<std::string> keys;
  std::set<std::string> labels;
  for (size_t i = 0; i < kPhaseCount; ++i) {
    EXPECT_EQ(index_of(kPhases[i].phase), i);
    EXPECT_EQ(&phase_def(kPhases[i].phase), &kPhases[i]);
    keys.insert(kPhases[i].key);
    labels.insert(kPhases[i].label);
  }
  EXPECT_EQ(keys.size(), kPhaseCount);
  EXPECT_EQ(labels.size(), kPhaseCount);
  EXPECT_EQ(phase_def(Phase::kH2D).json_key(), "h2d_ms");
  EXPECT_EQ(phase_def(Phase::kAllReduceExposed).json_key(), "allreduce_exposed_ms");
  // Both all-reduce phases are NVTX's all-reduce range, in its colour.
  EXPECT_EQ(nvtx::category(Phase::kAllReduceExposed).id, nvtx::category(Phase::kAllReduce).id);
  EXPECT_STREQ(nvtx::category(Phase::kAllReduceExposed).name, "allreduce");
  EXPECT_EQ(phase_color(Phase::kAllReduceExposed).red, phase_color(Phase::kAllReduce).red);
  EXPECT_FALSE(phase_def(Phase::kAllReduce).exposed);
  // So are the copy's: what the step waited for, and how long it ran (on the copy track).
  EXPECT_EQ(phase_def(Phase::kH2DTotal).json_key(), "h2d_total_ms");
  EXPECT_EQ(nvtx::category(Phase::kH2DTotal).id, nvtx::category(Phase::kH2D).id);
  EXPECT_FALSE(phase_def(Phase::kH2DTotal).exposed);
  EXPECT_EQ(phase_def(Phase::kH2DTotal).track, Track::kCopy);
  EXPECT_EQ(phase_def(Phase::kH2D).track, Track::kCompute);
}

TEST(Phases, ExposedSumsIterateExactlyTheExposedRows) {
  const PhaseTimes p = powers_of_two();
  // Every phase but the copy's total (1 << 2), the total all-reduce (1 << 5) and the gradient
  // cast (1 << 8): 1 + 2 + 8 + 16 + 64 + 128 + 512.
  EXPECT_DOUBLE_EQ(p.exposed_sum_ms(), 731.0);
  EXPECT_DOUBLE_EQ(p.exposed_ms(PhaseKind::kInput), 1.0 + 2.0);
  EXPECT_DOUBLE_EQ(p.exposed_ms(PhaseKind::kCompute), 8.0 + 16.0 + 128.0);
  // The exposed all-reduce and the batch-norm sync.
  EXPECT_DOUBLE_EQ(p.exposed_ms(PhaseKind::kCommunication), 64.0 + 512.0);
  double by_kind = 0.0;
  for (PhaseKind k : {PhaseKind::kInput, PhaseKind::kCompute, PhaseKind::kCommunication}) {
    by_kind += p.exposed_ms(k);
  }
  EXPECT_DOUBLE_EQ(by_kind, p.exposed_sum_ms());
}

TEST(Phases, NamedRecordsRoundTripWithAndWithoutBuckets) {
  PhaseTimes p = powers_of_two();
  p.step_ms = 112.5;
  p.start_ms = 1000.25;
  p.buckets = {{1001.0, 0.5}, {1002.0, 1.5}};
  p.copy = {999.0, 4.0};
  const nlohmann::json plain = to_json(p, false);
  EXPECT_EQ(plain.size(), kPhaseCount + 2);
  EXPECT_FALSE(plain.contains("buckets"));
  EXPECT_FALSE(plain.contains("copy"));
  EXPECT_EQ(plain["forward_ms"], 8.0);
  EXPECT_EQ(plain["allreduce_ms"], 32.0);
  EXPECT_EQ(plain["step_ms"], 112.5);
  const nlohmann::json with = to_json(p, true);
  EXPECT_EQ(with["buckets"], nlohmann::json::parse("[[1001.0, 0.5], [1002.0, 1.5]]"));
  for (const nlohmann::json& j : {plain, with}) {
    const nlohmann::json text = nlohmann::json::parse(j.dump());
    const PhaseTimes back = phase_times_from_json(JsonReader(text, "record"));
    for (const PhaseDef& d : kPhases) EXPECT_EQ(back[d.phase], p[d.phase]) << d.key;
    EXPECT_EQ(back.step_ms, p.step_ms);
    EXPECT_EQ(back.start_ms, p.start_ms);
    EXPECT_EQ(back.buckets.size(), j.contains("buckets") ? 2u : 0u);
  }
  const PhaseTimes back = phase_times_from_json(JsonReader(with, "record"));
  EXPECT_EQ(back.buckets[1].start_ms, 1002.0);
  EXPECT_EQ(back.buckets[1].ms, 1.5);
  EXPECT_EQ(back.copy.start_ms, 999.0);
  EXPECT_EQ(back.copy.ms, 4.0);
}

TEST(Phases, TheStrictReaderNamesWhatIsWrong) {
  const nlohmann::json good = to_json(powers_of_two(), true);
  const auto error = [&](const auto& damage) {
    nlohmann::json j = good;
    damage(j);
    return testing_util::error_of([&] { phase_times_from_json(JsonReader(j, "rank 3", "p")); });
  };
  EXPECT_EQ(error([](nlohmann::json&) {}), "<no error thrown>");
  for (const PhaseDef& d : kPhases) {
    if (absent_means_zero(d.phase) || absent_means_same_as(d.phase)) continue;
    EXPECT_CONTAINS(error([&](nlohmann::json& j) { j.erase(d.json_key()); }),
                    "rank 3: missing key 'p." + d.json_key() + "'");
  }
  // A phase added later reads as 0 from records written before it (they did not do its
  // work), and as itself when present.
  nlohmann::json old = good;
  old.erase(phase_def(Phase::kGradCast).json_key());
  EXPECT_EQ(phase_times_from_json(JsonReader(old, "rank 3", "p"))[Phase::kGradCast], 0.0);
  EXPECT_EQ(phase_times_from_json(JsonReader(good, "rank 3", "p"))[Phase::kGradCast],
            powers_of_two()[Phase::kGradCast]);
  // The copy's total, from records written before it: the exposed copy (no copy overlapped).
  old.erase(phase_def(Phase::kH2DTotal).json_key());
  EXPECT_EQ(phase_times_from_json(JsonReader(old, "rank 3", "p"))[Phase::kH2DTotal],
            powers_of_two()[Phase::kH2D]);
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["grad_cast_ms"] = "slow"; }),
                  "'p.grad_cast_ms' must be a number");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j.erase("start_ms"); }), "'p.start_ms'");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["h2d_ms"] = "fast"; }),
                  "'p.h2d_ms' must be a number");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["buckets"] = nlohmann::json::parse("[[1.0]]"); }),
                  "'p.buckets[0]' must be a pair of numbers");
}

TEST(Phases, TheSlowestReplicaSetsTheStepFirstOfEquals) {
  std::vector<PhaseTimes> replicas(4);
  const double steps[] = {9.0, 11.0, 11.0, 10.0};
  for (size_t r = 0; r < replicas.size(); ++r) {
    replicas[r].step_ms = steps[r];
    replicas[r][Phase::kInput] = static_cast<double>(r);
  }
  const PhaseTimes& slowest = slowest_replica(replicas);
  EXPECT_EQ(&slowest, &replicas[1]);
  EXPECT_THROW(slowest_replica({}), Error);
  // The group's step figures come from it.
  StepRecord s;
  s.replicas = replicas;
  s.replicas[1][Phase::kH2D] = 0.25;
  set_group_times(s);
  EXPECT_EQ(s.step_ms, 11.0);
  EXPECT_EQ(s.input_ms, 1.25);
}

}  // namespace
}  // namespace scalescope
