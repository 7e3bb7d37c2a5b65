#include "harness/collectives/failures.h"

#include <fmt/format.h>

#include <new>

#include "core/error.h"
#include "harness/collectives/cluster.h"
#include "harness/collectives/shared_memory.h"
#include "harness/collectives/sim_collectives.h"

namespace scalescope {
namespace {

bool is_collective_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return is_collective_library(e.library());
  } catch (...) {
    return false;
  }
}

}  // namespace

bool is_collective_library(const std::string& library) {
  return library == "Gloo" || library == "NCCL" || library == kSimCollectivesLibrary ||
         library == kSharedMemoryLibrary;
}

std::exception_ptr cause_of(const std::vector<std::exception_ptr>& errors) {
  for (const std::exception_ptr& e : errors) {
    if (!is_collective_failure(e)) return e;
  }
  return errors.front();
}

nlohmann::json error_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {{"status", "error"}, {"library", e.library()}, {"message", e.what()}};
  } catch (const std::bad_alloc&) {
    return {{"status", "error"}, {"library", ""}, {"message", "out of memory"}};
  } catch (const std::exception& e) {
    return {{"status", "error"}, {"library", ""}, {"message", e.what()}};
  }
}

void throw_first_error(const std::vector<nlohmann::json>& messages, const Cluster& cluster) {
  const nlohmann::json* cause = nullptr;
  int from = -1;
  for (size_t p = 0; p < messages.size(); ++p) {
    const nlohmann::json& m = messages[p];
    if (m.at("status") != "error") continue;
    if (cause == nullptr ||
        (!is_collective_library(m.at("library")) && is_collective_library(cause->at("library")))) {
      cause = &m;
      from = static_cast<int>(p);
    }
  }
  if (cause == nullptr) return;
  throw Error(cause->at("library").get<std::string>(), "train",
              fmt::format("on process {}: {}", cluster.describe(from),
                          cause->at("message").get<std::string>()));
}

}  // namespace scalescope
