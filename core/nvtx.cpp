#include "core/nvtx.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <mutex>

namespace scalescope::nvtx {

// Without NVTX, the empty inline versions in core/nvtx.h are all there is.
#if SCALESCOPE_NVTX_ENABLED
inline namespace enabled {

namespace detail {
namespace {

constexpr std::array<Phase, 10> kPhases = {
    Phase::kInput,     Phase::kH2D,  Phase::kForward, Phase::kBackward, Phase::kAllReduce,
    Phase::kOptimizer, Phase::kStep, Phase::kProfile, Phase::kGradCast, Phase::kBatchNormSync};
constexpr size_t index_of(Phase phase) {
  return static_cast<size_t>(phase) - 1;
}

}  // namespace

const nvtx3::registered_string_in<Domain>& message(Phase phase) {
  static const auto strings = [] {
    std::array<std::unique_ptr<nvtx3::registered_string_in<Domain>>, kPhases.size()> s;
    for (Phase p : kPhases) {
      s[index_of(p)] = std::make_unique<nvtx3::registered_string_in<Domain>>(phase_name(p));
    }
    return s;
  }();
  return *strings[index_of(phase)];
}

const nvtx3::named_category_in<Domain>& category(Phase phase) {
  static const auto categories = [] {
    std::array<std::unique_ptr<nvtx3::named_category_in<Domain>>, kPhases.size()> c;
    for (Phase p : kPhases) {
      c[index_of(p)] = std::make_unique<nvtx3::named_category_in<Domain>>(static_cast<uint32_t>(p),
                                                                          phase_name(p));
    }
    return c;
  }();
  return *categories[index_of(phase)];
}

nvtx3::color color(Phase phase) {
  const PhaseColor c = phase_color(phase);
  return nvtx3::rgb{c.red, c.green, c.blue};
}

}  // namespace detail

void initialize() {
  // NVTX initialises itself lazily on its first call, writing its function table without
  // synchronisation: threads making their first calls together race (ThreadSanitizer saw it
  // with pipeline workers). Initialising once, explicitly, orders that before every call.
  static std::once_flag once;
  std::call_once(once, [] { nvtxInitialize(nullptr); });
}

void name_current_thread(const char* name) {
  initialize();
  nvtxNameOsThreadA(static_cast<uint32_t>(::syscall(SYS_gettid)), name);
}

}  // namespace enabled

#endif

}  // namespace scalescope::nvtx
