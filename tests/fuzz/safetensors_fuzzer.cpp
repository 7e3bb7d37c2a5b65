// A checkpoint's weights file: read_safetensors, then loaded into a model as `train
// --resume-from` does (names and shapes matched against the model).
#include "core/cpu/cpu_device.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static CpuDevice device(0, 1);
  static Model model(fuzz::tiny_model(), Shape{fuzz::kTinyInputs}, device, 1);
  const std::string path = fuzz::write_temp("weights.safetensors", fuzz::as_text(data, size));
  fuzz::accept_errors([&] {
    const SafetensorsFile file = read_safetensors(path);
    for (const NamedTensor& t : file.tensors) {
      if (static_cast<int64_t>(t.data.size()) != t.shape.numel()) __builtin_trap();
    }
  });
  fuzz::accept_errors([&] { load_checkpoint(path, model); });
  return 0;
}
