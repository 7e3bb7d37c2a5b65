// The run report's records as they cross processes (a process's replicas' phases and losses,
// the group's evaluations, bucket timings, all-reduce split, kernel choices, GPU utilisation:
// reports/run_report.cpp's readers), read by add_results as the trainer does.
#include "harness/trainer/results.h"
#include "reports/json_reader.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_errors([&] {
    const nlohmann::json message = parse_json(fuzz::as_text(data, size), "fuzz message");
    RunResults results(2);
    add_results(results, message, "host", "the results of process 1");
  });
  return 0;
}
