// The Chrome trace writer's string escaping: the point's label (model spec, devices: user text)
// goes into the trace's JSON. The output must be valid JSON whatever the bytes, and give the
// label back exactly when it is valid UTF-8.
#include "reports/writers/trace.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

namespace {

bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  TraceInfo info;
  info.label = std::string(fuzz::as_text(data, size));
  info.bucket_bytes = {1024};
  StepRecord step;
  step.step = 1;
  step.replicas.resize(1);
  step.replicas[0].buckets.push_back({0.5, 1.0});
  const std::string text = chrome_trace_text({step}, info);
  const nlohmann::json back = nlohmann::json::parse(text);  // throws (a finding) if invalid
  const nlohmann::json& point = back.at("otherData").at("point");
  if (!point.is_string()) __builtin_trap();
  if (valid_utf8(info.label) && point.get<std::string>() != info.label) __builtin_trap();
  return 0;
}
