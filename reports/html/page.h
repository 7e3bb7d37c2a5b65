// A sweep report as one self-contained HTML page (`scalescope sweep --html`, `scalescope
// report FILE --html`): the file a team opens in a browser, offline, and passes around.
//
// Per model: speedup against devices (measured, the ideal y = N, and the all-reduce model's
// projection, dashed), efficiency as a devices × batch heat map, the phases of every point as
// stacked bars (coloured as the NVTX phases are in Nsight), the efficiency-loss waterfall at
// the largest device count of each batch, the slowest layers per point where the sweep profiled
// them (--profile-layers), and the points as a table. Then every verdict, the
// failed points with their errors, the environment and the sweep's options.
//
// Self-contained: inline CSS and inline SVG drawn here, no script, no font, image or style
// sheet fetched from anywhere. Every text that comes from the report (model names, errors,
// environment values, the command line) is escaped.
//
// Each chart is an <svg> with data-chart = "speedup", "efficiency-heatmap", "phases" or
// "waterfall", data-model (and data-batch for waterfalls), and a <title>. Inside, for readers
// and tests: measured speedup markers are <circle data-point>, projected ones <circle
// data-projected>, projection lines <polyline data-projected="true"> (dashed); heat map cells
// <g data-cell>, one per point; phase bars <g data-bar>, one per successful point, of
// <rect data-phase> segments (an exposed phase's key, reports/phases.h, or "other");
// waterfall steps <rect data-step>, grey with data-noise="true" where the share is no loss
// beyond measurement noise. A fit that is not reliable draws no projection; the text under
// the charts says why (<span data-projection="unreliable">). Tables scroll sideways inside
// their own box (<div class="wide">), so the page fits a laptop's screen.
#pragma once

#include <string>

#include "reports/sweep_report.h"

namespace scalescope {

// REQUIRES: the report analysed (analyze(), or read_sweep_report, which analyses).
std::string format_sweep_html(const SweepReport& report);

// format_sweep_html written to `path` atomically (a reader never sees half a page). Throws
// Error naming the path when it cannot be written.
void write_sweep_html(const std::string& path, const SweepReport& report);

// The page's inline style sheet, for other pages that show its charts and tables (the page of
// `scalescope analyze`).
std::string html_page_style();

}  // namespace scalescope
