// A CIFAR-10 binary file as the eval split of open_dataset("cifar10:DIR"), every sample read.
#include <filesystem>
#include <vector>

#include "pipelines/cifar10.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d = fuzz::temp_dir() + "/cifar10";
    std::filesystem::create_directories(d);
    return d;
  }();
  fuzz::write_temp("cifar10/test_batch.bin", fuzz::as_text(data, size));
  fuzz::accept_errors([&] {
    const std::unique_ptr<Dataset> set = open_cifar10_dataset(dir, Split::kEval);
    std::vector<float> input(static_cast<size_t>(set->sample_shape().numel()));
    float label = 0.0f;
    for (int64_t i = 0; i < set->size(); ++i) set->read(i, input.data(), &label);
    if (label < 0.0f || label >= 10.0f) __builtin_trap();
  });
  return 0;
}
