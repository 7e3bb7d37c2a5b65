// Ctrl-C and `kill`: a sweep or a run stops at its next step, keeps what it had finished and
// the process exits with 128 + the signal's number, as shells expect of an interrupted job.
#pragma once

#include <source_location>
#include <string>

#include "core/error.h"

namespace scalescope {

// Thrown where work stops because a signal came. An Error, so that every path that already
// cleans up after one (replicas aborting their peers, files closed) does so here too.
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& what,
              std::source_location where = std::source_location::current());
  int signal() const { return signal_; }
  // 128 + the signal's number (130 for SIGINT).
  int exit_status() const { return 128 + signal_; }

 private:
  int signal_;
};

// Makes SIGINT and SIGTERM only record that they came; work polls interrupt_signal() at safe
// points. A second one of the same kind ends the process at once (the default action), for a
// user whose run does not stop.
void install_interrupt_handlers();
// The signal that came, 0 if none.
int interrupt_signal();
// Throws Interrupted, saying what stopped, when a signal came.
void throw_if_interrupted(const char* what,
                          std::source_location where = std::source_location::current());
// As if `signal` had come (tests, and a process told by a peer that the run stops).
void request_interrupt(int signal);
// Forgets a signal that came (tests run many sweeps in one process).
void clear_interrupt();

}  // namespace scalescope
