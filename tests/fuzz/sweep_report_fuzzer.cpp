// A sweep report through the strict reader (read_sweep_report, which analyzes it), then
// written back as JSON, as `sweep --resume` does.
#include "reports/analysis/sweep_analysis.h"
#include "reports/json_reader.h"
#include "reports/sweep_report.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp("report.json", fuzz::as_text(data, size));
  fuzz::accept_errors([&] {
    SweepReport report = read_sweep_report(path);
    analyze(report);
    // What write_sweep_report writes, without its fsync (slower than the parsing).
    (void)dump_json(to_json(report), 1);
  });
  return 0;
}
