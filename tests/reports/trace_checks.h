// What every Chrome trace of measured steps must satisfy, for the tests of constructed steps
// (tests/reports) and of a real run (tests/harness/trainer): valid Trace Event Format, a process
// per replica with its tracks named, events that do not overlap on a track, and each step's events
// carrying the step's phase times.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "reports/writers/trace.h"

namespace scalescope::testing_util {

inline void expect_trace_of(const nlohmann::json& trace, const std::vector<StepRecord>& steps) {
  ASSERT_TRUE(trace["traceEvents"].is_array());
  ASSERT_FALSE(steps.empty());
  const size_t replicas = steps.front().replicas.size();
  std::map<std::pair<int, int>, std::vector<const nlohmann::json*>> tracks;
  std::set<int> processes;
  std::set<std::pair<int, int>> named_tracks;
  // Per (replica, step, event name): summed duration, µs.
  std::map<std::tuple<int, int64_t, std::string>, double> durations;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    for (const char* key : {"name", "ph", "pid", "tid"}) ASSERT_TRUE(e.contains(key)) << e;
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") processes.insert(e["pid"].get<int>());
      if (e["name"] == "thread_name")
        named_tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("cat")) << e;
    ASSERT_TRUE(e["args"].contains("step")) << e;
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
    EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
    const int pid = e["pid"].get<int>();
    std::string name = e["name"];
    if (name.starts_with("allreduce bucket")) {
      EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0);
      EXPECT_EQ(e["tid"], trace_thread(Track::kCommunication));
      name = "bucket";
    }
    if (!name.starts_with("step")) tracks[{pid, e["tid"].get<int>()}].push_back(&e);
    durations[{pid, e["args"]["step"].get<int64_t>(), name}] += e["dur"].get<double>();
  }
  std::set<int> expected_processes;
  for (size_t r = 0; r < replicas; ++r) expected_processes.insert(static_cast<int>(r));
  EXPECT_EQ(processes, expected_processes);
  EXPECT_EQ(named_tracks.size(), 4 * replicas);
  // Every track's events (the enclosing step events aside) follow one another.
  for (auto& [track, events] : tracks) {
    for (size_t i = 1; i < events.size(); ++i) {
      const double end =
          (*events[i - 1])["ts"].get<double>() + (*events[i - 1])["dur"].get<double>();
      EXPECT_LE(end, (*events[i])["ts"].get<double>() + 1e-3)
          << "overlap on pid " << track.first << " tid " << track.second;
    }
  }
  // The events of a step are its phase times: each exposed phase by its label, the total
  // all-reduce as the buckets.
  for (const StepRecord& s : steps) {
    for (size_t r = 0; r < replicas; ++r) {
      const PhaseTimes& p = s.replicas[r];
      const int pid = static_cast<int>(r);
      const auto us = [&](const std::string& name) { return durations[{pid, s.step, name}]; };
      for (const PhaseDef& d : kPhases) {
        if (d.exposed) {
          EXPECT_NEAR(us(d.label), p[d.phase] * 1e3, 1e-6) << d.label;
        }
      }
      EXPECT_NEAR(us("bucket"), p[Phase::kAllReduce] * 1e3, 1e-3);
      EXPECT_NEAR(us("step " + std::to_string(s.step)), p.step_ms * 1e3, 1e-6);
    }
  }
}

}  // namespace scalescope::testing_util
