// The analysis of a sweep report: what its samples say, filled into the report's summaries
// (reports/analysis/sweep_analysis.cpp, reports/analysis/compression_analysis.cpp; the rules in
// reports/analysis/scaling.h).
#pragma once

#include <vector>

#include "reports/sweep_report.h"

namespace scalescope {

// Fills every point's summary and the communication analysis from the samples.
void analyze(SweepReport& report);
// The step times of every measured step of every repeat, in order; throws Error when there
// are none.
std::vector<double> pooled_step_ms(const SweepPoint& point);
// One effect per group of analysed points (summaries filled) that differ only in their
// compression and include an uncompressed one, in the order of the groups' first points.
std::vector<CompressionEffect> analyze_compression(const std::vector<SweepPoint>& points);

}  // namespace scalescope
