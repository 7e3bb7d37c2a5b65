#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

int64_t params_of(const std::string& spec) {
  const ModelDef def = make_model(spec);
  return summarize(def, def.default_input).params;
}

TEST(Zoo, ParameterCountsOfTheIssue) {
  EXPECT_EQ(params_of("cifar-cnn"), 282250);
  EXPECT_EQ(params_of("mlp-41m"), 41157101);
  EXPECT_EQ(params_of("dense-100"), 7114);
  EXPECT_EQ(params_of("gap-cnn"), 1226);
  EXPECT_EQ(params_of("cnn:width=1"), 282250);
  EXPECT_EQ(params_of("mlp:scale=1"), 41157101);
}

TEST(Zoo, SizeFamiliesSpanOverHundredfold) {
  EXPECT_GT(params_of("cnn:width=12"), 100 * params_of("cnn:width=1"));
  EXPECT_GT(params_of("cnn:width=12"), 500 * params_of("cnn:width=0.5"));
  EXPECT_GT(params_of("mlp:scale=1"), 100 * params_of("mlp:scale=0.01"));
  // width=2: conv 64 and 128 filters, dense 128.
  const int64_t expected =
      (3 * 9 * 64 + 64) + (64 * 9 * 128 + 128) + (8 * 8 * 128 * 128 + 128) + (128 * 10 + 10);
  EXPECT_EQ(params_of("cnn:width=2"), expected);
}

TEST(Zoo, ForwardFlopsOfCifarCnn) {
  const ModelDef def = make_model("cifar-cnn");
  const int64_t conv1 = 32 * 32 * 32 * (2 * 9 * 3 + 1);
  const int64_t relu1 = 32 * 32 * 32;
  const int64_t pool1 = 16 * 16 * 32 * 4;
  const int64_t conv2 = 16 * 16 * 64 * (2 * 9 * 32 + 1);
  const int64_t relu2 = 16 * 16 * 64;
  const int64_t pool2 = 8 * 8 * 64 * 4;
  const int64_t dense1 = 64 * (2 * 4096 + 1);
  const int64_t relu3 = 64;
  const int64_t dense2 = 10 * (2 * 64 + 1);
  EXPECT_EQ(summarize(def, def.default_input).forward_flops,
            conv1 + relu1 + pool1 + conv2 + relu2 + pool2 + dense1 + relu3 + dense2);
}

TEST(Zoo, BuildsForOtherInputShapes) {
  const ModelDef def = make_model("cifar-cnn");
  const ModelSummary s = summarize(def, Shape{28, 28, 1});
  // 28 -> 14 -> 7: dense input 7*7*64.
  EXPECT_EQ(s.params, (9 * 1 * 32 + 32) + (32 * 9 * 64 + 64) + (7 * 7 * 64 * 64 + 64) + 650);
  EXPECT_EQ(s.output, Shape{10});
}

TEST(Zoo, ParamNamesFollowTorchSequential) {
  const ModelDef cnn = make_model("cifar-cnn");
  const auto infos = param_infos(cnn, cnn.default_input);
  ASSERT_EQ(infos.size(), 8u);
  EXPECT_EQ(infos[0].name, "0.weight");
  EXPECT_EQ(infos[0].spec.shape, (Shape{32, 3, 3, 3}));  // OIHW
  EXPECT_EQ(infos[2].name, "3.weight");
  EXPECT_EQ(infos[4].name, "7.weight");
  EXPECT_EQ(infos[4].spec.shape, (Shape{64, 4096}));  // [out, in]
  EXPECT_EQ(infos[7].name, "9.bias");
  // GlobalAveragePool is AdaptiveAvgPool2d + Flatten in PyTorch: the dense layer is module 4.
  const ModelDef gap = make_model("gap-cnn");
  const auto g = param_infos(gap, gap.default_input);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[2].name, "4.weight");
}

TEST(Zoo, SamePaddingSplitsLikeTensorFlow) {
  EXPECT_EQ(same_padding(32, 3, 1).before, 1);
  EXPECT_EQ(same_padding(32, 3, 1).after, 1);
  // in 8, k 3, stride 2: out 4, total pad 1 -> 0 before, 1 after.
  EXPECT_EQ(same_padding(8, 3, 2).before, 0);
  EXPECT_EQ(same_padding(8, 3, 2).after, 1);
  EXPECT_EQ(conv_output_size(7, 3, 2, Padding::kSame), 4);
  EXPECT_EQ(conv_output_size(7, 3, 2, Padding::kValid), 3);
}

void expect_error(const std::string& spec, const std::string& fragment) {
  try {
    make_model(spec);
    ADD_FAILURE() << "accepted '" << spec << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "'" << spec << "': " << e.what();
  }
}

TEST(Zoo, BadSpecsNameTheProblem) {
  expect_error("resnet", "unknown model 'resnet'");
  expect_error("", "empty model name");
  expect_error("cnn:depth=2", "no parameter 'depth'");
  expect_error("cifar-cnn:width=2", "no parameter 'width'");
  expect_error("cnn:width=0", "width=0");
  expect_error("cnn:width=-1", "width=-1");
  expect_error("cnn:width=abc", "width=abc");
  expect_error("cnn:width=1e9", "wider than");
  expect_error("cnn:width=0.001", "narrower than one");
  expect_error("cnn:width", "key=value");
  expect_error("cnn:", "nothing after ':'");
  expect_error("cnn:width=1,width=2", "given twice");
  expect_error("mlp:scale=nan", "scale=nan");
}

TEST(Zoo, LayersRejectShapesTheyCannotTake) {
  const ModelDef cnn = make_model("cifar-cnn");
  EXPECT_THROW(summarize(cnn, Shape{100}), Error);      // an image model on a vector
  EXPECT_THROW(summarize(cnn, Shape{3, 3, 1}), Error);  // pooled to nothing
  const ModelDef mlp = make_model("dense-100");
  EXPECT_THROW(summarize(mlp, Shape{10, 10, 1}), Error);  // dense on an image without Flatten
}

}  // namespace
}  // namespace scalescope
