// The slowest-layers table of the HTML page: rows by the layers' time summed over the profiled
// points, a cell per point with its ms, share and forward rate, the rest summed, the names
// escaped, and no table for a model without a profile.
#include "reports/html/layers_table.h"

#include <gtest/gtest.h>

#include "reports/html/page.h"
#include "tests/reports/html/html_fixtures.h"
#include "tests/test_util.h"

namespace scalescope::html {
namespace {

using html_testing::constant_point;
using testing_util::count_of;

LayerTimeRecord layer(int index, const std::string& name, double forward_ms, double backward_ms) {
  return {index, name, forward_ms, backward_ms, 0};
}

// m at batch 8 and 16 on one device: at 8 the attention (layer 2) is the slowest; at 16 the
// MLP (layer 3) is, and summed over both it is the slowest. Layer 4 is at batch 16 only.
SweepReport profiled_report() {
  SweepReport r;
  r.points = {constant_point("m", 1, 8, 10.0), constant_point("m", 1, 16, 20.0),
              constant_point("plain", 1, 8, 10.0)};
  r.points[0].layer_profile = {layer(1, "embed", 0.5, 0.5), layer(2, "attn <b>", 2.0, 2.0),
                               layer(3, "mlp", 1.0, 2.0)};
  r.points[1].layer_profile = {layer(1, "embed", 1.0, 1.0), layer(2, "attn <b>", 2.5, 2.5),
                               layer(3, "mlp", 3.0, 5.0), layer(4, "head", 1.0, 1.0)};
  analyze(r);
  return r;
}

TEST(LayersTable, RowsBySummedTimeACellPerPointAndTheRest) {
  const SweepReport r = profiled_report();
  const std::vector<ModelView> models = models_of(r);
  const LayersTableData d = prepare_layers(models.at(0), 2);
  ASSERT_EQ(d.columns.size(), 2u);
  EXPECT_EQ(d.column_ms, (std::vector<double>{8.0, 17.0}));
  ASSERT_EQ(d.rows.size(), 3u);
  EXPECT_EQ(d.rows[0].layer, "3");  // 3 + 8 ms
  EXPECT_EQ(d.rows[1].layer, "2");  // 4 + 5 ms
  ASSERT_TRUE(d.rows[0].cells[0] && d.rows[0].cells[1]);
  EXPECT_DOUBLE_EQ(d.rows[0].cells[0]->ms, 3.0);
  EXPECT_DOUBLE_EQ(d.rows[0].cells[0]->share, 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(d.rows[0].cells[1]->share, 8.0 / 17.0);
  const LayersTableData::Row& rest = d.rows[2];
  EXPECT_EQ(rest.layer, "rest");
  EXPECT_EQ(rest.name, "2 other layers");
  EXPECT_DOUBLE_EQ(rest.cells[0]->ms, 1.0);  // embed
  EXPECT_DOUBLE_EQ(rest.cells[1]->ms, 4.0);  // embed and head
  EXPECT_TRUE(prepare_layers(models.at(1)).columns.empty());
}

TEST(LayersTable, APointWithoutTheLayerGetsADash) {
  const SweepReport r = profiled_report();
  const LayersTableData d = prepare_layers(models_of(r).at(0), 4);
  ASSERT_EQ(d.rows.size(), 4u);  // every layer shown: no rest row
  EXPECT_EQ(d.rows[3].layer, "4");
  EXPECT_FALSE(d.rows[3].cells[0]);
  const std::string table = draw_layers_table(d);
  EXPECT_EQ(count_of(table, "<tr data-layer="), 4u);
  EXPECT_EQ(count_of(table, "data-ms="), 7u);
  EXPECT_EQ(count_of(table, "&ndash;"), 1u);
}

// Beside the share, the forward's rate: GB/s for a memory-bound layer (an add: 1 FLOP per 12
// bytes), GFLOP/s for the others, nothing where the FLOPs are unknown.
TEST(LayersTable, ACellShowsWhatBoundsTheLayersForward) {
  SweepReport r = profiled_report();
  r.points[0].layer_profile[2].forward_flops = 2'000'000'000;  // mlp: 1 ms forward
  r.points[0].layer_profile[1].forward_flops = 1'000'000;      // attn: 2 ms, 12 MB
  r.points[0].layer_profile[1].forward_bytes = 12'000'000;
  const LayersTableData d = prepare_layers(models_of(r).at(0), 4);
  const LayersTableData::Cell& mlp = *d.rows[0].cells[0];
  ASSERT_TRUE(mlp.gflop_per_s);
  EXPECT_DOUBLE_EQ(*mlp.gflop_per_s, 2000.0);
  EXPECT_FALSE(mlp.gb_per_s);
  const LayersTableData::Cell& attn = *d.rows[1].cells[0];
  ASSERT_TRUE(attn.gb_per_s);
  EXPECT_DOUBLE_EQ(*attn.gb_per_s, 6.0);
  EXPECT_FALSE(d.rows[0].cells[1]->gflop_per_s);  // no FLOPs recorded at batch 16
  const std::string table = draw_layers_table(d);
  EXPECT_EQ(count_of(table, "data-gflops="), 2u);
  EXPECT_EQ(count_of(table, "data-gbps=\"6.0\""), 1u);
  EXPECT_EQ(count_of(table, "&middot; 2000 GFLOP/s"), 1u);
  EXPECT_EQ(count_of(table, "&middot; 6.00 GB/s"), 1u);
}

TEST(LayersTable, OnlyProfiledModelsGetTheTableOnThePageEscaped) {
  const std::string page = format_sweep_html(profiled_report());
  EXPECT_EQ(count_of(page, "<table data-layers>"), 1u);
  EXPECT_EQ(count_of(page, "Slowest layers"), 1u);
  EXPECT_NE(page.find("attn &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(page.find("attn <b>"), std::string::npos);
  EXPECT_NE(page.find("data-share=\"0.4706\""), std::string::npos);  // mlp at 16: 8 of 17 ms
}

}  // namespace
}  // namespace scalescope::html
