// How a cuDNN convolution is planned: which algorithm each pass runs, under which math, in
// which layout. Plain functions of cuDNN's enums and of what cuDNN answers, so that every
// rule is tested wherever cudnn.h is (no GPU needed); the kernel (cuda_conv.cpp) only asks
// cuDNN the questions (ConvQueries) and runs the answer.
//
// - fp32 data is never converted to fp16: CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION would let
//   cuDNN do that, where gradients scaled by 1/batch become subnormal or zero, and the time
//   would be of fp16 kernels reported as TF32. With TF32 allowed the descriptors ask for
//   CUDNN_DEFAULT_MATH (fp32 on tensor cores as TF32, as PyTorch does), in strict fp32 for
//   CUDNN_FMA_MATH.
// - Under bf16 and fp16 the tensors themselves are 16-bit (cuDNN has no math type that rounds
//   fp32 tensors to bf16) and the descriptors ask for CUDNN_TENSOR_OP_MATH, as PyTorch does;
//   the convolution's compute type stays float (cuDNN's PSEUDO_BFLOAT16 and PSEUDO_HALF
//   configurations: fp32 accumulation). Conversion is refused there too: bf16 converted to
//   fp16 would lose bf16's range.
// - Deterministic algorithms (those that do not accumulate with atomics) are preferred, so
//   that two runs on one GPU give bit-identical weights, as the CPU path does. A pass with
//   none within the workspace limit runs the fastest one that fits, and says why, unless
//   determinism is required (then that is an error naming the workspace it would take).
// - The workspace limit is a share of the device's free memory (conv_workspace_limit): the
//   convolutions of one replica share one workspace, so a large limit costs only the largest
//   choice, not one workspace per layer.
// - NHWC first (the activations' own layout, no transposes); where cuDNN offers no allowed
//   algorithm for some pass in NHWC (thin first layers, strict fp32), every pass goes to NCHW
//   descriptors with transposes around them.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "models/kernels.h"

namespace scalescope {

// The data type of a convolution's tensors under `precision`: CUDNN_DATA_FLOAT in fp32 and
// tf32, CUDNN_DATA_BFLOAT16 and CUDNN_DATA_HALF under bf16 and fp16.
cudnnDataType_t conv_data_type(Precision precision);

// The math the descriptors ask cuDNN's heuristics under.
cudnnMathType_t conv_requested_math(Precision precision);

// The math to run an algorithm under, given the math cuDNN proposes with it; nullopt when
// the algorithm is refused: one that converts to fp16 always, one that needs tensor cores in
// strict fp32.
std::optional<cudnnMathType_t> conv_math_for(cudnnMathType_t proposed, Precision precision);

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };
inline constexpr std::array<ConvPass, 3> kConvPasses = {ConvPass::kForward, ConvPass::kBackwardData,
                                                        ConvPass::kBackwardFilter};
const char* to_string(ConvPass pass);  // "forward", "backward-data", "backward-filter"

// cuDNN's name of an algorithm of `pass` ("CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM"), or
// "algorithm N of <pass>" for a number this code does not know.
std::string conv_algorithm_name(ConvPass pass, int algo);
const char* math_type_name(cudnnMathType_t math);       // "CUDNN_DEFAULT_MATH", ...
const char* tensor_format_name(cudnnTensorFormat_t f);  // "NHWC", "NCHW", ...

// Whether an algorithm is deterministic: as cuDNN says in its proposal, and never one that
// cuDNN's header documents as accumulating with atomics (backward-data ALGO_0,
// backward-filter ALGO_0 and ALGO_3), whatever the proposal says.
bool conv_deterministic(ConvPass pass, int algo, cudnnDeterminism_t reported);

// One algorithm cuDNN proposes for a pass, by its heuristics or timed (the fields of the
// three cudnnConvolution*AlgoPerf_t structs that planning reads).
struct ConvCandidate {
  int algo = 0;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  cudnnDeterminism_t determinism = CUDNN_DETERMINISTIC;
  float time_ms = -1;  // what it took when cuDNN timed it (cudnnFind*); the heuristics' -1
};
template <class Perf>
ConvCandidate candidate_of(const Perf& perf) {
  return {static_cast<int>(perf.algo), perf.status, perf.mathType, perf.determinism, perf.time};
}

// The memory a convolution's workspace limit is taken from, as it is when the convolution is
// planned.
struct ConvMemory {
  size_t free = 0;     // what the driver has free on the device (cudaMemGetInfo)
  int64_t limit = 0;   // the device's emulated size (--memory-limit-mb; 0: none)
  int64_t in_use = 0;  // what the device's allocator has handed out (counted by the limit)
  size_t shared = 0;   // the workspace the replica's convolutions already share
  size_t own = 0;      // what the convolution keeps there beside cuDNN's (its 16-bit copies)
};

// The divisor of the free memory: what the convolutions may take together (they share one
// workspace), leaving the rest to what is allocated after them, the activations above all.
inline constexpr size_t kConvWorkspaceShare = 8;

struct ConvWorkspaceLimit {
  size_t bytes = 0;
  std::string rule;  // how: "17500000000 = max(shared 0, 140000000000 free / 8)"
};

// The most workspace one pass of a convolution may take: max(W, F / 8) less what the
// convolution keeps in the workspace itself, with W the workspace the replica's convolutions
// already share (an algorithm within it costs nothing more) and F the device's free memory, or
// what the memory limit leaves (limit - in use) when that is less. No fixed cap: on a large
// device a layer's fastest deterministic algorithm fits.
ConvWorkspaceLimit conv_workspace_limit(const ConvMemory& memory);

struct ConvPolicy {
  Precision precision = Precision::kTf32;
  Determinism determinism = Determinism::kPreferred;
  size_t workspace_limit = 0;  // bytes one pass may take
  // False for a layer on the model's input (LayerBinding::input_gradient): its backward-data
  // is not planned, so its workspace is not reserved and a lack of NHWC algorithms for it
  // cannot move the layer to NCHW.
  bool input_gradient = true;
  bool plans(ConvPass pass) const { return input_gradient || pass != ConvPass::kBackwardData; }
};

// What planning asks cuDNN, for descriptors in `layout`. Implemented over a real handle by
// the kernel and by fakes in tests.
class ConvQueries {
 public:
  virtual ~ConvQueries() = default;
  // The proposals, fastest first (by cuDNN's heuristics, or as timed under --conv-search
  // benchmark), for descriptors in `layout` asking for `requested` math.
  virtual std::vector<ConvCandidate> candidates(ConvPass pass, cudnnTensorFormat_t layout,
                                                cudnnMathType_t requested) = 0;
  // The workspace `algo` needs under `math`; a status other than success when cuDNN cannot
  // run that combination.
  virtual cudnnStatus_t workspace(ConvPass pass, cudnnTensorFormat_t layout, int algo,
                                  cudnnMathType_t math, size_t* bytes) = 0;
};

struct ConvChoice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool deterministic = true;
  size_t workspace = 0;
  // Determinism preferred but no deterministic algorithm fitted: why ("" otherwise).
  std::string fallback{};
  float time_ms = -1;   // the candidate's (timed, or -1)
  bool planned = true;  // false: the policy leaves this pass out (ConvPolicy::plans)
};

// Why a pass has no algorithm under a policy.
struct ConvRefusals {
  std::string text;  // each proposal passed over and why ("none proposed" when none was)
  // The least workspace of the allowed deterministic proposals refused only for their
  // workspace (0: none was): what a deterministic plan of this pass would take.
  size_t deterministic_need = 0;
  int deterministic_algo = -1;  // that proposal's algorithm
};

struct ConvPlan {
  cudnnTensorFormat_t layout = CUDNN_TENSOR_NHWC;
  std::array<ConvChoice, 3> passes;  // in kConvPasses order
  std::string nhwc_refusals;         // NCHW plans: why NHWC had no algorithm
  const ConvChoice& operator[](ConvPass pass) const { return passes[static_cast<size_t>(pass)]; }
};

// The first (fastest, by the heuristics or as timed) proposal of `pass` in `layout` that succeeded,
// has its math allowed and fits the workspace limit, deterministic unless the policy's determinism
// is off; when preferred and no deterministic one fits, the first that fits with
// ConvChoice::fallback saying why. nullopt when none does, with `refusals` saying why each proposal
// was passed over.
std::optional<ConvChoice> pick_conv_algorithm(ConvQueries& queries, ConvPass pass,
                                              cudnnTensorFormat_t layout, const ConvPolicy& policy,
                                              ConvRefusals* refusals = nullptr);

// Under --conv-search benchmark, the workspace to time `pass`'s algorithms with: the most any
// of the heuristics' `proposed` that `policy` would allow (succeeded, math allowed) needs within
// its limit, so that every algorithm planning could choose is timed and none beyond the limit
// allocates.
size_t conv_timing_workspace(ConvQueries& queries, ConvPass pass, cudnnTensorFormat_t layout,
                             const std::vector<ConvCandidate>& proposed, const ConvPolicy& policy);

// Every pass in NHWC when each has a deterministic algorithm there, else every pass in NCHW
// when each has one there; with determinism preferred, then NHWC and then NCHW where the
// passes without a deterministic algorithm run the fastest that fits (determinism off: the
// fastest in NHWC, else in NCHW). Throws Error naming `layer`, the pass and the refusals when
// no layout has a plan, and with determinism required the workspace a deterministic
// algorithm would take.
ConvPlan plan_convolution(ConvQueries& queries, const ConvPolicy& policy, const std::string& layer);

}  // namespace scalescope
