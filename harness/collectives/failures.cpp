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

// What error_message sends: `text` is the error as its process would print it (a usage error's
// without our source line, --verbose or not: that line would name the sending process's code).
nlohmann::json remote_error(const char* kind, const std::string& library, const std::string& text) {
  return {{"status", "error"}, {"kind", kind}, {"library", library}, {"message", text}};
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
  } catch (const OutOfMemoryError& e) {
    return remote_error("out_of_memory", e.library(), e.brief());
  } catch (const UsageError& e) {
    return remote_error("usage", e.library(), e.brief());
  } catch (const Error& e) {
    return remote_error("internal", e.library(), e.what());
  } catch (const std::bad_alloc&) {
    return remote_error("out_of_memory", "", "out of memory");
  } catch (const std::exception& e) {
    return remote_error("internal", "", e.what());
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
  const std::string text = fmt::format("on process {}: {}", cluster.describe(from),
                                       cause->at("message").get<std::string>());
  // Of the class it had where it was thrown: a usage error or an out-of-memory error reads
  // as it would in one process, and a sweep records its point alike.
  const std::string kind = cause->at("kind").get<std::string>();
  const auto throw_it = [&cluster](auto error) {
    if (cluster.rank() != 0) error.set_printed_by_process_zero();  // every process throws it
    throw error;
  };
  if (kind == "out_of_memory") throw_it(OutOfMemoryError(text));
  if (kind == "usage") throw_it(UsageError(text));
  throw_it(Error(cause->at("library").get<std::string>(), "train", text));
}

}  // namespace scalescope
