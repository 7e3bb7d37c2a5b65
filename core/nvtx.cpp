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

// Indexed by id (kCategories is in increasing order of id).
template <class Handle>
using ById = std::array<std::unique_ptr<Handle>, kCategories.back().id + 1>;

}  // namespace

const nvtx3::registered_string_in<Domain>& message(const Category& c) {
  static const auto strings = [] {
    ById<nvtx3::registered_string_in<Domain>> s;
    for (const Category& each : kCategories) {
      s[each.id] = std::make_unique<nvtx3::registered_string_in<Domain>>(each.name);
    }
    return s;
  }();
  return *strings[c.id];
}

const nvtx3::named_category_in<Domain>& named(const Category& c) {
  static const auto categories = [] {
    ById<nvtx3::named_category_in<Domain>> n;
    for (const Category& each : kCategories) {
      n[each.id] = std::make_unique<nvtx3::named_category_in<Domain>>(each.id, each.name);
    }
    return n;
  }();
  return *categories[c.id];
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
