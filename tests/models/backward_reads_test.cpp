// Every backend's layer kernels read in backward only what backward_reads (models/layer_spec.h)
// says: with the values it says are unread overwritten by NaN after forward, the gradients are
// bit for bit those of a clean run. A graph model relies on it to reuse that memory.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "models/layer_spec.h"
#include "tests/models/cuda_test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;

// The layers that declare a value unread, in the shapes the models give them.
std::vector<LayerCase> cases() {
  return {
      {"relu", ActivationSpec{Activation::kRelu}, Shape{2, 3, 4, 5}},
      {"tanh", ActivationSpec{Activation::kTanh}, Shape{2, 3, 4, 5}},
      {"sigmoid", ActivationSpec{Activation::kSigmoid}, Shape{3, 70}},
      {"gelu", ActivationSpec{Activation::kGelu}, Shape{2, 16, 40}},
      {"batch_norm", BatchNorm2DSpec{}, Shape{2, 5, 7, 3}},
      {"batch_norm_parts", BatchNorm2DSpec{1e-3f, 0.2f}, Shape{4, 16, 16, 40}},
      {"flatten_image", FlattenSpec{}, Shape{2, 3, 4, 5}},
      {"flatten_vector", FlattenSpec{}, Shape{2, 6}},
      {"global_avg_pool", GlobalAvgPoolSpec{}, Shape{2, 3, 5, 4}},
      {"pad_shortcut", PadShortcutSpec{2, 8}, Shape{2, 8, 8, 4}},
      {"conv", Conv2DSpec{4, 3, 1, Padding::kSame, 0, true}, Shape{2, 5, 4, 3}},
      {"conv_strided", Conv2DSpec{3, 3, 2, Padding::kExplicit, 1, false}, Shape{2, 7, 5, 2}},
      {"dense", DenseSpec{5}, Shape{3, 7}},
      {"dense_sequence", DenseSpec{16}, Shape{2, 8, 32}},
      {"layer_norm", LayerNormSpec{}, Shape{2, 3, 40}},
      {"embedding", EmbeddingSpec{7, 3}, Shape{2, 5}},
      {"position_embedding", PositionEmbeddingSpec{}, Shape{3, 4, 5}},
      {"dropout", DropoutSpec{0.3f, 7}, Shape{2, 3, 40}},
  };
}

void expect_only_declared_reads(Device& device) {
  for (const LayerCase& c : cases()) {
    SCOPED_TRACE(c.name + ": " + describe(c.spec));
    const BackwardReads reads = backward_reads(c.spec);
    ASSERT_FALSE(reads.input && reads.output) << "a case that declares nothing unread";
    const LayerInputs inputs = layer_inputs(c, 4321);
    const LayerResult clean = run_layer(device, c, inputs);
    const LayerResult poisoned = run_layer_unread_poisoned(device, c, inputs);
    EXPECT_EQ(poisoned.din, clean.din);
    EXPECT_EQ(poisoned.grads, clean.grads);
  }
}

// Layers that read everything declare so: the model keeps what they are given.
TEST(BackwardReads, LayersWithoutADeclarationReadBoth) {
  for (const LayerSpec& spec :
       std::vector<LayerSpec>{MaxPool2DSpec{2, 2}, CausalSelfAttentionSpec{2}}) {
    const BackwardReads reads = backward_reads(spec);
    EXPECT_TRUE(reads.input && reads.output) << describe(spec);
  }
}

TEST(BackwardReads, CpuKernelsReadOnlyWhatTheyDeclare) {
  std::unique_ptr<Device> cpu = backend(DeviceKind::kCpu).open(0, BackendOptions{});
  expect_only_declared_reads(*cpu);
}

TEST(BackwardReads, SimKernelsReadOnlyWhatTheyDeclare) {
  std::unique_ptr<Device> sim = backend(DeviceKind::kSim).open(0, BackendOptions{});
  expect_only_declared_reads(*sim);
}

TEST(BackwardReads, CudaKernelsReadOnlyWhatTheyDeclare) {
  const std::string why = gpu_unavailable();
  if (!why.empty()) GTEST_SKIP() << "CUDA kernels not tested: " << why;
  std::unique_ptr<Device> gpu = backend(DeviceKind::kCuda).open(0, BackendOptions{});
  expect_only_declared_reads(*gpu);
}

}  // namespace
}  // namespace scalescope
