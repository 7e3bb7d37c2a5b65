// Where the step goes, one model: a horizontal stacked bar per point, grouped by batch, of
// the slowest replica's exposed phases (medians over the measured steps) and "other", the
// step time outside them. Phases take the NVTX timeline's colours, so that a bar here and a
// range in Nsight Systems read the same.
#pragma once

#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct PhasesData {
  // A kind of segment: an exposed phase of the schema, or "other" (last).
  struct Segment {
    std::string key;  // data-phase: the phase's key
    std::string label;
    std::string color;
  };
  struct Row {
    std::string label;          // the point's
    std::string name;           // on the axis: "cpu:2 · batch 32/device"
    bool batch_starts = false;  // the first row of its batch (a gap above, but for the first)
    bool ok = true;
    std::string error;       // !ok
    std::vector<double> ms;  // per segment, ms; empty unless ok
    double step_ms = 0;
  };
  std::string model;
  std::vector<Segment> segments;
  std::vector<Row> rows;
  double x_max = 1;  // the longest bar or step, ms (1 when there is none)
};

PhasesData prepare_phases(const ModelView& m);
std::string draw_phases(const PhasesData& d);

}  // namespace scalescope::html
