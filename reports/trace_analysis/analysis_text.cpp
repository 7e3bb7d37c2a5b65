#include <fmt/format.h>

#include <iterator>

#include "reports/trace_analysis/analysis_output.h"
#include "reports/writers/table.h"

namespace scalescope::traces {
namespace {

void ranks_table(std::string& out, const AnalysisReport& r) {
  const JobSteps& job = r.job;
  fmt::format_to(std::back_inserter(out),
                 "{} ({} {}, {} rank{}; medians over the {} steps every rank has, ms)\n", r.name,
                 job.device() ? "device" : "host", "timelines", job.ranks.size(),
                 job.ranks.size() == 1 ? "" : "s", job.common_steps().size());
  fmt::format_to(std::back_inserter(out),
                 "{:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "rank", "step",
                 "compute", "comm", "exposed", "copy exp", "input", "idle", "h2d", "file");
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const StepBreakdown& m = r.spread.medians[i];
    fmt::format_to(
        std::back_inserter(out),
        "{:>5} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}  {}\n",
        job.ranks[i].rank, m.step_ms, m.compute_ms(), m.communication_ms,
        m.communication_exposed_ms, m.h2d_exposed_ms + m.copy_exposed_ms, m.input_ms, m.idle_ms,
        m.h2d_ms, job.ranks[i].file);
  }
  out +=
      "(comm: communication total; exposed: while no compute ran; copy exp: copies while "
      "neither ran; h2d: host-to-device copies total)\n";
  if (job.ranks.size() > 1) {
    fmt::format_to(std::back_inserter(out),
                   "slowest rank {}: compute {:+.2f} ms over the median rank's ({:.2f}x; the "
                   "straggler rule fires at {:.2f}x); step times across ranks differ by {:.2f} ms "
                   "(median over the steps)\n",
                   r.spread.slowest_rank, r.spread.compute_skew_ms, r.spread.compute_skew_ratio,
                   kStragglerRatio, r.spread.step_spread_ms);
  }
}

void verdict_lines(std::string& out, const SweepPoint& p) {
  fmt::format_to(std::back_inserter(out), "\nverdict for {}:\n", p.label());
  for (const Finding& f : p.summary.verdict.findings) {
    fmt::format_to(std::back_inserter(out), "  {} ({}): {}\n", f.kind, f.severity, f.explanation);
  }
}

}  // namespace

std::string format_analysis_tables(const AnalysisReport& report) {
  std::string out;
  ranks_table(out, report);
  out += format_sweep_tables(report.sweep);
  if (report.batch == 0) {
    out += "(no --batch given: samples/s counts steps of one sample per rank)\n";
  }
  verdict_lines(out, report.job_point());
  return out;
}

}  // namespace scalescope::traces
