// A sweep report through the strict reader (read_sweep_report, which analyzes it), then
// written back as JSON, as `scalescope report` and `sweep --resume` do.
#include "reports/sweep_report.h"
#include "reports/table.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp("report.json", fuzz::as_text(data, size));
  fuzz::accept_errors([&] {
    SweepReport report = read_sweep_report(path);
    analyze(report);
    write_sweep_report(fuzz::temp_dir() + "/written.json", report);
  });
  return 0;
}
