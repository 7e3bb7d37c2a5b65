// Efficiency heat map, one model: rows batches, columns device counts, a labelled cell per
// point, coloured red (0%) through yellow to green (100% and above).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct HeatmapData {
  struct Cell {
    enum class State { kMissing, kFailed, kUnknown, kOk };
    State state = State::kMissing;  // kMissing: no such point in the sweep
    std::string label;              // the point's
    std::string error;              // kFailed
    Interval efficiency;            // kOk
    std::optional<double> speedup;  // kOk
  };
  std::string model;
  std::string device_kind;
  std::vector<int> devices;                // columns, ascending
  std::vector<std::string> batches;        // rows, as text
  std::vector<std::vector<Cell>> cells{};  // [row][column]
};

HeatmapData prepare_heatmap(const ModelView& m);
std::string draw_heatmap(const HeatmapData& d);

// Efficiency → cell colour, "#rrggbb": red at 0 through yellow (0.5) to green at 1 and above.
std::string efficiency_color(double efficiency);

}  // namespace scalescope::html
