#include "models/cuda/conv_planning.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace scalescope {

cudnnDataType_t conv_data_type(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return CUDNN_DATA_BFLOAT16;
    case Precision::kFp16:
      return CUDNN_DATA_HALF;
    case Precision::kFp32:
    case Precision::kTf32:
      break;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnMathType_t conv_requested_math(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return CUDNN_FMA_MATH;
    case Precision::kTf32:
      return CUDNN_DEFAULT_MATH;
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return CUDNN_TENSOR_OP_MATH;
}

std::optional<cudnnMathType_t> conv_math_for(cudnnMathType_t proposed, Precision precision) {
  const bool strict = precision == Precision::kFp32;
  switch (proposed) {
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return std::nullopt;
    case CUDNN_TENSOR_OP_MATH:
      if (strict) return std::nullopt;
      return proposed;
    case CUDNN_DEFAULT_MATH:
    case CUDNN_FMA_MATH:
      return strict ? CUDNN_FMA_MATH : proposed;
  }
  return std::nullopt;  // a math type this code does not know: not trusted
}

const char* to_string(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward:
      return "forward";
    case ConvPass::kBackwardData:
      return "backward-data";
    case ConvPass::kBackwardFilter:
      return "backward-filter";
  }
  return "?";
}

namespace {

const char* forward_algorithm_name(int algo) {
  switch (static_cast<cudnnConvolutionFwdAlgo_t>(algo)) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "CUDNN_CONVOLUTION_FWD_ALGO_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "CUDNN_CONVOLUTION_FWD_ALGO_FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_FWD_ALGO_COUNT:
      break;
  }
  return nullptr;
}

const char* backward_data_algorithm_name(int algo) {
  switch (static_cast<cudnnConvolutionBwdDataAlgo_t>(algo)) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT:
      break;
  }
  return nullptr;
}

const char* backward_filter_algorithm_name(int algo) {
  switch (static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo)) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT:
      break;
  }
  return nullptr;
}

}  // namespace

std::string conv_algorithm_name(ConvPass pass, int algo) {
  const char* name = nullptr;
  switch (pass) {
    case ConvPass::kForward:
      name = forward_algorithm_name(algo);
      break;
    case ConvPass::kBackwardData:
      name = backward_data_algorithm_name(algo);
      break;
    case ConvPass::kBackwardFilter:
      name = backward_filter_algorithm_name(algo);
      break;
  }
  if (name != nullptr) return name;
  return fmt::format("algorithm {} of {}", algo, to_string(pass));
}

const char* math_type_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH:
      return "CUDNN_DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH:
      return "CUDNN_TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "CUDNN_FMA_MATH";
  }
  return "unknown cuDNN math type";
}

const char* tensor_format_name(cudnnTensorFormat_t format) {
  switch (format) {
    case CUDNN_TENSOR_NCHW:
      return "NCHW";
    case CUDNN_TENSOR_NHWC:
      return "NHWC";
    case CUDNN_TENSOR_NCHW_VECT_C:
      return "NCHW_VECT_C";
  }
  return "unknown cuDNN tensor format";
}

bool conv_deterministic(ConvPass pass, int algo, cudnnDeterminism_t reported) {
  if (reported != CUDNN_DETERMINISTIC) return false;
  switch (pass) {
    case ConvPass::kForward:
      return true;
    case ConvPass::kBackwardData:
      return algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    case ConvPass::kBackwardFilter:
      return algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 &&
             algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  }
  return false;
}

ConvWorkspaceLimit conv_workspace_limit(const ConvMemory& memory) {
  size_t available = memory.free;
  std::string source = fmt::format("{} free", memory.free);
  if (memory.limit > 0) {
    const auto left = static_cast<size_t>(std::max<int64_t>(memory.limit - memory.in_use, 0));
    if (left < available) {
      available = left;
      source = fmt::format("({} limit - {} in use)", memory.limit, memory.in_use);
    }
  }
  const size_t total = std::max(memory.shared, available / kConvWorkspaceShare);
  const size_t bytes = total > memory.own ? total - memory.own : 0;
  std::string rule = fmt::format("{} = max(shared {}, {} / {})", bytes, memory.shared, source,
                                 kConvWorkspaceShare);
  if (memory.own > 0) rule += fmt::format(" - {} of its own", memory.own);
  return {bytes, rule};
}

namespace {

// The first proposal that succeeded, has its math allowed and fits the limit, deterministic
// ones only when `deterministic_only`; nullopt with `refusals` filled when none does.
std::optional<ConvChoice> first_fitting(ConvQueries& queries, ConvPass pass,
                                        cudnnTensorFormat_t layout, const ConvPolicy& policy,
                                        bool deterministic_only, ConvRefusals& refusals) {
  const std::vector<ConvCandidate> proposed =
      queries.candidates(pass, layout, conv_requested_math(policy.precision));
  refusals = {};
  const auto refuse = [&](const ConvCandidate& c, const std::string& reason) {
    refusals.text += fmt::format("{}{} ({})", refusals.text.empty() ? "" : "; ",
                                 conv_algorithm_name(pass, c.algo), reason);
  };
  for (const ConvCandidate& c : proposed) {
    if (c.status != CUDNN_STATUS_SUCCESS) {
      refuse(c, fmt::format("not supported: {}", cudnnGetErrorString(c.status)));
      continue;
    }
    const std::optional<cudnnMathType_t> math = conv_math_for(c.math, policy.precision);
    if (!math) {
      refuse(c, fmt::format("{} not allowed", math_type_name(c.math)));
      continue;
    }
    const bool deterministic = conv_deterministic(pass, c.algo, c.determinism);
    if (deterministic_only && !deterministic) {
      refuse(c, "non-deterministic");
      continue;
    }
    size_t bytes = 0;
    const cudnnStatus_t status = queries.workspace(pass, layout, c.algo, *math, &bytes);
    if (status != CUDNN_STATUS_SUCCESS) {
      refuse(c, fmt::format("not supported under {}: {}", math_type_name(*math),
                            cudnnGetErrorString(status)));
      continue;
    }
    if (bytes > policy.workspace_limit) {
      refuse(c, fmt::format("needs {} bytes of workspace", bytes));
      if (deterministic &&
          (refusals.deterministic_need == 0 || bytes < refusals.deterministic_need)) {
        refusals.deterministic_need = bytes;
        refusals.deterministic_algo = c.algo;
      }
      continue;
    }
    return ConvChoice{c.algo, *math, deterministic, bytes, "", c.time_ms};
  }
  if (proposed.empty()) refusals.text = "none proposed";
  return std::nullopt;
}

}  // namespace

std::optional<ConvChoice> pick_conv_algorithm(ConvQueries& queries, ConvPass pass,
                                              cudnnTensorFormat_t layout, const ConvPolicy& policy,
                                              ConvRefusals* refusals) {
  ConvRefusals deterministic;
  const bool any = policy.determinism == Determinism::kOff;
  std::optional<ConvChoice> choice =
      first_fitting(queries, pass, layout, policy, !any, deterministic);
  if (choice || policy.determinism != Determinism::kPreferred) {
    if (!choice && refusals != nullptr) *refusals = std::move(deterministic);
    return choice;
  }
  ConvRefusals fastest;
  choice = first_fitting(queries, pass, layout, policy, false, fastest);
  if (!choice) {
    if (refusals != nullptr) *refusals = std::move(fastest);
    return std::nullopt;
  }
  if (!choice->deterministic) {
    choice->fallback = fmt::format("no deterministic algorithm within {} bytes of workspace: {}",
                                   policy.workspace_limit, deterministic.text);
  }
  return choice;
}

size_t conv_timing_workspace(ConvQueries& queries, ConvPass pass, cudnnTensorFormat_t layout,
                             const std::vector<ConvCandidate>& proposed, const ConvPolicy& policy) {
  size_t offered = 0;
  for (const ConvCandidate& c : proposed) {
    const std::optional<cudnnMathType_t> math = conv_math_for(c.math, policy.precision);
    size_t bytes = 0;
    if (c.status == CUDNN_STATUS_SUCCESS && math &&
        queries.workspace(pass, layout, c.algo, *math, &bytes) == CUDNN_STATUS_SUCCESS &&
        bytes <= policy.workspace_limit)
      offered = std::max(offered, bytes);
  }
  return offered;
}

namespace {

// Why a layout has no plan: its first pass without an algorithm.
struct LayoutFailure {
  std::string text;  // "backward-data in NHWC: <refusals>"
  cudnnTensorFormat_t layout = CUDNN_TENSOR_NHWC;
  ConvPass pass = ConvPass::kForward;
  ConvRefusals refusals;
};

// Every pass in `layout`, or nullopt with `failure` naming the first pass that has none.
std::optional<ConvPlan> plan_in(ConvQueries& queries, const ConvPolicy& policy,
                                cudnnTensorFormat_t layout, LayoutFailure* failure) {
  ConvPlan plan;
  plan.layout = layout;
  for (const ConvPass pass : kConvPasses) {
    if (!policy.plans(pass)) {
      plan.passes[static_cast<size_t>(pass)].planned = false;
      continue;
    }
    ConvRefusals refusals;
    std::optional<ConvChoice> choice =
        pick_conv_algorithm(queries, pass, layout, policy, &refusals);
    if (!choice) {
      failure->text =
          fmt::format("{} in {}: {}", to_string(pass), tensor_format_name(layout), refusals.text);
      failure->layout = layout;
      failure->pass = pass;
      failure->refusals = std::move(refusals);
      return std::nullopt;
    }
    plan.passes[static_cast<size_t>(pass)] = std::move(*choice);
  }
  return plan;
}

// "; a deterministic backward-data would need N bytes of workspace (ALGO_1 in NHWC)" for the
// layout whose failing pass needs the least, or "" when neither names a need.
std::string deterministic_need(const LayoutFailure& nhwc, const LayoutFailure& nchw) {
  const LayoutFailure* least = nullptr;
  for (const LayoutFailure* f : {&nhwc, &nchw}) {
    const size_t need = f->refusals.deterministic_need;
    if (need > 0 && (least == nullptr || need < least->refusals.deterministic_need)) least = f;
  }
  if (least == nullptr) return "";
  return fmt::format("; a deterministic {} would need {} bytes of workspace ({} in {})",
                     to_string(least->pass), least->refusals.deterministic_need,
                     conv_algorithm_name(least->pass, least->refusals.deterministic_algo),
                     tensor_format_name(least->layout));
}

}  // namespace

ConvPlan plan_convolution(ConvQueries& queries, const ConvPolicy& policy,
                          const std::string& layer) {
  // Deterministic in either layout before any fallback: NCHW's transposes cost less than
  // giving up bit-identical runs.
  ConvPolicy first = policy;
  if (policy.determinism == Determinism::kPreferred) first.determinism = Determinism::kRequired;
  LayoutFailure nhwc;
  LayoutFailure nchw;
  for (const ConvPolicy& p : {first, policy}) {
    if (auto plan = plan_in(queries, p, CUDNN_TENSOR_NHWC, &nhwc)) return std::move(*plan);
    if (auto plan = plan_in(queries, p, CUDNN_TENSOR_NCHW, &nchw)) {
      plan->nhwc_refusals = nhwc.text;
      return std::move(*plan);
    }
    if (policy.determinism != Determinism::kPreferred) break;
  }
  const bool required = policy.determinism == Determinism::kRequired;
  throw_error(fmt::format(
      "{}: cuDNN offers no allowed algorithm within {} bytes of workspace{}{} — {}; {}{}", layer,
      policy.workspace_limit,
      policy.precision != Precision::kFp32 ? "" : " in strict fp32 (--precision fp32)",
      required ? " among deterministic ones (determinism required by --deterministic; without "
                 "it a layer with none runs the fastest that fits)"
               : "",
      nhwc.text, nchw.text, required ? deterministic_need(nhwc, nchw) : ""));
}

}  // namespace scalescope
