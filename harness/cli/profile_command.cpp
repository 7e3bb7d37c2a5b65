// `scalescope profile`: one sweep point under Nsight Systems, capturing only the measured
// steps asked for, with the nsys report's path recorded in the JSON report.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "harness/cli/commands.h"
#include "harness/sweep/sweep.h"

namespace scalescope::cli {
namespace {

struct ProfileArgs {
  std::string model = "cifar-cnn";
  std::string devices = "cpu:1";
  int64_t batch = 64;
  int64_t steps = 20;
  std::string profile_steps = "6:10";
  int threads = 0;
  std::string nsys;  // "" = find on PATH
  std::string name;  // nsys output name ("" = from the point)
  std::string output = "scalescope-profile.json";
};

// The first executable `name` in PATH, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string_view rest = path;
  while (!rest.empty()) {
    const size_t colon = std::min(rest.find(':'), rest.size());
    const std::filesystem::path candidate =
        std::filesystem::path(
            std::string(rest.substr(0, colon)).empty() ? "." : std::string(rest.substr(0, colon))) /
        name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    rest.remove_prefix(std::min(colon + 1, rest.size()));
  }
  return "";
}

int run_profile(const ProfileArgs& a) {
  const std::string nsys = a.nsys.empty() ? find_on_path("nsys") : a.nsys;
  SS_CHECK(!nsys.empty() && access(nsys.c_str(), X_OK) == 0,
           "{} is not {}: `scalescope profile` runs the point under NVIDIA Nsight Systems. "
           "Install it (NVIDIA's nsight-systems package, or the copy that comes with the CUDA "
           "toolkit under /usr/local/cuda/nsight-systems-*/bin) and put nsys on PATH or name it "
           "with --nsys. Without it, `scalescope sweep --trace PREFIX` writes Chrome traces that "
           "Perfetto opens.",
           a.nsys.empty() ? "nsys" : a.nsys, a.nsys.empty() ? "on PATH" : "an executable file");
  // The point, checked as the sweep will check it, before nsys starts.
  SweepOptions o;
  o.models = {a.model};
  o.devices = a.devices;
  o.batches = {a.batch};
  o.repeats = 1;
  o.steps = a.steps;
  o.threads = a.threads;
  o.output = a.output;
  std::tie(o.train.profile_first, o.train.profile_last) = parse_profile_steps(a.profile_steps);
  const DeviceAxis axis = resolve_devices(o);
  SS_CHECK(axis.counts.size() == 1, "--devices {}: profile runs one point; give one device count",
           a.devices);
  validate(o);
  SweepPoint point;
  point.model = a.model;
  point.device_kind = axis.kind == DeviceKind::kCpu ? "cpu" : "cuda";
  point.devices = axis.counts.front();
  point.batch = a.batch;
  const std::string name = a.name.empty() ? "scalescope_" + point_file_name(point) : a.name;

  std::vector<std::string> argv = {nsys, "profile", "--trace=cuda,nvtx,osrt"};
  if (axis.kind == DeviceKind::kCuda) {
    argv.push_back("--capture-range=cudaProfilerApi");
  } else {
    // No CUDA context on CPU devices: the NVTX range "profile" of our domain starts it (its
    // message is a registered string, which is what nsys matches by default).
    argv.push_back("--capture-range=nvtx");
    argv.push_back("--nvtx-capture=profile@scalescope");
  }
  const std::vector<std::string> rest = {"--capture-range-end=stop",
                                         "--force-overwrite=true",
                                         "--output=" + name,
                                         std::filesystem::read_symlink("/proc/self/exe").string(),
                                         "sweep",
                                         "--models",
                                         a.model,
                                         "--devices",
                                         a.devices,
                                         "--batch",
                                         std::to_string(a.batch),
                                         "--repeats",
                                         "1",
                                         "--steps",
                                         std::to_string(a.steps),
                                         "--threads",
                                         std::to_string(a.threads),
                                         "--profile-steps",
                                         a.profile_steps,
                                         "-o",
                                         a.output,
                                         "-q"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  std::string shown;
  for (const std::string& s : argv) shown += (shown.empty() ? "" : " ") + s;
  fmt::print("running: {}\n", shown);
  std::fflush(stdout);

  // NCCL marks its own work with NVTX (domain "NCCL") unless told not to: keep it.
  unsetenv("NCCL_NVTX_DISABLE");
  const pid_t pid = fork();
  SS_CHECK(pid >= 0, "cannot start {}: fork failed", nsys);
  if (pid == 0) {
    std::vector<char*> c;
    for (const std::string& s : argv) c.push_back(const_cast<char*>(s.c_str()));
    c.push_back(nullptr);
    execv(c[0], c.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  SS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "{} failed ({}); its output is above",
           nsys,
           WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                             : std::string("killed by a signal"));

  SweepReport report = read_sweep_report(a.output);
  const std::string nsys_report = name + ".nsys-rep";
  const bool exists = std::filesystem::exists(nsys_report);
  for (SweepPoint& p : report.points) p.profile = nsys_report;
  write_sweep_report(a.output, report);
  fmt::print("Nsight Systems report: {}{}\nscalescope report: {}\n", nsys_report,
             exists ? " (open it in nsys-ui)" : " (not found: check nsys's output above)",
             a.output);
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Run one sweep point under Nsight Systems, capturing only the steps asked for");
  cmd->add_option("--model", a->model, "Model spec")->capture_default_str();
  cmd->add_option("--devices", a->devices, "One device count: cpu:N, cuda:N or N")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "Per-device batch")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Measured steps after the warm-up")->capture_default_str();
  cmd->add_option("--profile-steps", a->profile_steps, "Measured steps A:B to capture")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads per device (0: automatic)")
      ->capture_default_str();
  cmd->add_option("--nsys", a->nsys, "The nsys executable (default: nsys on PATH)");
  cmd->add_option("--name", a->name,
                  "Name of the Nsight Systems report (default: scalescope_MODEL_DEVICES_bBATCH)");
  cmd->add_option("-o,--output", a->output, "The JSON report of the point")->capture_default_str();
  cmd->callback([&action, a] { action = [a] { return run_profile(*a); }; });
}

}  // namespace scalescope::cli
