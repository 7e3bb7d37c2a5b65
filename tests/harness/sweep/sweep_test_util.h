// Helpers of the sweep tests: small sweeps, and the CLI in a child process for tests of what a
// whole process does (killed, interrupted, out of disk).
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "harness/sweep/sweep.h"

namespace scalescope::testing_util {

// A file name of this test process's own in the test's temporary directory.
inline std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/sweep_" + std::to_string(::getpid()) + "_" + name;
}

// A sweep small enough for a test: dense-100 (7k parameters) on 1 and 2 CPU devices.
inline SweepOptions tiny(const std::string& name) {
  SweepOptions o;
  o.models = {"dense-100"};
  o.devices = "cpu:1,2";
  o.batches = {8};
  o.repeats = 2;
  o.steps = 4;
  o.max_warmup_steps = 6;
  o.threads = 1;
  o.output = temp_path(name);
  return o;
}

// Runs `args` (argv[0] the binary) with stdout and stderr in `log`; a `file_size_limit`
// makes the child's writes past that many bytes fail with EFBIG, as a full disk does.
// Returns its pid.
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log,
                   rlim_t file_size_limit = RLIM_INFINITY) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    if (file_size_limit != RLIM_INFINITY) {
      std::signal(SIGXFSZ, SIG_IGN);  // kept across exec
      const rlimit limit{file_size_limit, file_size_limit};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(126);
    }
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// The child's exit status, or 128 + the signal that ended it.
inline int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Points in the report at `path`, -1 while there is none. Counted in the JSON, not read
// with read_sweep_report, whose analysis (bootstrap intervals of every point) made each poll
// slow enough under ASan that the sweep sometimes finished before the test saw 2 points.
inline int points_in(const std::string& path) {
  std::ifstream in(path);
  if (!in) return -1;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("points") || !j["points"].is_array()) return -1;
  return static_cast<int>(j["points"].size());
}

// Starts `scalescope sweep` in a child, writing `report` (6 points of 3 repeats of 60 steps:
// long enough to still run after its second point), and waits up to two minutes for that
// second point. Returns its pid.
inline pid_t start_long_sweep(const std::string& report, const std::string& log) {
  const std::vector<std::string> args = {
      SCALESCOPE_BINARY, "sweep",   "--models",           "dense-100", "--devices", "cpu:1,2",
      "--batch",         "8,16,24", "--repeats",          "3",         "--steps",   "60",
      "--threads",       "1",       "--max-warmup-steps", "10",        "-o",        report};
  const pid_t pid = spawn(args, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (pid > 0 && points_in(report) < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pid;
}

}  // namespace scalescope::testing_util
