#include <unistd.h>

#include <string>
#include <vector>

#include "core/denormals.h"
#include "core/env.h"
#include "core/log.h"
#include "core/sim/sim_device.h"
#include "harness/cli/commands.h"
#include "harness/collectives/cluster.h"
#include "models/kernel_environment.h"

namespace scalescope::cli {
namespace {

// Whether this is the launch's first process, or a process launched alone, and not a sweep
// that `scalescope profile` runs under nsys (which has warned already, kSettingsWarned). A
// launcher's variables that make no sense are named when the command reads them (a cluster's run).
bool first_process() {
  if (!text_from_environment(kSettingsWarned).empty()) return false;
  try {
    return launch_info_from_environment().rank == 0;
  } catch (const Error&) {
    return true;
  }
}

}  // namespace

void check_settings() {
  // Each reader throws Error naming a bad value, except the log level's, which warns.
  (void)log_level();
  (void)denormals_from_environment();
  (void)sim_jitter_from_environment();
  (void)sim_library_memory_from_environment();
  (void)sim_link_rate_from_environment();
  (void)text_from_environment("SCALESCOPE_NODE_NAME");  // any name; read by cluster.cpp
  read_kernel_environment();

  if (!first_process()) return;  // every process has the same environment: one warning
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  for (const MisspeltSetting& m : misspelt_settings(environment, settings_asked())) {
    SS_LOG_WARN("{} is not a setting scalescope reads, so it changes nothing: did you mean {}?",
                m.set, m.meant);
  }
}

}  // namespace scalescope::cli
