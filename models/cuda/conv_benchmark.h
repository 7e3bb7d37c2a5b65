// cuDNN's benchmark mode for the passes of a convolution (--conv-search benchmark, PyTorch's
// torch.backends.cudnn.benchmark): every algorithm of a pass timed once by
// cudnnFind*AlgorithmEx on device buffers of the layer's shapes, the fastest first, in place of
// the heuristics' ranking. The planning rules (conv_planning.h) then pick among the timed
// candidates as among the heuristics' proposals: the same math, determinism and workspace rules.
//
// A pass is timed once per process and shape: the timings are cached under a key naming all
// they depend on (the GPU, the descriptors, the math asked for, the workspace offered), so a
// model's repeated blocks, its other replicas' plans on the same GPU and a sweep's later points
// reuse them, as PyTorch's benchmark cache does.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "models/cuda/conv_planning.h"

namespace scalescope {

// What cuDNN answers about a pass (heuristics or timing) as planning's candidates, in its
// order: `max_count_of(handle, &n)` says how many it may return, `ask(n, &returned, perf)`
// fills the cudnnConvolution*AlgoPerf_t array.
template <class Perf, class MaxCount, class Ask>
std::vector<ConvCandidate> conv_candidates_from(cudnnHandle_t handle, MaxCount max_count_of,
                                                Ask ask) {
  int max_count = 0;
  SS_CHECK_CUDNN(max_count_of(handle, &max_count));
  std::vector<Perf> perf(static_cast<size_t>(std::max(max_count, 0)));
  int returned = 0;
  SS_CHECK_CUDNN(ask(max_count, &returned, perf.data()));
  std::vector<ConvCandidate> out;
  for (int i = 0; i < returned && i < max_count; ++i)
    out.push_back(candidate_of(perf[static_cast<size_t>(i)]));
  return out;
}

// One pass's descriptors (in the layout and with the math type being asked about) and device
// buffers of their sizes. cuDNN writes the pass's result buffer (y forward, x backward-data, w
// backward-filter) and the workspace, and reads the others whatever they hold.
struct ConvFindArgs {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  void* x_data = nullptr;
  void* w_data = nullptr;
  void* y_data = nullptr;
  void* workspace = nullptr;  // algorithms that need more than workspace_bytes are not timed
  size_t workspace_bytes = 0;
};

// The algorithms of `pass` as cudnnFind*AlgorithmEx timed them, fastest first, with those that
// could not run (a status other than success) as cuDNN lists them.
// REQUIRES: the handle's GPU current. Blocks until the timing is done.
std::vector<ConvCandidate> find_conv_algorithms(ConvPass pass, const ConvFindArgs& args);

// The timed candidates for `key`: an earlier call's for the same key, else `find`'s, kept for
// later calls. Thread-safe; `find` runs under the cache's lock, so that two replicas planning
// the same shape on one GPU time it once and never at the same time.
std::vector<ConvCandidate> cached_conv_timing(
    const std::string& key, const std::function<std::vector<ConvCandidate>()>& find);

}  // namespace scalescope
