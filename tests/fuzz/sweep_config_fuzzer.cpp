// A sweep config file (`scalescope sweep --config FILE`): read by CLI11 through JsonConfig
// into the sweep's option declarations, settled and checked; when the input is a JSON object it
// is also given as a report's "config" block, as `sweep --resume` does.
#include "harness/cli/option_app.h"
#include "harness/sweep/options.h"
#include "reports/json_reader.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  const std::string path = fuzz::write_temp("config.json", text);
  fuzz::accept_errors([&] {
    SweepOptions options;
    OptionList list;
    add_sweep_options(list, options);
    cli::parse_with_config(list, {"--config", path});
    (void)dump_json(sweep_config_json(options));
  });
  const nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return 0;
  fuzz::accept_errors([&] {
    SweepOptions options;
    OptionList list;
    add_sweep_options(list, options);
    cli::parse_with_config(list, {}, &config, "report.json (its config)");
  });
  return 0;
}
