// A checkpoint's optimizer state file (<name>.optim.safetensors) beside valid weights, loaded
// with an Adam optimizer as `train --resume-from` does: metadata (kind, step) and one tensor per
// parameter and state.
#include "core/cpu/cpu_device.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static CpuDevice device(0, 1);
  static Model model(fuzz::tiny_model(), Shape{fuzz::kTinyInputs}, device, 1);
  static Optimizer optimizer(OptimizerConfig{}, model);
  static const std::string weights = [] {
    const std::string path = fuzz::temp_dir() + "/ckpt.safetensors";
    save_checkpoint(path, model);
    return path;
  }();
  fuzz::write_temp("ckpt.optim.safetensors", fuzz::as_text(data, size));
  fuzz::accept_errors([&] { load_checkpoint(weights, model, &optimizer); });
  return 0;
}
