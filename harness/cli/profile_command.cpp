// `scalescope profile`: one sweep point under Nsight Systems, capturing only the measured
// steps asked for, with the nsys report's path recorded in the JSON report.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "harness/options/run_options.h"
#include "harness/sweep/sweep.h"

namespace scalescope::cli {
namespace {

// One point of a sweep: the sweep's options with one value on each axis.
SweepOptions profile_defaults() {
  SweepOptions o;
  o.models = {"cifar-cnn"};
  o.devices = "cpu:1";
  o.batches = {64};
  o.repeats = 1;
  o.profile_steps = "6:10";
  o.output = "scalescope-profile.json";
  return o;
}

struct ProfileArgs {
  SweepOptions sweep = profile_defaults();
  std::string model = "cifar-cnn";
  std::string nsys;  // "" = find on PATH
  std::string name;  // nsys output name ("" = from the point)
  OptionList list;   // the declarations of all of the above
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

// nsys capturing the range of the measured steps of a sweep of `o`: the sweep's
// arguments are written from its option declarations.
std::vector<std::string> nsys_arguments(const std::string& nsys, DeviceKind kind,
                                        const std::string& name, const SweepOptions& o) {
  std::vector<std::string> argv = {nsys, "profile", "--trace=cuda,nvtx,osrt"};
  if (kind == DeviceKind::kCuda) {
    argv.push_back("--capture-range=cudaProfilerApi");
  } else {
    // No CUDA context on CPU or simulated devices: the NVTX range "profile" of our domain
    // starts it (its message is a registered string, which is what nsys matches by default).
    argv.push_back("--capture-range=nvtx");
    argv.push_back("--nvtx-capture=profile@scalescope");
  }
  const std::vector<std::string> rest = {
      "--capture-range-end=stop", "--force-overwrite=true", "--output=" + name,
      std::filesystem::read_symlink("/proc/self/exe").string(), "sweep"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  const std::vector<std::string> sweep = sweep_arguments(o);
  argv.insert(argv.end(), sweep.begin(), sweep.end());
  argv.push_back("-q");
  return argv;
}

void run_under_nsys(const std::vector<std::string>& argv) {
  std::string shown;
  for (const std::string& s : argv) shown += (shown.empty() ? "" : " ") + s;
  fmt::print("running: {}\n", shown);
  std::fflush(stdout);
  // NCCL marks its own work with NVTX (domain "NCCL") unless told not to: keep it.
  unsetenv("NCCL_NVTX_DISABLE");
  setenv(kSettingsWarned, "1", 1);
  const pid_t pid = fork();
  SS_CHECK(pid >= 0, "cannot start {}: fork failed", argv.front());
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
           argv.front(),
           WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                             : std::string("killed by a signal"));
}

int run_profile(ProfileArgs& a, const OptionSources& names) {
  const std::string nsys = a.nsys.empty() ? find_on_path("nsys") : a.nsys;
  SS_CHECK_INPUT(
      !nsys.empty() && access(nsys.c_str(), X_OK) == 0,
      "{} is not {}: `scalescope profile` runs the point under NVIDIA Nsight Systems. "
      "Install it (NVIDIA's nsight-systems package, or the copy that comes with the CUDA "
      "toolkit under /usr/local/cuda/nsight-systems-*/bin) and put nsys on PATH or name it "
      "with --nsys. Without it, `scalescope sweep --trace PREFIX` writes Chrome traces that "
      "Perfetto opens.",
      a.nsys.empty() ? "nsys" : a.nsys, a.nsys.empty() ? "on PATH" : "an executable file");
  // The point, checked as the sweep will check it, before nsys starts.
  SweepOptions& o = a.sweep;
  o.models = {a.model};
  const DeviceAxis axis = resolve_devices(o, names);
  SS_CHECK_INPUT(axis.counts.size() == 1, "{}: profile runs one point; give one device count",
                 names.subject("devices", o.devices));
  SS_CHECK_INPUT(o.batches.size() == 1, "{}: profile runs one point; give one batch size",
                 names.subject("batch", fmt::format("{}", fmt::join(o.batches, ","))));
  SS_CHECK_INPUT(o.bucket_caps_mb.size() == 1 && o.first_buckets_mb.size() == 1,
                 "{} and {}: profile runs one point; give one bucket cap and one first-bucket cap",
                 names.name("bucket_cap_mb"), names.name("first_bucket_mb"));
  SS_CHECK_INPUT(
      o.grad_compressions.size() == 1, "{}: profile runs one point; give one compression",
      names.subject("grad_compression", fmt::format("{}", fmt::join(o.grad_compressions, ","))));
  SS_CHECK_INPUT(o.precisions.size() <= 1, "{}: profile runs one point; give one precision",
                 names.subject("precision", fmt::format("{}", fmt::join(o.precisions, ","))));
  validate(o, names);
  SweepPoint point;
  point.model = a.model;
  point.device_kind = to_string(axis.kind);
  point.devices = axis.counts.front();
  point.batch = o.batches.front();
  point.bucket_cap_mb = o.bucket_caps_mb.front();
  point.first_bucket_mb = o.first_buckets_mb.front();
  point.grad_compression = parse_grad_compression(o.grad_compressions.front());
  const std::string precision = o.precisions.empty() ? "" : o.precisions.front();
  point.precision = run_precision(precision, axis.kind, names);
  point.precision_default = point.precision == run_precision("", axis.kind);
  const std::string name = a.name.empty() ? "scalescope_" + point_file_name(point) : a.name;

  run_under_nsys(nsys_arguments(nsys, axis.kind, name, o));

  SweepReport report = read_sweep_report(o.output);
  const std::string nsys_report = name + ".nsys-rep";
  const bool exists = std::filesystem::exists(nsys_report);
  for (SweepPoint& p : report.points) p.profile = nsys_report;
  write_sweep_report(o.output, report);
  fmt::print("Nsight Systems report: {}{}\nscalescope report: {}\n", nsys_report,
             exists ? " (open it in nsys-ui)" : " (not found: check nsys's output above)",
             o.output);
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ProfileArgs>();
  OptionList& list = a->list;
  // The sweep's own declarations of the options a single point takes.
  add_sweep_options(list, a->sweep);
  list.keep({"devices", "batch", "threads", "steps", "profile_steps", "output"});
  add_model_option(list, a->model);
  list.add("--nsys", a->nsys, "The nsys executable (default: nsys on PATH)");
  list.add("--name", a->name,
           "Name of the Nsight Systems report (default: scalescope_MODEL_DEVICES_bBATCH)");
  CLI::App* cmd = app.add_subcommand(
      "profile", "Run one sweep point under Nsight Systems, capturing only the steps asked for");
  add_options(*cmd, list);
  cmd->callback([&action, a, cmd] {
    action = [a, cmd] { return run_profile(*a, settle_options(*cmd, a->list)); };
  });
}

}  // namespace scalescope::cli
