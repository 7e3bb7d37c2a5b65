// `scalescope compare BASELINE CURRENT`: the input is two sweep reports separated by "\n--\n"
// (or one report compared with itself), each read strictly, compared, and both tables formatted.
#include "reports/compare/compare.h"
#include "reports/compare/format.h"
#include "reports/sweep_report.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [first, second] = fuzz::split_two(fuzz::as_text(data, size));
  const std::string baseline = fuzz::write_temp("baseline.json", first);
  const std::string current = fuzz::write_temp("current.json", second);
  fuzz::accept_errors([&] {
    const SweepReport a = read_sweep_report(baseline);
    const SweepReport b = read_sweep_report(current);
    const Comparison c = compare_reports(a, b, CompareOptions{}, baseline, current);
    (void)format_comparison_table(c);
    (void)format_comparison_markdown(c);
  });
  return 0;
}
