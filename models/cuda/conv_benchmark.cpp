#include "models/cuda/conv_benchmark.h"

#include <map>
#include <mutex>

namespace scalescope {

std::vector<ConvCandidate> find_conv_algorithms(ConvPass pass, const ConvFindArgs& a) {
  switch (pass) {
    case ConvPass::kForward:
      return conv_candidates_from<cudnnConvolutionFwdAlgoPerf_t>(
          a.handle, cudnnGetConvolutionForwardAlgorithmMaxCount,
          [&](int n, int* returned, auto* perf) {
            return cudnnFindConvolutionForwardAlgorithmEx(a.handle, a.x, a.x_data, a.w, a.w_data,
                                                          a.conv, a.y, a.y_data, n, returned, perf,
                                                          a.workspace, a.workspace_bytes);
          });
    case ConvPass::kBackwardData:
      return conv_candidates_from<cudnnConvolutionBwdDataAlgoPerf_t>(
          a.handle, cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
          [&](int n, int* returned, auto* perf) {
            return cudnnFindConvolutionBackwardDataAlgorithmEx(
                a.handle, a.w, a.w_data, a.y, a.y_data, a.conv, a.x, a.x_data, n, returned, perf,
                a.workspace, a.workspace_bytes);
          });
    case ConvPass::kBackwardFilter:
      return conv_candidates_from<cudnnConvolutionBwdFilterAlgoPerf_t>(
          a.handle, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
          [&](int n, int* returned, auto* perf) {
            return cudnnFindConvolutionBackwardFilterAlgorithmEx(
                a.handle, a.x, a.x_data, a.y, a.y_data, a.conv, a.w, a.w_data, n, returned, perf,
                a.workspace, a.workspace_bytes);
          });
  }
  return {};
}

std::vector<ConvCandidate> cached_conv_timing(
    const std::string& key, const std::function<std::vector<ConvCandidate>()>& find) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<ConvCandidate>> timings;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = timings.find(key);
  if (found != timings.end()) return found->second;
  std::vector<ConvCandidate> timed = find();
  timings.emplace(key, timed);
  return timed;
}

}  // namespace scalescope
