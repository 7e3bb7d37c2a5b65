// A sweep report across the processes of a launch: what the verdict of a CPU point counts its
// threads against, from the processes' recorded CPU sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "reports/analysis/sweep_analysis.h"
#include "reports/sweep_report.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::make_point;
using testing_util::PointSpec;
using testing_util::report_of;

// Across processes, a point's threads count against the cores of the processes that run on the
// same ones (their recorded CPU sets): unbound processes of a node share its cores, processes
// bound to cores of their own, or on other nodes, do not.
TEST(SweepReport, AcrossProcessesThreadsCountOnTheCoresTheProcessesShare) {
  PointSpec one{.input = 0, .forward = 0.4, .backward = 0.5};
  PointSpec two = one;
  two.devices = 2;
  two.step_ms = 10.0 / (1.0 - 0.229);
  two.backward = 0.4;
  SweepReport base = report_of({make_point(one), make_point(two)});
  base.config = {{"workers", 0}};
  base.environment.host.usable_cores = 64;  // rank 0's: not what the processes shared
  const auto verdict = [&](std::vector<std::pair<int, std::string>> members, int threads) {
    SweepReport r = base;
    r.cluster = ClusterInfo{};
    r.cluster->processes = 2;
    r.cluster->replicas_per_process = 1;
    for (const auto& [node, cpus] : members) {
      const int rank = static_cast<int>(r.cluster->members.size());
      r.cluster->members.push_back(
          {.rank = rank, .hostname = "h", .node = node, .local_rank = rank, .cpus = cpus});
      r.cluster->nodes = std::max(r.cluster->nodes, node + 1);
    }
    for (SweepPoint& p : r.points) {
      p.threads_per_device = threads;
      p.communication_threads_per_device = 0;
    }
    analyze(r);
    return sweep_report_from_json(to_json(r), "test").points[1].summary.verdict;
  };
  const Verdict shared = verdict({{0, "0-1"}, {0, "0-1"}}, 2);
  EXPECT_EQ(shared.top().kind, "oversubscribed");
  EXPECT_CONTAINS(shared.top().explanation,
                  "2 replicas x 2 compute threads = 4 threads on 2 usable cores");
  const Verdict fits = verdict({{0, "0-1"}, {0, "0-1"}}, 1);
  EXPECT_EQ(fits.top().kind, "contention");
  EXPECT_CONTAINS(fits.top().explanation,
                  "2 replicas x (1 compute + 0 input + 0 communication "
                  "threads) = 2 threads on 2");
  const Verdict bound = verdict({{0, "0"}, {0, "1"}}, 2);
  EXPECT_CONTAINS(bound.top().explanation,
                  "1 replicas x 2 compute threads = 2 threads on 1 usable cores");
  const Verdict own = verdict({{0, "0-1"}, {0, "2-3"}}, 2);
  EXPECT_EQ(own.top().kind, "contention");
  const Verdict nodes = verdict({{0, "0-1"}, {1, "0-1"}}, 2);
  EXPECT_EQ(nodes.top().kind, "contention");
  EXPECT_CONTAINS(nodes.top().explanation, "1 replicas x (2 compute");
  // Reports before 1.20 record no CPU sets: no thread count, as before.
  EXPECT_FALSE(verdict({{0, ""}, {0, ""}}, 2).top().numbers.contains("threads"));
  // A CPU set that is not one is refused by name.
  nlohmann::json bad = to_json(base);
  bad["cluster"] = {
      {"processes", 2},
      {"nodes", 1},
      {"replicas_per_process", 1},
      {"members",
       {{{"rank", 0}, {"hostname", "h"}, {"node", 0}, {"local_rank", 0}},
        {{"rank", 1}, {"hostname", "h"}, {"node", 0}, {"local_rank", 1}, {"cpus", "3-1"}}}},
      {"environments", nlohmann::json::array()}};
  EXPECT_CONTAINS(testing_util::error_of([&] { (void)sweep_report_from_json(bad, "r.json"); }),
                  "cluster.members[1].cpus: CPU set '3-1'");
}

}  // namespace
}  // namespace scalescope
