#include "reports/phases.h"

#include <algorithm>

#include "core/check.h"

namespace scalescope {

double PhaseValues::exposed_sum_ms() const {
  double sum = 0.0;
  for (const PhaseDef& d : kPhases) {
    if (d.exposed) sum += (*this)[d.phase];
  }
  return sum;
}

double PhaseValues::exposed_ms(PhaseKind kind) const {
  double sum = 0.0;
  for (const PhaseDef& d : kPhases) {
    if (d.exposed && d.kind == kind) sum += (*this)[d.phase];
  }
  return sum;
}

nlohmann::json to_json(const PhaseTimes& p, bool with_buckets) {
  nlohmann::json j = nlohmann::json::object();
  for (const PhaseDef& d : kPhases) j[d.json_key()] = p[d.phase];
  j["step_ms"] = p.step_ms;
  j["start_ms"] = p.start_ms;
  if (with_buckets) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const PhaseTimes::Interval& b : p.buckets) buckets.push_back({b.start_ms, b.ms});
    j["buckets"] = std::move(buckets);
    j["copy"] = {p.copy.start_ms, p.copy.ms};
  }
  return j;
}

PhaseTimes phase_times_from_json(const JsonReader& r) {
  PhaseTimes p;
  for (const PhaseDef& d : kPhases) {
    const std::optional<Phase> same = absent_means_same_as(d.phase);
    if (!r.has(d.json_key()) && (absent_means_zero(d.phase) || same)) {
      if (same) p[d.phase] = p[*same];
      continue;
    }
    p[d.phase] = r.number(d.json_key());
  }
  p.step_ms = r.number("step_ms");
  p.start_ms = r.number("start_ms");
  if (r.has("buckets")) {
    const nlohmann::json& buckets = r.array("buckets");
    for (size_t i = 0; i < buckets.size(); ++i) {
      const nlohmann::json& b = buckets[i];
      SS_CHECK(b.is_array() && b.size() == 2 && b[0].is_number() && b[1].is_number(),
               "'{}[{}]' must be a pair of numbers [start_ms, ms], not {}", r.name("buckets"), i,
               dump_json(b).substr(0, 60));
      p.buckets.push_back({b[0].get<double>(), b[1].get<double>()});
    }
  }
  if (r.has("copy")) {
    const nlohmann::json& c = r.array("copy");
    SS_CHECK(c.size() == 2 && c[0].is_number() && c[1].is_number(),
             "'{}' must be a pair of numbers [start_ms, ms]", r.name("copy"));
    p.copy = {c[0].get<double>(), c[1].get<double>()};
  }
  return p;
}

const PhaseTimes& slowest_replica(std::span<const PhaseTimes> replicas) {
  SS_CHECK(!replicas.empty(), "the slowest replica of a step with no replicas");
  return *std::max_element(
      replicas.begin(), replicas.end(),
      [](const PhaseTimes& a, const PhaseTimes& b) { return a.step_ms < b.step_ms; });
}

}  // namespace scalescope
