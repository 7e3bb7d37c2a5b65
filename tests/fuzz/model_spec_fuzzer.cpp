// A model spec (`--models cnn:width=2,...` items): parsed, built into a definition and
// summarized (shapes, parameters, FLOPs) as `scalescope models` and the sweep do.
#include "models/zoo.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_errors([&] {
    const ModelDef def = make_model(fuzz::as_text(data, size));
    const ModelSummary s = summarize(def, def.default_input);
    if (s.params < 0 || s.forward_flops < 0) __builtin_trap();
    for (const LayerSpec& layer : def.layers) (void)describe(layer);
  });
  return 0;
}
