// A device list (`--devices cpu:4`, `cuda:2`, `4`): parsed, and printed back to a spec that
// parses to the same devices.
#include "core/device_spec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_errors([&] {
    const DeviceSpec spec = parse_device_spec(fuzz::as_text(data, size));
    const DeviceSpec again = parse_device_spec(to_string(spec));
    if (again.kind != spec.kind || again.count() != spec.count()) __builtin_trap();
  });
  return 0;
}
