// What the HTML report shows of a sweep, model by model (the points of a model and the axes
// of its charts), and the text formatting and colours its charts and tables share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/phases.h"
#include "core/units.h"
#include "reports/sweep_report.h"

namespace scalescope::html {

// A point's batch as the charts group points: per device under weak scaling, global under
// strong scaling.
int64_t batch_key(const SweepPoint& p);
std::string batch_label(ScalingMode mode, int64_t batch);  // "batch 32/device"

// A section per model and precision: the charts of a section compare like with like.
struct ModelView {
  std::string name;   // the section's: the model, "... in bf16" beyond the devices' default
  std::string model;  // the model spec its points ran
  int index = 0;      // for page anchors
  ScalingMode mode = ScalingMode::kWeak;
  std::string device_kind;
  Precision precision = Precision::kFp32;  // its points'
  // Whether the model's points ran in more than one precision (each a section of its own).
  bool other_precisions = false;
  // Report order. Of points that differ only in their bucket caps or gradient compression,
  // `points` holds one: the uncompressed one's, of the default caps where measured (else the
  // first such); the bucket and compression charts show the others.
  std::vector<const SweepPoint*> points;
  std::vector<const SweepPoint*> all_points;
  std::vector<int> devices;      // ascending
  std::vector<int64_t> batches;  // ascending (weak: per device; strong: global)
  const CommunicationAnalysis* communication = nullptr;
  std::vector<const BucketChoice*> bucket_choices;            // report order
  std::vector<const CompressionEffect*> compression_effects;  // report order

  // The point of d devices and batch b; nullptr when the sweep has none.
  const SweepPoint* at(int d, int64_t b) const;
  // The points of one batch, by device count: of `points`, or of `all_points`.
  std::vector<const SweepPoint*> series(int64_t b, bool all = false) const;
  std::string batch_text(int64_t b) const { return batch_label(mode, b); }
  // A point within its model's section: "cpu:4, batch 32/device".
  std::string point_text(const SweepPoint& p) const;
};

// The report's models in order of first appearance. The views point into `report`.
std::vector<ModelView> models_of(const SweepReport& report);

// "12.3%".
std::string percent(double fraction, int decimals = 1);
// A share lost (positive) or gained (negative) in the waterfall: "−12.3%", "+2.0%". The
// typographic minus keeps the columns of a table aligned with the plus.
std::string signed_loss(double share);
// Three significant figures or so, without exponent: 0.123, 1.23, 12.3, 1234.
std::string short_number(double v);
std::string count_with_commas(int64_t n);  // "1,234,567"
std::string hex(Rgb c);                    // "#e69f00"
std::string tick_label(double v);          // 3 significant digits at most: 0.0156

// One colour per series (a batch size, a device count); distinct from one another in hue and
// lightness, and readable on white.
inline constexpr std::array<const char*, 7> kSeriesColors = {
    "#1f4e79", "#c2185b", "#2e7d32", "#6a3d9a", "#b15928", "#00838f", "#4d4d4d"};
// Colours the charts share: the ideal line and the ink of marks that are not data.
inline constexpr const char* kIdealColor = "#9aa0a6";
inline constexpr const char* kInkColor = "#1f2933";

}  // namespace scalescope::html
