// What `scalescope analyze` shows of an analysis report: terminal tables and a self-contained
// HTML page. Both reuse the sweep's own outputs for what they share with it (the sweep tables
// of the job and its baseline, the phases bars and the efficiency-loss waterfall).
#pragma once

#include <string>

#include "reports/trace_analysis/analysis_report.h"

namespace scalescope::traces {

// Per rank the step breakdown's medians, the slowest rank and the skew, then the sweep tables
// of the job (and baseline) and the job's verdict.
std::string format_analysis_tables(const AnalysisReport& report);

// One HTML page, offline (inline CSS and SVG, no script): the ranks and their steps, where the
// step goes (reports/html/phases_chart.h), with a baseline the waterfall of the efficiency lost
// (reports/html/waterfall_chart.h), and the verdict. Text from the traces is escaped. The
// sections carry data-section ("ranks", "steps", "charts", "verdict").
std::string format_analysis_html(const AnalysisReport& report);
// Atomic; throws Error naming the path.
void write_analysis_html(const std::string& path, const AnalysisReport& report);

}  // namespace scalescope::traces
