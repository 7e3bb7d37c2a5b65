// `scalescope analyze FILE`: the input as a trace file of any format it reads (Kineto or
// scalescope Chrome trace JSON, gzip-compressed or not, an Nsight Systems SQLite export), its
// steps broken down and analysed, the tables, page and JSON written and the JSON read back; and
// the input as `compare` reads it (an analysis report, or a sweep report).
#include "reports/trace_analysis/analysis_output.h"
#include "reports/trace_analysis/analysis_report.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp("trace", fuzz::as_text(data, size));
  fuzz::accept_errors([&] {
    traces::AnalysisReport r;
    r.job = traces::read_job({path}, "");
    traces::analyze_report(r);
    (void)traces::format_analysis_tables(r);
    (void)traces::format_analysis_html(r);
    (void)traces::analysis_report_from_json(traces::to_json(r), "round trip");
  });
  fuzz::accept_errors([&] { (void)traces::read_comparable_report(path); });
  return 0;
}
