// A sweep report with one model per edge case of the HTML report, for the tests of its page
// and charts.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reports/analysis/sweep_analysis.h"
#include "reports/html/view.h"
#include "reports/sweep_report.h"
#include "tests/reports/sweep_fixtures.h"

namespace scalescope::html_testing {

// A point whose every step takes `step_ms`: input 10%, h2d 5%, forward 25%, backward 35%,
// exposed all-reduce 10% (N > 1), optimizer 5%, the rest unaccounted ("other"); two buckets.
inline testing_util::PointSpec constant_spec(const std::string& model, int devices, int64_t batch,
                                             double step_ms) {
  return {.model = model,
          .devices = devices,
          .batch = batch,
          .steps = 8,
          .step_ms = step_ms,
          .input = 0.1,
          .h2d = 0.05,
          .forward = 0.25,
          .backward = 0.35,
          .optimizer = 0.05,
          .params = 1234567};
}

inline SweepPoint constant_point(const std::string& model, int devices, int64_t batch,
                                 double step_ms) {
  return testing_util::make_point(constant_spec(model, devices, batch, step_ms));
}

inline SweepPoint failed_point(const std::string& model, int devices, int64_t batch,
                               const std::string& error) {
  return testing_util::failed_point(constant_spec(model, devices, batch, 1.0), error);
}

inline const std::string kHostile = "<script>alert(1)</script>";

// Four models, one per edge case:
//   cnn       devices 1, 2, 4 × batch 16, 32: every chart, projections, two waterfalls
//   <script>  devices 1 (ok), 2 (failed) × batch 8: a failed point, no waterfall
//   solo      devices 1 × batch 8: one device count and one batch
//   nobase    devices 2, 4 × batch 8: no one-device point, so no speedup or efficiency
inline SweepReport sample_report() {
  SweepReport r;
  r.tool_version = "0.1.0";
  r.created = "2026-01-01T00:00:00Z";
  r.config = {{"models", {"cnn", kHostile}}, {"note", "</pre><b>x</b>"}};
  r.environment.captured_at = "2026-01-01T00:00:00Z";
  r.environment.command_line = "scalescope sweep --models 'a&b' " + kHostile;
  r.environment.host.hostname = "host<1>";
  r.environment.host.cpu_model = "Test CPU @ 3.0GHz";
  r.environment.host.logical_cores = 8;
  r.environment.host.usable_cores = 4;
  r.environment.host.memory_bytes = int64_t{16} << 30;
  r.environment.host.os = "Debian GNU/Linux 12 (bookworm)";
  r.environment.gpu_error = "built without CUDA";
  r.environment.libraries.onednn = "3.0.0 (abc)";
  r.environment.build.git_commit = std::string(40, 'a');
  r.environment.build.git_dirty = true;
  r.environment.env_vars = {{"OMP_NUM_THREADS", "\"4\" & more"}};
  for (int64_t b : {16, 32}) {
    r.points.push_back(constant_point("cnn", 1, b, 10.0));
    r.points.push_back(constant_point("cnn", 2, b, 12.0));
    r.points.push_back(constant_point("cnn", 4, b, 14.0));
  }
  r.points.push_back(constant_point(kHostile, 1, 8, 5.0));
  r.points.push_back(failed_point(kHostile, 2, 8, "out of memory <& 'quotes'>"));
  r.points.push_back(constant_point("solo", 1, 8, 3.0));
  r.points.push_back(constant_point("nobase", 2, 8, 6.0));
  r.points.push_back(constant_point("nobase", 4, 8, 7.0));
  r.complete = true;
  analyze(r);
  return r;
}

// sample_report() and its models' views (which point into it).
class SampleModels {
 public:
  SampleModels() : report_(sample_report()), models_(html::models_of(report_)) {}
  SampleModels(const SampleModels&) = delete;
  SampleModels& operator=(const SampleModels&) = delete;

  const html::ModelView& operator[](const std::string& name) const {
    for (const html::ModelView& m : models_) {
      if (m.name == name) return m;
    }
    throw std::invalid_argument("no model " + name);
  }

 private:
  SweepReport report_;
  std::vector<html::ModelView> models_;
};

}  // namespace scalescope::html_testing
