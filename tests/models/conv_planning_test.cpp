// The planning rules of cuDNN convolutions (models/cuda/conv_planning.h), over a fake of what
// cuDNN answers: fp32 data is never converted to fp16, strict fp32 never runs on tensor
// cores, deterministic runs refuse atomics, NCHW is the fallback when NHWC has no allowed
// algorithm, the workspace limit follows the device's free memory and a pass without a
// deterministic algorithm within it falls back unless determinism is required. Runs in every
// CUDA build, GPU or not.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "core/error.h"
#include "models/cuda/conv_benchmark.h"
#include "models/cuda/conv_planning.h"

namespace scalescope {
namespace {

TEST(ConvMath, TheDescriptorsAskForDefaultMathWithTf32FmaWithoutAndTensorOpsIn16Bits) {
  EXPECT_EQ(conv_requested_math(Precision::kTf32), CUDNN_DEFAULT_MATH);
  EXPECT_EQ(conv_requested_math(Precision::kFp32), CUDNN_FMA_MATH);
  EXPECT_EQ(conv_requested_math(Precision::kBf16), CUDNN_TENSOR_OP_MATH);
  EXPECT_EQ(conv_requested_math(Precision::kFp16), CUDNN_TENSOR_OP_MATH);
}

// cuDNN computes in 16 bits only on 16-bit tensors.
TEST(ConvMath, SixteenBitPrecisionsHaveTensorsOfTheirType) {
  EXPECT_EQ(conv_data_type(Precision::kFp32), CUDNN_DATA_FLOAT);
  EXPECT_EQ(conv_data_type(Precision::kTf32), CUDNN_DATA_FLOAT);
  EXPECT_EQ(conv_data_type(Precision::kBf16), CUDNN_DATA_BFLOAT16);
  EXPECT_EQ(conv_data_type(Precision::kFp16), CUDNN_DATA_HALF);
}

TEST(ConvMath, ConversionIsRefusedInEveryPrecision) {
  for (const Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp16})
    EXPECT_FALSE(conv_math_for(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, p).has_value())
        << to_string(p);
}

TEST(ConvMath, Tf32And16BitsRunWhatCudnnProposes) {
  for (const Precision p : {Precision::kTf32, Precision::kBf16, Precision::kFp16}) {
    EXPECT_EQ(conv_math_for(CUDNN_TENSOR_OP_MATH, p), CUDNN_TENSOR_OP_MATH) << to_string(p);
    EXPECT_EQ(conv_math_for(CUDNN_DEFAULT_MATH, p), CUDNN_DEFAULT_MATH) << to_string(p);
    EXPECT_EQ(conv_math_for(CUDNN_FMA_MATH, p), CUDNN_FMA_MATH) << to_string(p);
  }
}

TEST(ConvMath, StrictFp32RefusesTensorCoresAndRunsTheRestUnderFma) {
  EXPECT_FALSE(conv_math_for(CUDNN_TENSOR_OP_MATH, Precision::kFp32).has_value());
  EXPECT_EQ(conv_math_for(CUDNN_DEFAULT_MATH, Precision::kFp32), CUDNN_FMA_MATH);
  EXPECT_EQ(conv_math_for(CUDNN_FMA_MATH, Precision::kFp32), CUDNN_FMA_MATH);
}

TEST(ConvMath, AnUnknownMathTypeIsRefused) {
  EXPECT_FALSE(conv_math_for(static_cast<cudnnMathType_t>(99), Precision::kTf32).has_value());
}

// What cuDNN would answer: proposals per pass and layout, a workspace per algorithm (or a
// failing status), and a record of the questions asked.
class FakeCudnn final : public ConvQueries {
 public:
  using Key = std::tuple<ConvPass, cudnnTensorFormat_t>;
  std::map<Key, std::vector<ConvCandidate>> proposals;
  std::map<int, size_t> workspace_bytes;  // by algorithm; absent: 0
  // By pass, layout and algorithm, before workspace_bytes.
  std::map<std::tuple<ConvPass, cudnnTensorFormat_t, int>, size_t> workspace_at;
  std::map<int, cudnnStatus_t> workspace_status;
  std::vector<cudnnMathType_t> requested;  // per candidates() call
  std::vector<std::tuple<ConvPass, int, cudnnMathType_t>> workspace_asked;

  // Every pass in `layout` proposes `c`.
  void offer_everywhere(cudnnTensorFormat_t layout, const ConvCandidate& c) {
    for (const ConvPass pass : kConvPasses) proposals[{pass, layout}].push_back(c);
  }

  std::vector<ConvCandidate> candidates(ConvPass pass, cudnnTensorFormat_t layout,
                                        cudnnMathType_t math) override {
    requested.push_back(math);
    const auto it = proposals.find({pass, layout});
    return it == proposals.end() ? std::vector<ConvCandidate>{} : it->second;
  }
  cudnnStatus_t workspace(ConvPass pass, cudnnTensorFormat_t layout, int algo, cudnnMathType_t math,
                          size_t* bytes) override {
    workspace_asked.emplace_back(pass, algo, math);
    *bytes = workspace_bytes.count(algo) != 0 ? workspace_bytes[algo] : 0;
    if (const auto it = workspace_at.find({pass, layout, algo}); it != workspace_at.end())
      *bytes = it->second;
    return workspace_status.count(algo) != 0 ? workspace_status[algo] : CUDNN_STATUS_SUCCESS;
  }
};

constexpr ConvPolicy kTf32{Precision::kTf32, Determinism::kRequired, size_t{1} << 20};
constexpr ConvPolicy kStrict{Precision::kFp32, Determinism::kRequired, size_t{1} << 20};

ConvCandidate proposal(int algo, cudnnMathType_t math = CUDNN_DEFAULT_MATH,
                       cudnnDeterminism_t determinism = CUDNN_DETERMINISTIC,
                       cudnnStatus_t status = CUDNN_STATUS_SUCCESS) {
  return {algo, status, math, determinism, -1};
}

std::optional<ConvChoice> pick(FakeCudnn& fake, ConvPass pass, const ConvPolicy& policy,
                               std::string* refusals = nullptr) {
  ConvRefusals why;
  std::optional<ConvChoice> choice =
      pick_conv_algorithm(fake, pass, CUDNN_TENSOR_NHWC, policy, &why);
  if (refusals != nullptr) *refusals = why.text;
  return choice;
}

TEST(ConvPlanning, TheFirstAllowedProposalIsPickedAndItsFp16ConversionRefused) {
  FakeCudnn fake;
  fake.proposals[{ConvPass::kForward, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_TENSOR_OP_MATH),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_GEMM)};
  std::string refusals;
  const std::optional<ConvChoice> choice = pick(fake, ConvPass::kForward, kTf32, &refusals);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algo, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  EXPECT_EQ(choice->math, CUDNN_TENSOR_OP_MATH);
  EXPECT_TRUE(choice->deterministic);
  ASSERT_EQ(fake.requested.size(), 1u);
  EXPECT_EQ(fake.requested[0], CUDNN_DEFAULT_MATH);
  // The converting algorithm was never even asked its workspace.
  ASSERT_EQ(fake.workspace_asked.size(), 1u);
  EXPECT_EQ(std::get<1>(fake.workspace_asked[0]), CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
}

TEST(ConvPlanning, SixteenBitsAskForTensorOpsAndRunTheFirstProposalWithoutConversion) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    FakeCudnn fake;
    fake.proposals[{ConvPass::kBackwardFilter, CUDNN_TENSOR_NHWC}] = {
        proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
        proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_TENSOR_OP_MATH)};
    ConvPolicy policy = kTf32;
    policy.precision = p;
    const std::optional<ConvChoice> choice = pick(fake, ConvPass::kBackwardFilter, policy);
    ASSERT_TRUE(choice.has_value()) << to_string(p);
    EXPECT_EQ(choice->math, CUDNN_TENSOR_OP_MATH) << to_string(p);
    ASSERT_EQ(fake.requested.size(), 1u);
    EXPECT_EQ(fake.requested[0], CUDNN_TENSOR_OP_MATH) << to_string(p);
  }
}

TEST(ConvPlanning, StrictFp32AsksForFmaAndRunsDefaultMathProposalsUnderIt) {
  FakeCudnn fake;
  fake.proposals[{ConvPass::kBackwardData, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_TENSOR_OP_MATH),
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_DEFAULT_MATH)};
  const std::optional<ConvChoice> choice = pick(fake, ConvPass::kBackwardData, kStrict);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT);
  EXPECT_EQ(choice->math, CUDNN_FMA_MATH);
  EXPECT_EQ(fake.requested.at(0), CUDNN_FMA_MATH);
  ASSERT_EQ(fake.workspace_asked.size(), 1u);
  EXPECT_EQ(std::get<2>(fake.workspace_asked[0]), CUDNN_FMA_MATH);  // under the math it runs
}

TEST(ConvPlanning, DeterministicRunsRefuseAtomicsEvenWhereCudnnCallsThemDeterministic) {
  FakeCudnn fake;
  fake.proposals[{ConvPass::kBackwardFilter, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0),  // atomics, whatever the field says
      proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_DEFAULT_MATH, CUDNN_NON_DETERMINISTIC),
      proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3), proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1)};
  std::string refusals;
  const std::optional<ConvChoice> choice = pick(fake, ConvPass::kBackwardFilter, kTf32, &refusals);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  EXPECT_TRUE(choice->deterministic);

  ConvPolicy fast = kTf32;
  fast.determinism = Determinism::kOff;
  const std::optional<ConvChoice> fastest = pick(fake, ConvPass::kBackwardFilter, fast);
  ASSERT_TRUE(fastest.has_value());
  EXPECT_EQ(fastest->algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  EXPECT_FALSE(fastest->deterministic);  // reported as it is
}

TEST(ConvPlanning, OnlyTheDocumentedAtomicAlgorithmsCountAsNonDeterministic) {
  EXPECT_FALSE(conv_deterministic(ConvPass::kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                  CUDNN_DETERMINISTIC));
  EXPECT_TRUE(conv_deterministic(ConvPass::kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                 CUDNN_DETERMINISTIC));
  EXPECT_FALSE(conv_deterministic(ConvPass::kBackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
                                  CUDNN_DETERMINISTIC));
  // Forward algorithm 0 is IMPLICIT_GEMM, deterministic: the numbers are per pass.
  EXPECT_TRUE(conv_deterministic(ConvPass::kForward, 0, CUDNN_DETERMINISTIC));
  EXPECT_FALSE(conv_deterministic(ConvPass::kForward, 0, CUDNN_NON_DETERMINISTIC));
}

TEST(ConvPlanning, UnsupportedOrTooLargeProposalsArePassedOverWithTheirReasons) {
  FakeCudnn fake;
  fake.proposals[{ConvPass::kForward, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC,
               CUDNN_STATUS_NOT_SUPPORTED),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD)};
  fake.workspace_bytes[CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING] = (size_t{1} << 20) + 1;
  fake.workspace_status[CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD] = CUDNN_STATUS_NOT_SUPPORTED;
  std::string refusals;
  EXPECT_FALSE(pick(fake, ConvPass::kForward, kTf32, &refusals).has_value());
  EXPECT_NE(refusals.find("CUDNN_CONVOLUTION_FWD_ALGO_FFT (not supported"), std::string::npos)
      << refusals;
  EXPECT_NE(refusals.find("FFT_TILING (needs 1048577 bytes of workspace)"), std::string::npos)
      << refusals;
  EXPECT_NE(refusals.find("WINOGRAD (not supported under CUDNN_DEFAULT_MATH"), std::string::npos)
      << refusals;

  fake.workspace_bytes[CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING] = size_t{1} << 20;  // at the limit
  const std::optional<ConvChoice> choice = pick(fake, ConvPass::kForward, kTf32);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algo, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING);
  EXPECT_EQ(choice->workspace, size_t{1} << 20);
}

TEST(ConvPlanning, EveryPassStaysInNhwcWhenEachHasAnAllowedAlgorithm) {
  FakeCudnn fake;
  fake.offer_everywhere(CUDNN_TENSOR_NHWC, proposal(1));
  fake.offer_everywhere(CUDNN_TENSOR_NCHW, proposal(2));
  const ConvPlan plan = plan_convolution(fake, kStrict, "conv2d");
  EXPECT_EQ(plan.layout, CUDNN_TENSOR_NHWC);
  EXPECT_TRUE(plan.nhwc_refusals.empty());
  for (const ConvPass pass : kConvPasses) EXPECT_EQ(plan[pass].algo, 1) << to_string(pass);
}

TEST(ConvPlanning, NoStrictFp32NhwcAlgorithmForOnePassMovesEveryPassToNchw) {
  FakeCudnn fake;
  fake.offer_everywhere(CUDNN_TENSOR_NHWC, proposal(1));
  // A thin first layer: NHWC backward-filter only on tensor cores.
  fake.proposals[{ConvPass::kBackwardFilter, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_TENSOR_OP_MATH)};
  fake.offer_everywhere(CUDNN_TENSOR_NCHW, proposal(2, CUDNN_DEFAULT_MATH));
  const ConvPlan plan = plan_convolution(fake, kStrict, "conv2d");
  EXPECT_EQ(plan.layout, CUDNN_TENSOR_NCHW);
  EXPECT_EQ(plan.nhwc_refusals,
            "backward-filter in NHWC: CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 "
            "(CUDNN_TENSOR_OP_MATH not allowed)");
  for (const ConvPass pass : kConvPasses) {
    EXPECT_EQ(plan[pass].algo, 2) << to_string(pass);
    EXPECT_EQ(plan[pass].math, CUDNN_FMA_MATH) << to_string(pass);
  }
  // With TF32 the tensor-core algorithm is allowed and NHWC is kept.
  EXPECT_EQ(plan_convolution(fake, kTf32, "conv2d").layout, CUDNN_TENSOR_NHWC);
}

TEST(ConvPlanning, NoAllowedAlgorithmInEitherLayoutIsAnErrorNamingTheLayerAndTheReasons) {
  FakeCudnn fake;
  fake.offer_everywhere(CUDNN_TENSOR_NHWC, proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                                    CUDNN_DEFAULT_MATH, CUDNN_NON_DETERMINISTIC));
  try {
    plan_convolution(fake, kTf32, "conv2d(16, 3x3)");
    FAIL() << "planned without an allowed algorithm";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("conv2d(16, 3x3)"), std::string::npos) << what;
    EXPECT_NE(what.find("forward in NHWC: CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM "
                        "(non-deterministic)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("forward in NCHW: none proposed"), std::string::npos) << what;
    EXPECT_NE(what.find("required by --deterministic"), std::string::npos) << what;
  }
}

TEST(ConvPlanning, AlgorithmsAreReportedByCudnnsNames) {
  EXPECT_EQ(conv_algorithm_name(ConvPass::kForward, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM),
            "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM");
  EXPECT_EQ(conv_algorithm_name(ConvPass::kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD),
            "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD");
  EXPECT_EQ(conv_algorithm_name(ConvPass::kBackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3),
            "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3");
  EXPECT_EQ(conv_algorithm_name(ConvPass::kBackwardFilter, 42), "algorithm 42 of backward-filter");
  EXPECT_STREQ(math_type_name(CUDNN_FMA_MATH), "CUDNN_FMA_MATH");
  EXPECT_STREQ(tensor_format_name(CUDNN_TENSOR_NCHW), "NCHW");
}

// ResNet-50's first layer (Conv2D(64, 7x7, stride 2, pad 3)) at 128 images per GPU, as cuDNN
// 9.19 answered on an H200: backward-data's deterministic ALGO_1 needs 521,240,592 bytes of
// workspace, ALGO_0 (atomics) little, and in NCHW FFT_TILING 614,826,000.
constexpr size_t kResNetConv1Algo1 = 521'240'592;
constexpr size_t kResNetConv1FftTiling = 614'826'000;

FakeCudnn resnet50_conv1_at_128() {
  FakeCudnn fake;
  for (const cudnnTensorFormat_t layout : {CUDNN_TENSOR_NHWC, CUDNN_TENSOR_NCHW}) {
    fake.proposals[{ConvPass::kForward, layout}] = {
        proposal(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_TENSOR_OP_MATH)};
    fake.proposals[{ConvPass::kBackwardFilter, layout}] = {
        proposal(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_TENSOR_OP_MATH)};
  }
  fake.proposals[{ConvPass::kBackwardData, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_TENSOR_OP_MATH, CUDNN_NON_DETERMINISTIC),
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_TENSOR_OP_MATH)};
  fake.proposals[{ConvPass::kBackwardData, CUDNN_TENSOR_NCHW}] = {
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_DEFAULT_MATH, CUDNN_NON_DETERMINISTIC),
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING)};
  fake.workspace_at[{ConvPass::kBackwardData, CUDNN_TENSOR_NHWC,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_1}] = kResNetConv1Algo1;
  fake.workspace_at[{ConvPass::kBackwardData, CUDNN_TENSOR_NHWC,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_0}] = 4096;
  fake.workspace_at[{ConvPass::kBackwardData, CUDNN_TENSOR_NCHW,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING}] = kResNetConv1FftTiling;
  fake.workspace_at[{ConvPass::kBackwardData, CUDNN_TENSOR_NCHW,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_0}] = 4096;
  return fake;
}

// An H200 when the first layer is planned: 141 GB, of which the weights, gradients, optimizer
// state and buffers of a step take a few.
constexpr ConvMemory kH200{.free = 139'000'000'000};
// The same device run with --memory-limit-mb 2048, 100 MiB of it in use.
constexpr ConvMemory kH200At2GiB{
    .free = 139'000'000'000, .limit = int64_t{2048} << 20, .in_use = int64_t{100} << 20};

ConvPolicy resnet_policy(const ConvMemory& memory, Determinism determinism) {
  return {Precision::kTf32, determinism, conv_workspace_limit(memory).bytes};
}

TEST(ConvWorkspace, TheLimitIsAnEighthOfTheFreeMemoryOrOfWhatTheMemoryLimitLeaves) {
  const ConvWorkspaceLimit big = conv_workspace_limit(kH200);
  EXPECT_EQ(big.bytes, size_t{17'375'000'000});  // no fixed cap: 139 GB / 8
  EXPECT_EQ(big.rule, "17375000000 = max(shared 0, 139000000000 free / 8)");

  const ConvWorkspaceLimit limited = conv_workspace_limit(kH200At2GiB);
  EXPECT_EQ(limited.bytes, (size_t{2048 - 100} << 20) / 8);
  EXPECT_EQ(limited.rule, "255328256 = max(shared 0, (2147483648 limit - 104857600 in use) / 8)");

  // What the device's memory limit leaves only counts where it is less than the free memory.
  ConvMemory roomy_limit = kH200;
  roomy_limit.limit = int64_t{200} << 30;
  EXPECT_EQ(conv_workspace_limit(roomy_limit).bytes, big.bytes);
  // Past the limit nothing is left, and a full device leaves nothing either.
  ConvMemory over = kH200At2GiB;
  over.in_use = over.limit + 1;
  EXPECT_EQ(conv_workspace_limit(over).bytes, 0u);
}

// Under bf16 and fp16 a convolution keeps its 16-bit copies in the same workspace after cuDNN's
// region (ResNet-50 at 64: about 0.2 GB): they come off what cuDNN may take, so that the whole
// reservation stays within an eighth of the free memory.
TEST(ConvWorkspace, TheConvolutionsOwnCopiesComeOffTheLimit) {
  ConvMemory copies = kH200;
  copies.own = 200'000'000;
  const ConvWorkspaceLimit limit = conv_workspace_limit(copies);
  EXPECT_EQ(limit.bytes, size_t{17'175'000'000});
  EXPECT_EQ(limit.rule,
            "17175000000 = max(shared 0, 139000000000 free / 8) - 200000000 of its own");
  copies.own = 18'000'000'000;  // more than the share: cuDNN gets nothing, no wrap-around
  EXPECT_EQ(conv_workspace_limit(copies).bytes, 0u);
}

TEST(ConvWorkspace, AWorkspaceAlreadySharedIsAlwaysWithinTheLimit) {
  ConvMemory full = kH200At2GiB;
  full.in_use = full.limit;  // the layers planned so far took everything
  full.shared = kResNetConv1Algo1;
  const ConvWorkspaceLimit limit = conv_workspace_limit(full);
  EXPECT_EQ(limit.bytes, kResNetConv1Algo1);
  EXPECT_EQ(limit.rule,
            "521240592 = max(shared 521240592, (2147483648 limit - 2147483648 in use) / 8)");
}

TEST(ConvWorkspace, ABigGpuRunsResNet50sFirstLayerDeterministicAt128ImagesPerGpu) {
  FakeCudnn fake = resnet50_conv1_at_128();
  for (const Determinism d : {Determinism::kPreferred, Determinism::kRequired}) {
    const ConvPlan plan = plan_convolution(fake, resnet_policy(kH200, d), "Conv2D(64, 7x7)");
    EXPECT_EQ(plan.layout, CUDNN_TENSOR_NHWC) << to_string(d);
    const ConvChoice& data = plan[ConvPass::kBackwardData];
    EXPECT_EQ(data.algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1) << to_string(d);
    EXPECT_TRUE(data.deterministic);
    EXPECT_EQ(data.workspace, kResNetConv1Algo1);
    for (const ConvChoice& c : plan.passes) EXPECT_EQ(c.fallback, "") << to_string(d);
  }
}

// ResNet-50's first layer reads the model's input, whose gradient nobody takes: its
// backward-data is neither asked about nor planned, so the 521 MB it took on the H200 at 128
// images is not reserved, and required determinism plans it on a small device too.
TEST(ConvWorkspace, ALayerOnTheModelsInputPlansNoBackwardData) {
  for (const Determinism d : {Determinism::kPreferred, Determinism::kRequired}) {
    FakeCudnn fake = resnet50_conv1_at_128();
    ConvPolicy policy = resnet_policy(kH200At2GiB, d);
    policy.input_gradient = false;
    const ConvPlan plan = plan_convolution(fake, policy, "Conv2D(64, 7x7)");
    EXPECT_EQ(plan.layout, CUDNN_TENSOR_NHWC) << to_string(d);
    EXPECT_FALSE(plan[ConvPass::kBackwardData].planned);
    EXPECT_EQ(plan[ConvPass::kBackwardData].workspace, 0u);
    for (const ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardFilter}) {
      EXPECT_TRUE(plan[pass].planned) << to_string(pass);
      EXPECT_TRUE(plan[pass].deterministic) << to_string(pass);
      EXPECT_EQ(plan[pass].fallback, "") << to_string(pass);
    }
    EXPECT_EQ(fake.requested.size(), 2u) << "asked about a pass that never runs";
    for (const auto& [pass, algo, math] : fake.workspace_asked)
      EXPECT_NE(pass, ConvPass::kBackwardData) << algo;
  }
}

TEST(ConvWorkspace, ASmallDeviceFallsBackToTheFastestAlgorithmThatFitsAndSaysWhy) {
  FakeCudnn fake = resnet50_conv1_at_128();
  const ConvPolicy policy = resnet_policy(kH200At2GiB, Determinism::kPreferred);
  const ConvPlan plan = plan_convolution(fake, policy, "Conv2D(64, 7x7)");
  // NHWC kept: NCHW has no deterministic backward-data within the limit either.
  EXPECT_EQ(plan.layout, CUDNN_TENSOR_NHWC);
  const ConvChoice& data = plan[ConvPass::kBackwardData];
  EXPECT_EQ(data.algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  EXPECT_FALSE(data.deterministic);
  EXPECT_EQ(data.fallback,
            "no deterministic algorithm within 255328256 bytes of workspace: "
            "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 (non-deterministic); "
            "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 (needs 521240592 bytes of workspace)");
  // The other passes had deterministic algorithms and keep them.
  for (const ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardFilter}) {
    EXPECT_TRUE(plan[pass].deterministic) << to_string(pass);
    EXPECT_EQ(plan[pass].fallback, "") << to_string(pass);
  }
}

TEST(ConvWorkspace, RequiredDeterminismOnASmallDeviceIsAnErrorNamingTheWorkspaceItWouldNeed) {
  FakeCudnn fake = resnet50_conv1_at_128();
  try {
    plan_convolution(fake, resnet_policy(kH200At2GiB, Determinism::kRequired), "Conv2D(64, 7x7)");
    FAIL() << "planned a non-deterministic algorithm where determinism was required";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Conv2D(64, 7x7): cuDNN offers no allowed algorithm within 255328256 "
                        "bytes of workspace among deterministic ones"),
              std::string::npos)
        << what;
    // NHWC's ALGO_1 needs less than NCHW's FFT_TILING.
    EXPECT_NE(what.find("a deterministic backward-data would need 521240592 bytes of workspace "
                        "(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 in NHWC)"),
              std::string::npos)
        << what;
  }
}

TEST(ConvWorkspace, WithoutDeterminismTheFastestRunsAndNoFallbackIsRecorded) {
  FakeCudnn fake = resnet50_conv1_at_128();
  const ConvPlan plan =
      plan_convolution(fake, resnet_policy(kH200, Determinism::kOff), "Conv2D(64, 7x7)");
  EXPECT_EQ(plan.layout, CUDNN_TENSOR_NHWC);
  EXPECT_EQ(plan[ConvPass::kBackwardData].algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  EXPECT_FALSE(plan[ConvPass::kBackwardData].deterministic);
  EXPECT_EQ(plan[ConvPass::kBackwardData].fallback, "");  // nothing was given up
}

TEST(ConvWorkspace, PreferredDeterminismTakesNchwBeforeFallingBackInNhwc) {
  FakeCudnn fake;
  fake.offer_everywhere(CUDNN_TENSOR_NHWC, proposal(1));
  fake.proposals[{ConvPass::kBackwardData, CUDNN_TENSOR_NHWC}] = {
      proposal(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)};  // atomics only
  fake.offer_everywhere(CUDNN_TENSOR_NCHW, proposal(2));
  ConvPolicy policy = kTf32;
  policy.determinism = Determinism::kPreferred;
  const ConvPlan plan = plan_convolution(fake, policy, "conv2d");
  EXPECT_EQ(plan.layout, CUDNN_TENSOR_NCHW);
  for (const ConvChoice& c : plan.passes) {
    EXPECT_TRUE(c.deterministic);
    EXPECT_EQ(c.fallback, "");
  }
}

// --conv-search benchmark: cuDNN's timed list (fastest first) goes through the same rules as
// the heuristics' proposals, and the choice keeps the time its algorithm was measured at.
TEST(ConvBenchmark, TimedCandidatesArePickedInTheirMeasuredOrderUnderTheSameRules) {
  FakeCudnn fake;
  const auto timed = [](int algo, float ms, cudnnMathType_t math = CUDNN_DEFAULT_MATH,
                        cudnnStatus_t status = CUDNN_STATUS_SUCCESS) {
    ConvCandidate c = proposal(algo, math, CUDNN_DETERMINISTIC, status);
    c.time_ms = ms;
    return c;
  };
  fake.proposals[{ConvPass::kBackwardData, CUDNN_TENSOR_NHWC}] = {
      timed(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, 0.31f, CUDNN_DEFAULT_MATH,
            CUDNN_STATUS_ALLOC_FAILED),  // needed more workspace than offered: not timed
      timed(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, 0.42f),
      timed(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, 0.57f, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
      timed(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, 0.93f)};
  ConvPolicy policy = kTf32;
  policy.determinism = Determinism::kPreferred;
  std::optional<ConvChoice> choice = pick(fake, ConvPass::kBackwardData, policy);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  EXPECT_FLOAT_EQ(choice->time_ms, 0.93f);
  policy.determinism = Determinism::kOff;
  choice = pick(fake, ConvPass::kBackwardData, policy);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  EXPECT_FLOAT_EQ(choice->time_ms, 0.42f);
}

TEST(ConvBenchmark, TheTimeIsCudnns) {
  cudnnConvolutionFwdAlgoPerf_t perf{};
  perf.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  perf.status = CUDNN_STATUS_SUCCESS;
  perf.time = 0.125f;
  perf.mathType = CUDNN_TENSOR_OP_MATH;
  perf.determinism = CUDNN_DETERMINISTIC;
  const ConvCandidate c = candidate_of(perf);
  EXPECT_EQ(c.algo, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  EXPECT_EQ(c.math, CUDNN_TENSOR_OP_MATH);
  EXPECT_FLOAT_EQ(c.time_ms, 0.125f);
}

// The timing is offered the most workspace an algorithm planning could choose needs: not a
// failed proposal's, a converting one's or one beyond the limit.
TEST(ConvBenchmark, TheTimingIsOfferedTheLargestWorkspacePlanningCouldChoose) {
  FakeCudnn fake;
  const std::vector<ConvCandidate> proposed = {
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC,
               CUDNN_STATUS_NOT_SUPPORTED),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_GEMM),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
      proposal(CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING)};
  fake.workspace_bytes = {{CUDNN_CONVOLUTION_FWD_ALGO_FFT, 900},
                          {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, 800},
                          {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, 300},
                          {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, 500},
                          {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, 700}};
  ConvPolicy policy = kTf32;
  policy.workspace_limit = 600;
  EXPECT_EQ(conv_timing_workspace(fake, ConvPass::kForward, CUDNN_TENSOR_NHWC, proposed, policy),
            500u);
  policy.workspace_limit = 200;
  EXPECT_EQ(conv_timing_workspace(fake, ConvPass::kForward, CUDNN_TENSOR_NHWC, proposed, policy),
            0u);
}

// A shape is timed once per process: a model's repeated blocks and a sweep's later points
// reuse the timings; another key (another shape, GPU or workspace) is timed anew.
TEST(ConvBenchmark, EachKeyIsTimedOnceAndItsTimingsReused) {
  int timings = 0;
  const auto find = [&timings] {
    ++timings;
    ConvCandidate c = proposal(CUDNN_CONVOLUTION_FWD_ALGO_GEMM);
    c.time_ms = static_cast<float>(timings);
    return std::vector<ConvCandidate>{c};
  };
  const std::string key = "ConvBenchmark test: gpu 0 forward NHWC n 8";
  const std::vector<ConvCandidate> first = cached_conv_timing(key, find);
  const std::vector<ConvCandidate> again = cached_conv_timing(key, find);
  EXPECT_EQ(timings, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FLOAT_EQ(again[0].time_ms, first[0].time_ms);
  const std::vector<ConvCandidate> other = cached_conv_timing(key + " on gpu 1", find);
  EXPECT_EQ(timings, 2);
  EXPECT_FLOAT_EQ(other[0].time_ms, 2.0f);
}

}  // namespace
}  // namespace scalescope
