#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

int64_t params_of(const std::string& spec) {
  const ModelDef def = make_model(spec);
  return summarize(def, def.default_input).params;
}

// The layers whose input gradient nobody takes (LayerBinding::input_gradient): those on the
// model's input, in sequential models and in graphs (a ResNet's stem, a GPT's embedding).
TEST(Zoo, OnlyTheLayersOnTheModelsInputReadIt) {
  for (const char* spec :
       {"cifar-cnn", "mlp", "cifar-resnet", "resnet:depth=18", "gpt:preset=mini"}) {
    const ModelDef def = make_model(spec);
    std::vector<int> readers;
    for (int layer = 0; layer < static_cast<int>(def.layers.size()); ++layer) {
      if (reads_model_input(def, layer)) readers.push_back(layer);
    }
    EXPECT_EQ(readers, std::vector<int>{0}) << spec;
  }
  ModelDef two;  // a graph whose second layer reads the model's input beside the first's output
  two.layers = {ActivationSpec{}, AddSpec{}};
  two.inputs = {{kModelInput}, {0, kModelInput}};
  EXPECT_TRUE(reads_model_input(two, 0));
  EXPECT_TRUE(reads_model_input(two, 1));
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
  expect_error("resnet50", "unknown model 'resnet50' (did you mean resnet:depth=50?)");
  expect_error("cifar-resnet-20", "(did you mean cifar-resnet:depth=20?)");
  expect_error("resnt", "unknown model 'resnt' (did you mean resnet?)");
  expect_error("cnn2", "unknown model 'cnn2' (did you mean cnn?)");  // no depths: a slip
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

// torchvision 0.14's counts (sum(p.numel() for p in resnetNN().parameters())).
TEST(Zoo, ImageNetResNetParameterCountsAreTorchvisions) {
  EXPECT_EQ(params_of("resnet:depth=18"), 11689512);
  EXPECT_EQ(params_of("resnet:depth=34"), 21797672);
  EXPECT_EQ(params_of("resnet:depth=50"), 25557032);
  EXPECT_EQ(params_of("resnet:depth=101"), 44549160);
  EXPECT_EQ(params_of("resnet:depth=152"), 60192808);
  // The image changes no parameter: global average pooling before fc.
  EXPECT_EQ(params_of("resnet:depth=50,image=64"), 25557032);
}

// He et al.'s Table 6 (0.27M, 0.46M, 0.66M, 0.85M, 1.7M), exactly.
TEST(Zoo, CifarResNetParameterCounts) {
  EXPECT_EQ(params_of("cifar-resnet:depth=20"), 269722);
  EXPECT_EQ(params_of("cifar-resnet:depth=32"), 464154);
  EXPECT_EQ(params_of("cifar-resnet:depth=44"), 658586);
  EXPECT_EQ(params_of("cifar-resnet:depth=56"), 853018);
  EXPECT_EQ(params_of("cifar-resnet:depth=110"), 1727962);
}

Shape param_shape(const ModelDef& def, const std::string& name) {
  for (const ParamInfo& p : param_infos(def, def.default_input)) {
    if (p.name == name) return p.spec.shape;
  }
  return Shape{-1};  // absent
}

TEST(Zoo, ImageNetResNetNamesAndShapesAreTorchvisions) {
  const ModelDef r18 = make_model("resnet:depth=18");
  EXPECT_EQ(r18.name, "resnet:depth=18");
  EXPECT_EQ(r18.default_input, (Shape{224, 224, 3}));
  EXPECT_EQ(param_shape(r18, "conv1.weight"), (Shape{64, 3, 7, 7}));
  EXPECT_EQ(param_shape(r18, "conv1.bias"), Shape{-1});  // no bias before batch norm
  EXPECT_EQ(param_shape(r18, "bn1.weight"), Shape{64});
  EXPECT_EQ(param_shape(r18, "layer1.0.conv1.weight"), (Shape{64, 64, 3, 3}));
  EXPECT_EQ(param_shape(r18, "layer1.0.downsample.0.weight"), Shape{-1});
  EXPECT_EQ(param_shape(r18, "layer2.0.conv1.weight"), (Shape{128, 64, 3, 3}));
  EXPECT_EQ(param_shape(r18, "layer2.0.downsample.0.weight"), (Shape{128, 64, 1, 1}));
  EXPECT_EQ(param_shape(r18, "layer2.0.downsample.1.bias"), Shape{128});
  EXPECT_EQ(param_shape(r18, "layer4.1.bn2.weight"), Shape{512});
  EXPECT_EQ(param_shape(r18, "fc.weight"), (Shape{1000, 512}));
  EXPECT_EQ(param_shape(r18, "fc.bias"), Shape{1000});
  const auto buffers = buffer_infos(r18, r18.default_input);
  EXPECT_EQ(buffers.front().name, "bn1.running_mean");
  EXPECT_EQ(buffers.back().name, "layer4.1.bn2.num_batches_tracked");

  const ModelDef r50 = make_model("resnet:depth=50");
  // Stage 1 widens 64 to 256 channels, so even its first block has a downsample (stride 1).
  EXPECT_EQ(param_shape(r50, "layer1.0.downsample.0.weight"), (Shape{256, 64, 1, 1}));
  EXPECT_EQ(param_shape(r50, "layer1.1.downsample.0.weight"), Shape{-1});
  EXPECT_EQ(param_shape(r50, "layer1.0.conv3.weight"), (Shape{256, 64, 1, 1}));
  EXPECT_EQ(param_shape(r50, "layer3.5.conv2.weight"), (Shape{256, 256, 3, 3}));
  EXPECT_EQ(param_shape(r50, "layer3.6.conv2.weight"), Shape{-1});
  EXPECT_EQ(param_shape(r50, "fc.weight"), (Shape{1000, 2048}));
  EXPECT_EQ(param_shape(make_model("resnet:depth=152"), "layer3.35.bn3.weight"), Shape{1024});
}

// The stem and four stages divide the image by 32 (7x7 conv and 3x3 pool, stride 2 each).
TEST(Zoo, ImageNetResNetShapesAndFlops) {
  const ModelDef r50 = make_model("resnet:depth=50");
  const std::vector<Shape> shapes = layer_shapes(r50, r50.default_input);
  EXPECT_EQ(shapes[1], (Shape{112, 112, 64}));  // conv1
  EXPECT_EQ(shapes[4], (Shape{56, 56, 64}));    // maxpool
  EXPECT_EQ(shapes[shapes.size() - 3], (Shape{7, 7, 2048}));
  EXPECT_EQ(shapes.back(), Shape{1000});
  // About 4.1 G multiply-adds, as usually quoted for ResNet-50: 8.2 GFLOP and a little more.
  const int64_t flops = summarize(r50, r50.default_input).forward_flops;
  EXPECT_GT(flops, int64_t{8'100'000'000});
  EXPECT_LT(flops, int64_t{8'400'000'000});
  const ModelDef small = make_model("resnet:depth=18,image=64");
  EXPECT_EQ(small.name, "resnet:depth=18,image=64");
  EXPECT_EQ(layer_shapes(small, small.default_input)[4], (Shape{16, 16, 64}));
}

// `models --layers`: each layer's own figures, named as PyTorch names its modules; a tied
// weight counted once, at the layer that owns it.
TEST(Zoo, LayerSummariesAreEachLayersOwnAndAddUpToTheModel) {
  const ModelDef r50 = make_model("resnet:depth=50");
  const std::vector<LayerSummary> layers = summarize_layers(r50, r50.default_input);
  ASSERT_EQ(layers.size(), r50.layers.size());
  EXPECT_EQ(layers.front().name, "conv1");
  EXPECT_EQ(layers.front().output, (Shape{112, 112, 64}));
  EXPECT_EQ(layers.front().params, 64 * 7 * 7 * 3);
  EXPECT_EQ(layers.front().forward_flops, int64_t{2} * 112 * 112 * 64 * 7 * 7 * 3);
  EXPECT_EQ(layers.back().name, "fc");
  EXPECT_EQ(layers.back().params, 2048 * 1000 + 1000);
  int64_t params = 0;
  int64_t flops = 0;
  for (const LayerSummary& l : layers) {
    params += l.params;
    flops += l.forward_flops;
  }
  EXPECT_EQ(params, 25'557'032);  // torchvision's
  EXPECT_EQ(flops, summarize(r50, r50.default_input).forward_flops);

  const ModelDef gpt = make_model("gpt:layers=2,d=16,heads=2,seq=8,vocab=50");
  const std::vector<LayerSummary> g = summarize_layers(gpt, gpt.default_input);
  EXPECT_EQ(g.front().name, "transformer.wte");
  EXPECT_EQ(g.front().params, 50 * 16);
  EXPECT_EQ(g.back().name, "lm_head");
  EXPECT_EQ(g.back().tied_to, "transformer.wte");
  EXPECT_EQ(g.back().params, 0);
  EXPECT_EQ(g.back().output, (Shape{8, 50}));
  EXPECT_EQ(g.front().tied_to, "");
  const ModelDef cnn = make_model("cifar-cnn");  // nn.Sequential's indices
  EXPECT_EQ(summarize_layers(cnn, cnn.default_input)[2].name, "2");
}

TEST(Zoo, ImageNetResNetWidthScalesEveryStage) {
  const ModelDef wide = make_model("resnet:depth=18,width=2");
  EXPECT_EQ(wide.name, "resnet:depth=18,width=2");
  EXPECT_EQ(param_shape(wide, "conv1.weight"), (Shape{128, 3, 7, 7}));
  EXPECT_EQ(param_shape(wide, "layer4.1.conv2.weight"), (Shape{1024, 1024, 3, 3}));
  EXPECT_EQ(param_shape(wide, "fc.weight"), (Shape{1000, 1024}));
  EXPECT_EQ(make_model("resnet:width=0.5,image=96,depth=34").name,
            "resnet:depth=34,image=96,width=0.5");
  EXPECT_EQ(make_model("resnet:depth=50,image=224,width=1").name, "resnet:depth=50");
  EXPECT_GT(params_of("resnet:depth=18,width=4"), 10 * params_of("resnet:depth=18"));
}

TEST(Zoo, BadImageNetResNetSpecsNameTheProblem) {
  expect_error("resnet:depth=20", "depth 20 is not one of torchvision's 18, 34, 50, 101, 152");
  expect_error("resnet:depth=0", "depth=0");
  expect_error("resnet:depth=x", "depth=x");
  expect_error("resnet:layers=18",
               "no parameter 'layers' (accepted: depth, image, width, classes)");
  expect_error("resnet:depth=18,image=31", "image=31 is too small for the stem and 4 stages");
  expect_error("resnet:depth=18,image=1", "image=1 is too small");
  expect_error("resnet:depth=18,image=0", "image=0");
  expect_error("resnet:depth=18,image=64.5", "image=64.5");
  expect_error("resnet:depth=18,width=0", "width=0");
  expect_error("resnet:depth=18,width=0.001", "narrower than one");
  expect_error("cifar-resnet:depth=18", "not 6n+2");
}

// torchvision's num_classes: the output layer's width, named in the spec unless it is the
// family's default (10, ImageNet's 1000 for torchvision's ResNets).
TEST(Zoo, ImageFamiliesTakeAnyNumberOfClasses) {
  const ModelDef r18 = make_model("resnet:depth=18,image=32,classes=10");
  EXPECT_EQ(r18.name, "resnet:depth=18,image=32,classes=10");
  EXPECT_EQ(summarize(r18, r18.default_input).output, Shape{10});
  // sum(p.numel() for p in torchvision.models.resnet18(num_classes=10).parameters())
  EXPECT_EQ(params_of("resnet:depth=18,classes=10"), 11181642);
  EXPECT_EQ(make_model("resnet:classes=10,depth=18").name, "resnet:depth=18,classes=10");
  EXPECT_EQ(make_model("resnet:depth=18,classes=1000").name, "resnet:depth=18");
  EXPECT_EQ(make_model("cifar-cnn:classes=100").name, "cifar-cnn:classes=100");
  EXPECT_EQ(params_of("cifar-cnn:classes=100"), 282250 - 65 * 10 + 65 * 100);
  EXPECT_EQ(make_model("cifar-cnn:classes=10").name, "cifar-cnn");
  EXPECT_EQ(make_model("cnn:width=2,classes=100").name, "cnn:width=2,classes=100");
  const ModelDef gap = make_model("gap-cnn:classes=3");
  EXPECT_EQ(gap.name, "gap-cnn:classes=3");
  EXPECT_EQ(summarize(gap, gap.default_input).output, Shape{3});
  EXPECT_EQ(make_model("cifar-resnet:depth=20,classes=100").name,
            "cifar-resnet:depth=20,classes=100");
  EXPECT_EQ(params_of("cifar-resnet:depth=20,classes=100"), 269722 - 65 * 10 + 65 * 100);
  for (const ZooEntry& e : zoo()) {
    const bool images =
        e.name.find("cnn") != std::string::npos || e.name.find("resnet") != std::string::npos;
    EXPECT_EQ(e.description.find("classes=K") != std::string::npos, images) << e.name;
  }
}

TEST(Zoo, ClassesAreAWholeNumberOnImageFamiliesOnly) {
  expect_error("resnet:depth=18,classes=1", "classes=1 is not a whole number in [2, 1000000]");
  expect_error("cifar-cnn:classes=0", "classes=0");
  expect_error("cifar-cnn:classes=ten", "classes=ten");
  expect_error("cifar-cnn:classes=2000000", "classes=2000000");
  expect_error("cifar-cnn:width=2", "no parameter 'width' (accepted: classes)");
  expect_error("mlp:classes=2", "no parameter 'classes' (accepted: scale)");
  expect_error("dense-100:classes=2", "no parameter 'classes' (it takes none)");
  expect_error("gpt:classes=2", "no parameter 'classes'");
}

// What an error about labels names: the same model with the labels' classes.
TEST(Zoo, WithClassesNamesTheSpecThatTakesThem) {
  EXPECT_EQ(with_classes(make_model("resnet:depth=18,image=32"), 10),
            "resnet:depth=18,image=32,classes=10");
  EXPECT_EQ(with_classes(make_model("cifar-cnn:classes=100"), 10), "cifar-cnn");
  EXPECT_EQ(with_classes(make_model("cifar-resnet:depth=20"), 100),
            "cifar-resnet:depth=20,classes=100");
  EXPECT_EQ(with_classes(make_model("mlp-41m"), 10), "");
  EXPECT_EQ(with_classes(make_model("gpt:preset=micro"), 10), "");
  EXPECT_EQ(with_classes(make_model("cifar-cnn"), 1), "");
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

namespace scalescope {
namespace {

// GPT-2's counts with the token table counted once (nanoGPT's get_num_params with the
// position embedding included): 124,439,808 for small, 354,823,168 for medium.
TEST(Zoo, GptParameterCountsAreGpt2s) {
  EXPECT_EQ(params_of("gpt:preset=small"), 124439808);
  EXPECT_EQ(params_of("gpt:preset=medium"), 354823168);
  EXPECT_EQ(params_of("gpt:layers=12,d=768,heads=12,seq=1024,vocab=50257"), 124439808);
  // micro: wte 256·128 + wpe 64·128 + 2 blocks of (2·2·128 + 128·384 + 384 + 128·128 + 128 +
  // 128·512 + 512 + 512·128 + 128) + ln_f 2·128.
  const int64_t block =
      4 * 128 + (128 * 384 + 384) + (128 * 128 + 128) + (128 * 512 + 512) + (512 * 128 + 128);
  EXPECT_EQ(params_of("gpt:preset=micro"), 256 * 128 + 64 * 128 + 2 * block + 2 * 128);
  EXPECT_EQ(params_of("gpt"), params_of("gpt:preset=micro"));
}

TEST(Zoo, GptNamesAreNanoGptsAndTheHeadIsTied) {
  const ModelDef def = make_model("gpt:layers=2,d=16,heads=2,seq=8,vocab=50");
  const std::vector<ParamInfo> params = param_infos(def, def.default_input);
  std::vector<std::string> names;
  for (const ParamInfo& p : params) names.push_back(p.name);
  ASSERT_EQ(names.size(), 2u + 2u * 12u + 2u);
  EXPECT_EQ(names[0], "transformer.wte.weight");
  EXPECT_EQ(names[1], "transformer.wpe.weight");
  EXPECT_EQ(names[2], "transformer.h.0.ln_1.weight");
  EXPECT_EQ(names[4], "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(names[6], "transformer.h.0.attn.c_proj.weight");
  EXPECT_EQ(names[10], "transformer.h.0.mlp.c_fc.weight");
  EXPECT_EQ(names[13], "transformer.h.0.mlp.c_proj.bias");
  EXPECT_EQ(names.back(), "transformer.ln_f.bias");
  EXPECT_EQ(params[4].spec.shape, (Shape{48, 16}));  // nn.Linear(d, 3d): [out, in]
  const std::vector<ParamAlias> aliases = param_aliases(def, def.default_input);
  ASSERT_EQ(aliases.size(), 1u);
  EXPECT_EQ(aliases[0].name, "lm_head.weight");
  EXPECT_EQ(aliases[0].param, 0u);
  const ModelSummary s = summarize(def, def.default_input);
  EXPECT_EQ(s.input, Shape{8});
  EXPECT_EQ(s.output, (Shape{8, 50}));
  EXPECT_EQ(input_vocab(def), 50);
  EXPECT_EQ(input_vocab(make_model("cifar-cnn")), 0);
}

TEST(Zoo, GptSpecsAreNamedAsTyped) {
  EXPECT_EQ(make_model("gpt:preset=mini").name, "gpt:preset=mini");
  EXPECT_EQ(make_model("gpt:preset=mini,layers=2").name,
            "gpt:layers=2,d=256,heads=4,seq=128,vocab=256");
  EXPECT_EQ(make_model("gpt").name, "gpt:layers=2,d=128,heads=4,seq=64,vocab=256");
}

// Dropout adds layers (after the embeddings and on both branches of every block), no
// parameters, and keeps the preset's name.
TEST(Zoo, GptDropoutIsLayersWithoutParameters) {
  const ModelDef plain = make_model("gpt:preset=micro");
  const ModelDef dropped = make_model("gpt:preset=micro,dropout=0.1");
  EXPECT_EQ(dropped.name, "gpt:preset=micro,dropout=0.1");
  EXPECT_EQ(dropped.layers.size(), plain.layers.size() + 1 + 2 * 2);
  EXPECT_EQ(params_of("gpt:preset=micro,dropout=0.1"), params_of("gpt:preset=micro"));
  EXPECT_EQ(make_model("gpt:preset=micro,dropout=0").name, "gpt:preset=micro");
  expect_error("gpt:dropout=1", "dropout=1 is not in [0, 1)");
  expect_error("gpt:dropout=-0.1", "dropout=-0.1");
}

TEST(Zoo, BadGptSpecsNameTheProblem) {
  expect_error("gpt:preset=large", "no preset 'large' (presets: micro, mini, small, medium)");
  expect_error("gpt:d=100,heads=3", "d=100 is not a multiple of heads=3");
  expect_error("gpt:layers=0", "layers=0");
  expect_error("gpt:vocab=1.5", "vocab=1.5");
  // Refused only by the synthetic tokens, with a message about positions.
  expect_error("gpt:vocab=1", "model 'gpt': vocab=1 is not a whole number in [2, 10000000]");
  expect_error("gpt:width=2", "no parameter 'width'");
  const ModelDef def = make_model("gpt:layers=1,d=8,heads=2,seq=4,vocab=11");
  ModelDef bad = def;
  bad.ties = {ModelDef::Tie{0, 3}};
  EXPECT_THROW(param_infos(bad, bad.default_input), Error);  // tied to a later layer
  bad.ties = {ModelDef::Tie{static_cast<int>(def.layers.size()) - 1, 1}};
  try {
    param_infos(bad, bad.default_input);
    ADD_FAILURE() << "a tie of two shapes accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot share the weight of layer 1"), std::string::npos)
        << e.message();
  }
}

}  // namespace
}  // namespace scalescope
