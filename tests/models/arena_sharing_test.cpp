// A step's arena gives memory to a tensor only while it is live (models/memory_plan.h): a span
// planned too short lets a later tensor overwrite one still to be read. The same step planned
// with every tensor apart is the reference: it must compute the same bits.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/fusion.h"
#include "models/layer_spec.h"
#include "models/memory_plan.h"
#include "models/model.h"
#include "models/zoo.h"
#include "tests/models/precision_scope.h"

namespace scalescope {
namespace {

// The switches are process-wide: each test leaves them as it found them.
class ArenaSharing : public ::testing::Test {
 protected:
  void TearDown() override {
    set_arena_sharing(true);
    set_fuse_layers(true);
  }
};

struct Step {
  std::vector<float> output, grads;
  float loss = 0.0f;
  int64_t arena_bytes = 0;  // Model::Memory's kept and transient: what the arena holds
};

// Two training steps of `spec` on one batch (the second reusing the first's plan, as a run
// does), from the same weights, with or without shared arena memory.
Step train(const std::string& spec, DeviceKind kind, bool share) {
  set_arena_sharing(share);
  const ModelDef def = make_model(spec);
  const std::unique_ptr<Device> device = backend(kind).open(0, BackendOptions{.cpu_threads = 2});
  Device& dev = *device;
  Stream& s = dev.default_stream();
  Model m(def, def.default_input, dev, 7);
  const int64_t n = 3;
  Tensor x(dev, def.default_input.with_batch(n));
  Rng rng(5);
  std::vector<float> input(static_cast<size_t>(x.numel()));
  const int64_t vocab = input_vocab(def);
  for (float& v : input) v = vocab > 0 ? static_cast<float>(rng.below(vocab)) : rng.normal();
  x.copy_from_host(input);
  const Shape labels_shape = label_shape(def.loss, m.output_shape()).with_batch(n);
  std::vector<float> labels(static_cast<size_t>(labels_shape.numel()));
  for (float& v : labels) v = static_cast<float>(rng.below(vocab > 0 ? vocab : 10));
  Tensor y(dev, Shape{static_cast<int64_t>(labels.size())});
  y.copy_from_host(labels);
  Tensor loss(dev, Shape{1});
  Step step;
  for (int i = 0; i < 2; ++i) {
    m.forward(x.data(), n, s);
    // Backward may reuse the output's memory once the loss has read it.
    step.output.resize(static_cast<size_t>(n * m.output_shape().numel()));
    dev.copy_to_host(step.output.data(), m.output(), step.output.size() * sizeof(float), s);
    s.synchronize();
    m.loss_forward_backward(y.data(), 1.0f / n, loss.data(), s);
    m.backward(s);
  }
  step.loss = loss.to_host()[0];
  step.grads = m.grads().to_host();
  const Model::Memory memory = m.memory(n);
  step.arena_bytes = memory.kept + memory.transient;
  return step;
}

// On CPU devices in fp32 and bf16, on simulated ones (the GPU path's orchestration) in the
// 16-bit formats, where fp16's emulated kernels restore what bf16's read as saved.
TEST_F(ArenaSharing, SharedArenasComputeWhatTensorsApartDo) {
  const std::pair<DeviceKind, Precision> runs[] = {{DeviceKind::kCpu, Precision::kFp32},
                                                   {DeviceKind::kCpu, Precision::kBf16},
                                                   {DeviceKind::kSim, Precision::kBf16},
                                                   {DeviceKind::kSim, Precision::kFp16}};
  for (const std::string spec : {"cifar-cnn", "cifar-resnet:depth=8", "gpt:preset=micro,seq=16",
                                 "resnet:depth=18,image=32,width=0.125,classes=10"}) {
    for (const auto& [kind, precision] : runs) {
      if (testing_util::bf16_refused_here(precision)) continue;
      for (const bool fuse : {true, false}) {
        SCOPED_TRACE(spec + " on " + to_string(kind) + " in " + to_string(precision) +
                     (fuse ? ", fused" : ", unfused"));
        const testing_util::PrecisionScope scope(precision);
        set_fuse_layers(fuse);
        const Step shared = train(spec, kind, true);
        const Step apart = train(spec, kind, false);
        // The sharing is of something, but in cifar-cnn's fp32 step, where backward reads every
        // output but the loss's input, which is all its forward arena holds.
        if (spec != "cifar-cnn" || precision != Precision::kFp32) {
          EXPECT_LT(shared.arena_bytes, apart.arena_bytes);
        }
        EXPECT_EQ(shared.output, apart.output);
        EXPECT_EQ(shared.loss, apart.loss);
        ASSERT_EQ(shared.grads.size(), apart.grads.size());
        for (size_t i = 0; i < apart.grads.size(); ++i) {
          ASSERT_EQ(shared.grads[i], apart.grads[i]) << "gradient " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace scalescope
