// Checkpoints and PyTorch: what we save loads into the equivalent PyTorch module with
// strict=True (torchvision's for the ImageNet ResNets) and gives our forward, and what PyTorch
// saves loads back into our model (tests/models/torch_interop.py is PyTorch's side).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/cpu/cpu_device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/zoo.h"
#include "tests/models/checkpoint_files.h"

namespace scalescope {
namespace {

namespace fs = std::filesystem;

using testing_util::random_values;
using testing_util::TempDir;

bool torch_available() {
  static const bool available =
      std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  return available;
}

std::string interop_script() {
  if (const char* dir = std::getenv("SCALESCOPE_SOURCE_DIR")) {
    return (fs::path(dir) / "tests" / "models" / "torch_interop.py").string();
  }
  return (fs::path(__FILE__).parent_path() / "torch_interop.py").string();
}

// Runs a command; returns its exit status and appends its output to `output`.
int run_command(const std::string& command, std::string& output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  return ::pclose(pipe);
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

std::vector<float> device_to_host(Device& device, const float* src, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  device.copy_to_host(host.data(), src, host.size() * sizeof(float), device.default_stream());
  device.default_stream().synchronize();
  return host;
}

struct InteropCase {
  const char* name;
  const char* model;
  Shape input;
  // For the training-mode outputs (evaluation mode always has 1e-4): batch norm over very few
  // values per channel amplifies fp32 rounding (torch_interop.py's TRAIN_TOLERANCE).
  float train_tolerance = 1e-4f;
};

class TorchInterop : public testing::TestWithParam<InteropCase> {};

// `count` input values for `model`: random, or token ids for a sequence model.
std::vector<float> interop_input(const Model& model, int64_t count) {
  std::vector<float> x = random_values(count, 7);
  if (const int64_t vocab = input_vocab(model.def()); vocab > 0) {
    Rng rng(7);
    for (float& v : x) v = static_cast<float>(rng.below(static_cast<uint64_t>(vocab)));
  }
  return x;
}

// The model's forward of `batch` samples `x` as torch_interop.py reads it: "input", "output" in
// training mode and, for a model with buffers, "output_eval" in evaluation mode (with the
// running statistics the training forward just moved, as the checkpoint has them).
SafetensorsFile forward_io(Model& model, const Tensor& input, const std::vector<float>& x,
                           int64_t batch) {
  Stream& stream = model.device().default_stream();
  const Shape out_shape = model.output_shape().with_batch(batch);
  model.forward(input.data(), batch, stream);
  stream.synchronize();
  SafetensorsFile io{
      {{"input", input.shape(), x},
       {"output", out_shape, device_to_host(model.device(), model.output(), out_shape.numel())}},
      {}};
  if (!model.buffer_infos().empty()) {
    model.forward(input.data(), batch, stream, /*training=*/false);
    stream.synchronize();
    io.tensors.push_back({"output_eval", out_shape,
                          device_to_host(model.device(), model.output(), out_shape.numel())});
  }
  return io;
}

const NamedTensor* find_tensor(const SafetensorsFile& file, const std::string& name) {
  const auto t = std::find_if(file.tensors.begin(), file.tensors.end(),
                              [&](const NamedTensor& nt) { return nt.name == name; });
  return t == file.tensors.end() ? nullptr : &*t;
}

// The model holds exactly the weights and buffers of `torch_file`, every weight changed from
// `old_weights` (PyTorch's training forwards also moved the running statistics).
void expect_torch_state(const Model& model, const std::vector<std::vector<float>>& old_weights,
                        const SafetensorsFile& torch_file) {
  const auto loaded = model.weights_to_host();
  ASSERT_EQ(loaded.size(), model.params().size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    const NamedTensor* t = find_tensor(torch_file, model.params()[i].name);
    ASSERT_NE(t, nullptr) << model.params()[i].name;
    EXPECT_EQ(loaded[i], t->data) << t->name;
    EXPECT_NE(loaded[i], old_weights[i]) << t->name << " was not changed by the script";
  }
  const auto buffers = model.buffers_to_host();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const NamedTensor* t = find_tensor(torch_file, model.buffer_infos()[i].name);
    ASSERT_NE(t, nullptr) << model.buffer_infos()[i].name;
    EXPECT_EQ(buffers[i], t->data) << t->name;
  }
}

// Our forward equals PyTorch's on the checkpoint we wrote (loaded strictly), and weights
// PyTorch changed and wrote load back into our model and give PyTorch's forward again.
TEST_P(TorchInterop, CheckpointLoadsIntoPyTorchAndBack) {
  if (!torch_available()) {
    GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3 (Debian: apt install "
                    "python3-torch); the interop test needs it";
  }
  const InteropCase& c = GetParam();
  const std::string script = interop_script();
  ASSERT_TRUE(fs::exists(script)) << script;
  TempDir dir;
  CpuDevice device(0, 2);
  device.make_current();
  Model model(make_model(c.model), c.input, device, 42);
  const int64_t batch = 4;
  const std::vector<float> x = interop_input(model, c.input.with_batch(batch).numel());
  Tensor input(device, c.input.with_batch(batch));
  input.copy_from_host(x);
  const std::string weights = dir.file("model.safetensors");
  const std::string io = dir.file("io.safetensors");
  const std::string new_weights = dir.file("torch.safetensors");
  const std::string new_io = dir.file("torch_io.safetensors");
  write_safetensors(io, forward_io(model, input, x, batch));
  save_checkpoint(weights, model);

  std::string output;
  const int status =
      run_command(fmt::format("/usr/bin/python3 {} {} {} {} {} {} {}", quoted(script),
                              quoted(c.model), quoted(weights), quoted(io), quoted(new_weights),
                              quoted(new_io), c.train_tolerance),
                  output);
  ASSERT_EQ(status, 0) << output;

  // The weights PyTorch wrote load into our model exactly...
  const auto old_weights = model.weights_to_host();
  load_checkpoint(new_weights, model);
  expect_torch_state(model, old_weights, read_safetensors(new_weights));
  // ...and give the output PyTorch computed with them.
  const std::vector<float> y_new = forward_io(model, input, x, batch).tensors[1].data;  // "output"
  const SafetensorsFile torch_io = read_safetensors(new_io);
  ASSERT_EQ(torch_io.tensors.size(), 1u);
  ASSERT_EQ(torch_io.tensors[0].shape, model.output_shape().with_batch(batch));
  float max_diff = 0.0f;
  for (size_t i = 0; i < y_new.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(y_new[i] - torch_io.tensors[0].data[i]));
  }
  EXPECT_LT(max_diff, c.train_tolerance) << output;
}

INSTANTIATE_TEST_SUITE_P(
    Models, TorchInterop,
    testing::Values(InteropCase{"CifarCnn", "cifar-cnn", Shape{32, 32, 3}},
                    InteropCase{"Dense100", "dense-100", Shape{100}},
                    InteropCase{"SmallMlp", "mlp:scale=0.01", Shape{8000}},
                    InteropCase{"CifarResNet20", "cifar-resnet:depth=20", Shape{32, 32, 3}},
                    // torchvision's own modules (strict load), on small images to stay fast:
                    // the padded stem pool, downsample shortcuts and bottlenecks. ResNet-50's
                    // last stage sees 1x1 images: its training-mode batch norm normalizes 4
                    // values per channel, where fp32 rounding grows to ~1e-2 (PyTorch's fp32
                    // against its own fp64: 3e-3); evaluation mode still matches to 1e-4.
                    // ResNet-18's last stage sees 2x2 images: under 1e-4 with AVX-512's kernels,
                    // 2e-4 with AVX2's alone (ONEDNN_MAX_CPU_ISA=AVX2: both oneDNN and PyTorch sum
                    // in other orders).
                    InteropCase{"ResNet18", "resnet:depth=18,image=64", Shape{64, 64, 3}, 5e-4f},
                    InteropCase{"ResNet50", "resnet:depth=50,image=32", Shape{32, 32, 3}, 3e-2f},
                    // Other numbers of classes (`classes=K`: torchvision's num_classes).
                    InteropCase{"ResNet18TenClasses", "resnet:depth=18,image=64,classes=10",
                                Shape{64, 64, 3}, 5e-4f},
                    InteropCase{"CifarResNet8HundredClasses", "cifar-resnet:depth=8,classes=100",
                                Shape{32, 32, 3}},
                    // The reference decoder of torch_models.py (nanoGPT's names; lm_head tied to
                    // transformer.wte, both keys in the checkpoint), and one of 3 heads over a
                    // vocabulary that is not a power of two.
                    InteropCase{"GptMicro", "gpt:preset=micro", Shape{64}},
                    InteropCase{"GptThreeHeads", "gpt:layers=2,d=48,heads=3,seq=16,vocab=300",
                                Shape{16}}),
    [](const testing::TestParamInfo<InteropCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace scalescope
