#include "core/interrupt.h"

#include <signal.h>
#include <string.h>

#include <atomic>

#include <fmt/format.h>

namespace scalescope {
namespace {

// Written by a signal handler: a lock-free atomic is the one kind of object it may touch.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int signal) {
  g_signal.store(signal, std::memory_order_relaxed);
  // The next one of this kind takes the default action (sigaction is async-signal-safe).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signal, &dfl, nullptr);
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

}  // namespace

Interrupted::Interrupted(int signal, const std::string& what, std::source_location where)
    : Error("", "", fmt::format("interrupted by {}: {}", signal_name(signal), what), where),
      signal_(signal) {}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking calls elsewhere go on; the work polls the flag
  for (int signal : {SIGINT, SIGTERM}) sigaction(signal, &sa, nullptr);
}

int interrupt_signal() {
  return g_signal.load(std::memory_order_relaxed);
}

void throw_if_interrupted(const char* what, std::source_location where) {
  if (const int signal = interrupt_signal(); signal != 0) throw Interrupted(signal, what, where);
}

void request_interrupt(int signal) {
  g_signal.store(signal, std::memory_order_relaxed);
}

void clear_interrupt() {
  g_signal.store(0, std::memory_order_relaxed);
}

}  // namespace scalescope
