// Safetensors reading and writing (round trips, a file built byte by byte, every kind of
// malformed file), checkpoints of models and optimizers (interoperability with PyTorch:
// torch_interop_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "models/zoo.h"
#include "tests/models/checkpoint_files.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

namespace fs = std::filesystem;

using testing_util::error_of;
using testing_util::random_values;
using testing_util::TempDir;

std::string le64(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

std::string floats_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A safetensors file from a header text and a data section, exactly as given.
std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// ---- safetensors

TEST(Safetensors, RoundTrip) {
  TempDir dir;
  SafetensorsFile file;
  file.tensors = {{"b.weight", Shape{3, 2}, {1, 2, 3, 4, 5, 6}},
                  {"a", Shape{}, {7.5f}},
                  {"empty", Shape{0, 4}, {}},
                  {"z", Shape{2, 1, 2}, {-1, -2, -3, -4}}};
  file.metadata = {{"format", "pt"}, {"note", "hello \"world\""}};
  const std::string path = dir.file("t.safetensors");
  write_safetensors(path, file);
  const SafetensorsFile back = read_safetensors(path);
  ASSERT_EQ(back.tensors.size(), file.tensors.size());
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, file.tensors[i].name);  // file order is kept
    EXPECT_EQ(back.tensors[i].shape, file.tensors[i].shape);
    EXPECT_EQ(back.tensors[i].data, file.tensors[i].data);
  }
  EXPECT_EQ(back.metadata, file.metadata);

  // The header is padded so that the data section starts 8-byte aligned.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + (6 + 1 + 0 + 4) * sizeof(float));
}

TEST(Safetensors, ReadsAHandBuiltFile) {
  TempDir dir;
  // Header entries out of data order, no padding, metadata last: all legal.
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
      R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"__metadata__":{"k":"v"}})";
  const std::string path = dir.file("hand.safetensors");
  write_file_atomic(path, raw_file(header, floats_bytes({0.25f, 1.0f, -2.5f})));
  const SafetensorsFile file = read_safetensors(path);
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].name, "s");  // in data order
  EXPECT_EQ(file.tensors[0].shape, Shape{});
  EXPECT_EQ(file.tensors[0].data, std::vector<float>{0.25f});
  EXPECT_EQ(file.tensors[1].name, "w");
  EXPECT_EQ(file.tensors[1].shape, Shape{2});
  EXPECT_EQ(file.tensors[1].data, (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(file.metadata.at("k"), "v");

  const SafetensorsFile index = read_safetensors_index(path);
  ASSERT_EQ(index.tensors.size(), 2u);
  EXPECT_EQ(index.tensors[1].name, "w");
  EXPECT_EQ(index.tensors[1].shape, Shape{2});
  EXPECT_TRUE(index.tensors[1].data.empty());
  EXPECT_EQ(index.metadata, file.metadata);
}

struct Malformed {
  const char* name;
  std::string contents;
  const char* problem;  // a part of the message that names the problem
};

class MalformedSafetensors : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedSafetensors, GivesAnErrorNamingPathAndProblem) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  write_file_atomic(path, GetParam().contents);
  const std::string msg = error_of([&] { read_safetensors(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, GetParam().problem);
  // What a run checks before it starts finds the same problem, reading only the header.
  EXPECT_EQ(error_of([&] { read_safetensors_index(path); }), msg);
}

std::string entry(const std::string& name, const std::string& shape, uint64_t begin, uint64_t end,
                  const std::string& dtype = "F32") {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype,
                     shape, begin, end);
}

// A JSON object of the given "key":value members.
std::string object(std::initializer_list<std::string> members) {
  std::string text = "{";
  for (const std::string& m : members) {
    if (text.size() > 1) text += ",";
    text += m;
  }
  text += "}";
  return text;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedSafetensors,
    testing::Values(
        Malformed{"Empty", "", "shorter than the 8-byte"},
        Malformed{"ShorterThanLength", "abc", "shorter than the 8-byte"},
        Malformed{"HeaderLongerThanFile", le64(1000) + "{}", "header length 1000"},
        Malformed{"HugeHeaderLength", le64(~uint64_t{0}) + "{}", "header length"},
        Malformed{"NotJson", raw_file("{nope", ""), "not JSON"},
        Malformed{"NotAnObject", raw_file("[1,2]", ""), "not a JSON object"},
        Malformed{"EntryNotObject", raw_file(R"({"a":3})", ""), "entry 'a' is not an object"},
        Malformed{"NoDtype", raw_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", "1234"),
                  "tensor 'a' has no 'dtype'"},
        Malformed{"NoShape", raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "1234"),
                  "tensor 'a' has no 'shape'"},
        Malformed{"NoOffsets", raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", "1234"),
                  "tensor 'a' has no 'data_offsets'"},
        Malformed{"Float16", raw_file(object({entry("a", "[2]", 0, 4, "F16")}), "1234"),
                  "tensor 'a' has dtype F16"},
        Malformed{"NegativeDim", raw_file(object({entry("a", "[-1]", 0, 4)}), "1234"),
                  "not a list of non-negative integers"},
        Malformed{"FractionalDim", raw_file(object({entry("a", "[1.5]", 0, 4)}), "1234"),
                  "not a list of non-negative integers"},
        // Would overflow int64 and, unchecked, allocate petabytes.
        Malformed{"HugeShape",
                  raw_file(object({entry("a", "[1099511627776,1099511627776]", 0, 4)}), "1234"),
                  "too many elements"},
        // A plausible size the file does not hold: refused before any allocation.
        Malformed{"ShapeLargerThanFile",
                  raw_file(object({entry("a", "[1000000000000]", 0, 4)}), "1234"),
                  "needs 4000000000000 bytes"},
        Malformed{"OffsetsNotShape", raw_file(object({entry("a", "[2]", 0, 4)}), "1234"),
                  "needs 8 bytes"},
        Malformed{"OffsetsReversed", raw_file(object({entry("a", "[0]", 4, 0)}), "1234"),
                  "0 <= begin <= end"},
        Malformed{"OffsetsBeyondData", raw_file(object({entry("a", "[2]", 0, 8)}), "1234"),
                  "beyond the end of the data section"},
        Malformed{"Overlapping",
                  raw_file(object({entry("a", "[2]", 0, 8), entry("b", "[2]", 4, 12)}),
                           std::string(12, 'x')),
                  "overlapping"},
        Malformed{"Gap",
                  raw_file(object({entry("a", "[1]", 0, 4), entry("b", "[1]", 8, 12)}),
                           std::string(12, 'x')),
                  "belong to no tensor"},
        Malformed{"TrailingBytes", raw_file(object({entry("a", "[1]", 0, 4)}), "12345678"),
                  "tensors cover 4"},
        Malformed{"MetadataNotString", raw_file(R"({"__metadata__":{"step":3}})", ""),
                  "metadata 'step' is not a string"}),
    [](const testing::TestParamInfo<Malformed>& info) { return std::string(info.param.name); });

TEST(Safetensors, CorruptedBytesGiveErrorsNotCrashes) {
  // Random damage anywhere (mostly the header, where the sizes are): every outcome is a clean
  // read or an Error, never a crash, an out-of-bounds read or a huge allocation.
  TempDir dir;
  SafetensorsFile file;
  file.tensors = {{"0.weight", Shape{3, 4}, random_values(12, 1)}, {"0.bias", Shape{3}, {1, 2, 3}}};
  file.metadata = {{"format", "pt"}};
  const std::string path = dir.file("t.safetensors");
  write_safetensors(path, file);
  const std::string good = read_file(path);
  Rng rng(5);
  int errors = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng.below(3));
    for (int f = 0; f < flips; ++f) {
      const size_t at = trial % 2 == 0 ? rng.below(bytes.size())
                                       : rng.below(std::min<size_t>(bytes.size(), 8 + 120));
      bytes[at] = static_cast<char>(rng.below(256));
    }
    if (trial % 7 == 0) bytes.resize(rng.below(bytes.size() + 1));
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;  // no fsync: fast
    try {
      read_safetensors(path);
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Safetensors, MissingFileNamesThePath) {
  const std::string msg = error_of([] { read_safetensors("/nonexistent/x.safetensors"); });
  EXPECT_CONTAINS(msg, "/nonexistent/x.safetensors");
}

TEST(Safetensors, WriterRejectsInconsistentTensors) {
  TempDir dir;
  SafetensorsFile file;
  file.tensors = {{"a", Shape{3}, {1, 2}}};
  EXPECT_CONTAINS(error_of([&] { write_safetensors(dir.file("a.safetensors"), file); }),
                  "tensor 'a' of shape [3] has 2 values");
  file.tensors = {{"a", Shape{1}, {1}}, {"a", Shape{1}, {2}}};
  EXPECT_CONTAINS(error_of([&] { write_safetensors(dir.file("a.safetensors"), file); }),
                  "appears twice");
}

// ---- checkpoints

TEST(Checkpoint, OptimizerStatePath) {
  EXPECT_EQ(optimizer_state_path("run/ckpt.safetensors"), "run/ckpt.optim.safetensors");
  EXPECT_EQ(optimizer_state_path("ckpt.bin"), "ckpt.bin.optim.safetensors");
}

TEST(Checkpoint, RoundTripThroughModel) {
  TempDir dir;
  CpuDevice device(0, 1);
  Model a(make_model("dense-100"), Shape{100}, device, 1);
  Model b(make_model("dense-100"), Shape{100}, device, 2);
  ASSERT_NE(a.weights_to_host(), b.weights_to_host());
  const std::string path = dir.file("dense.safetensors");
  save_checkpoint(path, a);
  load_checkpoint(path, b);
  EXPECT_EQ(a.weights_to_host(), b.weights_to_host());

  // Named and shaped as PyTorch's state_dict, with the metadata a reader needs.
  const SafetensorsFile file = read_safetensors(path);
  ASSERT_EQ(file.tensors.size(), 4u);
  EXPECT_EQ(file.tensors[0].name, "0.weight");
  EXPECT_EQ(file.tensors[0].shape, (Shape{64, 100}));
  EXPECT_EQ(file.tensors[1].name, "0.bias");
  EXPECT_EQ(file.tensors[2].name, "2.weight");
  EXPECT_EQ(file.tensors[2].shape, (Shape{10, 64}));
  EXPECT_EQ(file.tensors[3].name, "2.bias");
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_EQ(file.metadata.at("scalescope_model"), "dense-100");
  EXPECT_EQ(file.metadata.at("scalescope_input"), "[100]");
  EXPECT_FALSE(fs::exists(optimizer_state_path(path)));
}

TEST(Checkpoint, WrongModelNamesTheTensor) {
  TempDir dir;
  CpuDevice device(0, 1);
  Model cnn(make_model("cifar-cnn"), Shape{32, 32, 3}, device, 1);
  Model dense(make_model("dense-100"), Shape{100}, device, 2);
  const auto before = dense.weights_to_host();
  const std::string path = dir.file("cnn.safetensors");
  save_checkpoint(path, cnn);
  const std::string msg = error_of([&] { load_checkpoint(path, dense); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "'0.weight'");
  EXPECT_CONTAINS(msg, "[32, 3, 3, 3]");
  EXPECT_CONTAINS(msg, "[64, 100]");
  EXPECT_EQ(dense.weights_to_host(), before);  // a failed load changes nothing
}

TEST(Checkpoint, MissingAndExtraTensorsAreErrors) {
  TempDir dir;
  CpuDevice device(0, 1);
  Model model(make_model("dense-100"), Shape{100}, device, 1);
  const std::string path = dir.file("m.safetensors");
  save_checkpoint(path, model);
  SafetensorsFile file = read_safetensors(path);

  SafetensorsFile extra = file;
  extra.tensors.push_back({"4.weight", Shape{1}, {0.0f}});
  write_safetensors(path, extra);
  EXPECT_CONTAINS(error_of([&] { load_checkpoint(path, model); }), "'4.weight'");

  SafetensorsFile missing = file;
  missing.tensors.erase(missing.tensors.begin() + 1);
  write_safetensors(path, missing);
  EXPECT_CONTAINS(error_of([&] { load_checkpoint(path, model); }), "no tensor '0.bias'");
}

TEST(Checkpoint, TruncatedFileIsAnError) {
  TempDir dir;
  CpuDevice device(0, 1);
  Model model(make_model("dense-100"), Shape{100}, device, 1);
  const std::string path = dir.file("m.safetensors");
  save_checkpoint(path, model);
  const std::string bytes = read_file(path);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    write_file_atomic(path, std::string_view(bytes).substr(0, keep));
    const std::string msg = error_of([&] { load_checkpoint(path, model); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_EQ(msg.find("<no error"), std::string::npos) << "kept " << keep << " bytes";
  }
}

// Random gradients in the parameters, the flat buffer's gaps left at zero (as backward does).
void set_grads(Model& model, uint64_t seed) {
  Stream& stream = model.device().default_stream();
  for (size_t i = 0; i < model.params().size(); ++i) {
    const std::vector<float> g = random_values(model.params()[i].spec.shape.numel(), seed + i);
    model.device().copy_to_device(model.grad(i).data, g.data(), g.size() * sizeof(float), stream);
  }
  stream.synchronize();
}

std::vector<std::vector<float>> state_to_host(Optimizer& optimizer) {
  std::vector<std::vector<float>> out;
  for (const TensorView& s : optimizer.state()) out.emplace_back(s.data, s.data + s.numel());
  return out;
}

TEST(Checkpoint, OptimizerStateRoundTrip) {
  TempDir dir;
  CpuDevice device(0, 1);
  OptimizerConfig config;  // Adam
  config.lr = 1e-2f;
  Model a(make_model("dense-100"), Shape{100}, device, 1);
  Optimizer opt_a(config, a);
  Stream& stream = device.default_stream();
  for (uint64_t s = 0; s < 3; ++s) {
    set_grads(a, 10 + s);
    opt_a.step(stream);
  }
  const std::string path = dir.file("a.safetensors");
  save_checkpoint(path, a, &opt_a);

  const SafetensorsFile state = read_safetensors(optimizer_state_path(path));
  EXPECT_EQ(state.metadata.at("optimizer"), "adam");
  EXPECT_EQ(state.metadata.at("step"), "3");
  ASSERT_EQ(state.tensors.size(), 8u);
  EXPECT_EQ(state.tensors[0].name, "0.weight.exp_avg");
  EXPECT_EQ(state.tensors[0].shape, (Shape{64, 100}));
  // Sliced with param_offset: the file's "2.bias.exp_avg_sq" is that parameter's state.
  const auto& sq = state.tensors.back();
  EXPECT_EQ(sq.name, "2.bias.exp_avg_sq");
  const std::vector<float> flat_sq = state_to_host(opt_a)[1];
  EXPECT_TRUE(std::equal(sq.data.begin(), sq.data.end(), flat_sq.begin() + a.param_offset(3)));

  Model b(make_model("dense-100"), Shape{100}, device, 2);
  Optimizer opt_b(config, b);
  load_checkpoint(path, b, &opt_b);
  EXPECT_EQ(a.weights_to_host(), b.weights_to_host());
  EXPECT_EQ(state_to_host(opt_a), state_to_host(opt_b));
  EXPECT_EQ(opt_b.steps_done(), 3);

  // Training continues identically (the step count feeds Adam's bias correction).
  set_grads(a, 99);
  set_grads(b, 99);
  opt_a.step(stream);
  opt_b.step(stream);
  EXPECT_EQ(a.weights_to_host(), b.weights_to_host());
}

TEST(Checkpoint, OptimizerKindMismatchIsAnError) {
  TempDir dir;
  CpuDevice device(0, 1);
  Model a(make_model("dense-100"), Shape{100}, device, 1);
  OptimizerConfig adam;
  Optimizer opt_a(adam, a);
  const std::string path = dir.file("a.safetensors");
  save_checkpoint(path, a, &opt_a);
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.momentum = 0.9f;
  Model b(make_model("dense-100"), Shape{100}, device, 2);
  Optimizer opt_b(sgd, b);
  const auto before = b.weights_to_host();
  const std::string msg = error_of([&] { load_checkpoint(path, b, &opt_b); });
  EXPECT_CONTAINS(msg, "holds adam state but the optimizer is sgd");
  EXPECT_EQ(b.weights_to_host(), before);  // checked before anything changed
  // Without an optimizer, the state file is not looked at.
  load_checkpoint(path, b);
  EXPECT_EQ(a.weights_to_host(), b.weights_to_host());
}

TEST(Checkpoint, SavingWithoutOptimizerRemovesStaleState) {
  TempDir dir;
  CpuDevice device(0, 1);
  Model a(make_model("dense-100"), Shape{100}, device, 1);
  Optimizer opt(OptimizerConfig{}, a);
  const std::string path = dir.file("a.safetensors");
  save_checkpoint(path, a, &opt);
  ASSERT_TRUE(fs::exists(optimizer_state_path(path)));
  save_checkpoint(path, a);
  EXPECT_FALSE(fs::exists(optimizer_state_path(path)));
}

}  // namespace
}  // namespace scalescope
