// The model's slowest layers (`sweep --profile-layers`) as a table: a row per layer, a column
// per profiled point, each cell the layer's forward + backward ms per step and its share of
// the point's layer time. Read along a row, it shows which layers stop scaling with the batch
// or the device count; the row of the rest sums the layers not shown.
//
// The table is <table data-layers>, its rows <tr data-layer="INDEX"> (the rest's
// data-layer="rest"), its cells <td data-point="LABEL" data-ms data-share>, with data-gflops
// and data-gbps where the layer's forward rates are known (shown beside the share: GB/s for a
// memory-bound layer, GFLOP/s for the others).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct LayersTableData {
  struct Cell {
    double ms = 0.0;     // forward + backward, mean per measured step
    double share = 0.0;  // of the point's layers' sum
    // The forward's rates (LayerTimeRecord): GB/s where memory-bound, GFLOP/s where known.
    std::optional<double> gflop_per_s{};
    std::optional<double> gb_per_s{};
  };
  struct Row {
    std::string layer;                       // its index in the model, or "rest"
    std::string name;                        // "transformer.h.0.attn CausalSelfAttention(4 heads)"
    std::vector<std::optional<Cell>> cells;  // per column; none where the point lacks it
  };
  // The profiled points of the model's `points` (one per device count and batch, as in the
  // other charts), report order: "cpu:2, batch 8/device".
  std::vector<std::string> columns;
  std::vector<double> column_ms;  // each point's layers' sum
  std::vector<Row> rows;          // slowest first by their time summed over the points
};

// Empty (no columns) when no point of the model has a layer profile.
LayersTableData prepare_layers(const ModelView& m, size_t top = 12);
// "" for a table without columns.
std::string draw_layers_table(const LayersTableData& d);

}  // namespace scalescope::html
