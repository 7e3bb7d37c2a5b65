// --profile-layers: replica 0's layers timed with events around each layer's work, on CPU
// replicas (the clock) and simulated devices (events on the stream, as on GPUs).
#include <gtest/gtest.h>

#include <string>

#include "harness/trainer/trainer.h"
#include "models/zoo.h"
#include "reports/writers/layer_profile.h"
#include "tests/harness/trainer/train_helpers.h"

namespace scalescope {
namespace {

// Replica 0's forward and backward phases, summed over the measured steps.
double passes_ms(const RunReport& r) {
  double sum = 0.0;
  for (const StepRecord& s : r.steps) {
    if (s.step <= r.warmup_steps) continue;
    sum += s.replicas.front()[Phase::kForward] + s.replicas.front()[Phase::kBackward];
  }
  return sum;
}

void expect_every_layer_within_its_phases(const std::string& devices) {
  SCOPED_TRACE(devices);
  TrainOptions o = testing_util::short_run("cifar-resnet:depth=8", devices, 4, 6);
  o.warmup_steps = 2;
  o.profile_layers = true;
  const RunReport r = train(o);
  const ModelDef def = make_model("cifar-resnet:depth=8");
  ASSERT_EQ(r.layer_profile.size(), def.layers.size());
  const std::vector<Shape> shapes = layer_shapes(def, def.default_input);
  double layers_ms = 0.0;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const LayerTimeRecord& l = r.layer_profile[i];
    EXPECT_EQ(l.layer, static_cast<int>(i));
    EXPECT_EQ(l.layer_name, def.names[i] + " " + describe(def.layers[i]));
    const Shape& in = layer_input_shape(def, shapes, static_cast<int>(i));
    EXPECT_EQ(l.forward_flops, forward_flops(def.layers[i], in) * 4);
    EXPECT_EQ(l.forward_bytes, forward_bytes(def.layers[i], in, 4));
    // Convolutions compute; normalization, activations and the adds move memory.
    const LayerSpec& spec = def.layers[i];
    if (std::holds_alternative<Conv2DSpec>(spec)) {
      EXPECT_FALSE(l.memory_bound()) << l.layer_name;
    }
    if (std::holds_alternative<BatchNorm2DSpec>(spec) ||
        std::holds_alternative<ActivationSpec>(spec) || std::holds_alternative<AddSpec>(spec)) {
      EXPECT_TRUE(l.memory_bound()) << l.layer_name;
    }
    EXPECT_GE(l.forward_ms, 0.0);
    EXPECT_GT(l.backward_ms, 0.0) << l.layer_name;  // every layer of this model has a backward
    layers_ms += l.forward_ms + l.backward_ms;
  }
  // The layers' events lie inside the forward and backward phases' on the same stream: their
  // mean per measured step adds up to at most the phases' mean (4 measured steps).
  const double measured = static_cast<double>(r.steps.size()) - static_cast<double>(r.warmup_steps);
  ASSERT_EQ(measured, 4.0);
  EXPECT_LE(layers_ms, passes_ms(r) / measured + 1e-6);
  EXPECT_GT(layers_ms, 0.0);
  const std::string table = format_layer_profile(r, 5);
  EXPECT_NE(table.find("layers of replica 0"), std::string::npos) << table;
  EXPECT_NE(table.find("fwd GB/s"), std::string::npos) << table;
  EXPECT_NE(table.find(std::to_string(def.layers.size() - 5) + " other layers"), std::string::npos)
      << table;
  // Every layer whose forward a library chose for names the choice (oneDNN's implementation).
  const std::string all = format_layer_profile(r, def.layers.size());
  int named = 0;
  for (const KernelChoiceRecord& k : r.kernels) {
    if (k.pass != "forward") continue;
    EXPECT_NE(all.find("  " + k.algorithm + "\n"), std::string::npos) << k.layer_name << "\n"
                                                                      << all;
    ++named;
  }
  EXPECT_GT(named, 0);
}

TEST(LayerProfile, CpuReplicasTimeEveryLayerInsideItsPhases) {
  expect_every_layer_within_its_phases("cpu:2");
}

TEST(LayerProfile, SimulatedDevicesTimeEveryLayerInsideItsPhases) {
  expect_every_layer_within_its_phases("sim:2");
}

TEST(LayerProfile, NothingWithoutTheFlag) {
  const RunReport r = train(testing_util::short_run("cifar-resnet:depth=8", "cpu:1", 4, 2));
  EXPECT_TRUE(r.layer_profile.empty());
  EXPECT_EQ(format_layer_profile(r), "");
}

}  // namespace
}  // namespace scalescope
