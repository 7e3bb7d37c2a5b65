#include <fmt/format.h>

#include <memory>

#include "core/backend.h"
#include "core/device_spec.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "harness/cli/commands.h"
#include "harness/cli/launch.h"
#include "harness/cli/option_app.h"
#include "harness/collectives/cluster.h"
#include "harness/trainer/trainer.h"
#include "reports/analysis/noise_scale.h"
#include "reports/run_report.h"
#include "reports/writers/layer_profile.h"
#include "reports/writers/trace.h"

namespace scalescope::cli {
namespace {

struct TrainArgs {
  TrainOptions options;
  LaunchOptions launch;
  std::string output;
  std::string trace;
  bool quiet = false;
  OptionList list;  // the declarations of all of the above
};

// " (2 threads/device)" on CPU devices, whose kernels run on a share of the cores; nothing
// on GPUs, and on simulated ones, which stand for GPUs (their threads are the simulation's).
std::string threads_text(const RunReport& report) {
  if (parse_device_spec(report.devices).kind != DeviceKind::kCpu) return "";
  const int n = report.threads_per_device;
  return fmt::format(" ({} thread{}/device)", n, n == 1 ? "" : "s");
}

// A note where the CPU replicas of this process ran more compute threads than its usable cores
// (a sweep refuses that without --oversubscribe): they took turns on the cores, so the step
// time is the sharing's. Nothing across processes: another host's cores are not known here.
std::string shared_cores_line(const RunReport& report) {
  const DeviceSpec spec = parse_device_spec(report.devices);
  if (report.cluster || spec.kind != DeviceKind::kCpu) return "";
  const int cores = backend(DeviceKind::kCpu).device_count();
  if (!oversubscribed(spec.devices, report.threads_per_device, cores)) return "";
  return fmt::format(
      "note: {} devices x {} thread{} = {} compute threads on {} usable cores: the replicas took "
      "turns on the cores, so the step time measures that sharing, not the devices\n",
      spec.devices, report.threads_per_device, report.threads_per_device == 1 ? "" : "s",
      compute_threads(spec.devices, report.threads_per_device), cores);
}

// Where the timed steps are not the ones after the warm-up asked for: the summary's "over N
// steps" alone does not say why. A fixed warm-up is cut so that one step is timed; a run that a
// target ended within its warm-up times every step (RunSummary).
std::string warmup_line(const TrainOptions& o, const RunReport& report) {
  const auto steps = static_cast<int64_t>(report.steps.size());
  if (steps > 0 && report.warmup_steps >= steps) {
    return fmt::format(
        "note: the run ended at step {}, within its {} warm-up steps: the summary times every "
        "step, warm-up included\n",
        steps, report.warmup_steps);
  }
  if (o.adaptive_warmup.enabled || report.warmup_steps >= o.warmup_steps) return "";
  const int64_t timed = steps - report.warmup_steps;
  return fmt::format(
      "note: {} warm-up step{}, not the {} of --warmup-steps, so that {} of the {} steps {} "
      "timed\n",
      report.warmup_steps, report.warmup_steps == 1 ? "" : "s", o.warmup_steps, timed, steps,
      timed == 1 ? "is" : "are");
}

// --noise-scale: B_noise over the measured steps, or why the run could not estimate it.
std::string noise_scale_text(const RunReport& report) {
  const auto warmup = static_cast<size_t>(report.warmup_steps);
  std::vector<GradSqNorms> norms;
  for (size_t i = warmup < report.steps.size() ? warmup : 0; i < report.steps.size(); ++i) {
    if (report.steps[i].grad_norms) norms.push_back(report.steps[i].grad_norms->norms());
  }
  if (!estimable(report.noise_batches()) || norms.empty()) {
    return fmt::format("noise scale: not estimated: {}", noise_scale_unavailable_reason());
  }
  const NoiseScale n = summarize_noise(norms, report.noise_batches());
  if (!n.b_noise) {
    return fmt::format("noise scale: none over {} steps: the mean |G|² estimate was not positive",
                       n.steps);
  }
  return fmt::format(
      "noise scale: B_noise {:.3g} [{:.3g}, {:.3g}] over {} steps (batches {} and {})",
      n.b_noise->value, n.b_noise->low, n.b_noise->high, n.steps, n.batches.small, n.batches.big);
}

// The lead's progress lines: the first step, every tenth of the run and its last (every
// 100th when it runs for epochs), and each evaluation.
TrainHooks progress_hooks(int64_t steps, const Cluster* cluster) {
  if (cluster != nullptr && cluster->multi_process()) {
    fmt::print(
        "(each step's loss below: the mean over this process's replicas; the summary's: "
        "over all of the run's)\n");
  }
  TrainHooks hooks;
  const int64_t every = std::max<int64_t>(1, steps / 10);
  hooks.on_step = [steps, every](const StepRecord& r) {
    if (r.step == 1 || (steps > 0 && (r.step % every == 0 || r.step == steps)) ||
        (steps == 0 && r.step % 100 == 0)) {
      fmt::print("step {:>6}  loss {:>9.5f}  {:>8.2f} ms (input {:.2f} ms)\n", r.step, r.loss,
                 r.step_ms, r.input_ms);
      std::fflush(stdout);
    }
  };
  hooks.on_eval = [](const EvalRecord& e) {
    fmt::print("eval after epoch {} (step {}): loss {:.4f}, accuracy {:.2f}%\n", e.epoch, e.step,
               e.loss, 100.0 * e.accuracy);
    std::fflush(stdout);
  };
  return hooks;
}

int run_train(TrainArgs& args, const OptionSources& names) {
  TrainOptions& o = args.options;
  o.command_line = command_line();
  const Launch launch = join_launch(args.launch, o.collective_timeout_ms);
  o.cluster = launch.cluster.get();
  const bool lead = launch.lead;
  check_together(launch, o.collective_timeout_ms, [&] {
    as_usage_error([&] { validate(o, names); });  // every value checked before any work starts
    if (!lead) return;
    // A result that cannot be written is found now, not after the run.
    for (const auto& [key, path] :
         {std::pair<const char*, const std::string&>{"output", args.output},
          {"trace", args.trace},
          {"save", o.save}}) {
      // An init-capture: clang 16 cannot capture a structured binding under -fopenmp.
      if (!path.empty()) naming(names, key, path, [&p = path] { check_can_write(p); });
    }
  });
  install_interrupt_handlers();  // the run stops between steps
  const TrainHooks hooks =
      args.quiet || !lead ? TrainHooks{} : progress_hooks(o.steps, launch.cluster.get());
  const RunReport report = train(o, hooks);
  if (!lead) return 0;
  const RunSummary s = summarize(report);
  const std::string processes =
      report.cluster ? fmt::format(" over {} processes on {} node{}", report.cluster->processes,
                                   report.cluster->nodes, report.cluster->nodes == 1 ? "" : "s")
                     : "";
  const std::string compression =
      report.grad_compression == GradCompression::kNone
          ? ""
          : fmt::format(", {}", compression_text(report.grad_compression));
  fmt::print(
      "{} on {}{}{}, global batch {}, {}{}, {}: median step {:.2f} ms "
      "(p10 {:.2f}, p90 {:.2f}) over {} step{}, {:.1f} samples/s; loss {:.4f} -> {:.4f}\n",
      report.model, report.devices, processes, threads_text(report), report.global_batch(),
      report.optimizer, compression, to_string(report.precision), s.step_ms_median, s.step_ms_p10,
      s.step_ms_p90, s.measured_steps, s.measured_steps == 1 ? "" : "s", s.samples_per_second,
      s.first_loss, s.last_loss);
  fmt::print("{}", shared_cores_line(report));
  fmt::print("{}", warmup_line(o, report));
  fmt::print("{}", fallback_line(report));
  fmt::print("{}", loss_scaling_line(report));
  fmt::print("{}", format_layer_profile(report));
  if (report.target) fmt::print("{}\n", target_text(*report.target));
  if (report.noise_scale) fmt::print("{}\n", noise_scale_text(report));
  if (!args.output.empty()) {
    write_run_report(args.output, report);
    fmt::print("run written to {}\n", args.output);
  }
  if (!args.trace.empty()) {
    // The measured steps (after the warm-up ones), every replica.
    const std::vector<StepRecord> measured(
        report.steps.begin() + static_cast<std::ptrdiff_t>(report.warmup_steps),
        report.steps.end());
    write_chrome_trace(args.trace, measured,
                       {fmt::format("{} {} batch {}", report.model, report.devices, report.batch),
                        report.bucket_bytes});
    fmt::print("trace written to {} (open in https://ui.perfetto.dev or chrome://tracing)\n",
               args.trace);
  }
  if (!o.save.empty()) fmt::print("checkpoint written to {}\n", o.save);
  return 0;
}

// The run's options and this command's own.
void declare(TrainArgs& args) {
  OptionList& list = args.list;
  add_train_options(list, args.options);
  add_launch_options(list, args.launch);
  list.add("-o,--output", args.output, "Write the run (per-step loss and time) as JSON")
      .command_line_only();
  list.add("--trace", args.trace, "Write the measured steps as a Chrome/Perfetto trace (JSON)")
      .command_line_only();
  list.add("-q,--quiet", args.quiet, "Print only the summary").command_line_only();
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  // The flags parsed here serve --help and usage errors; the options are parsed again with
  // the config file (CLI11 reads --config of a top-level App only: parse_with_config).
  auto args = std::make_shared<TrainArgs>();
  declare(*args);
  CLI::App* cmd = app.add_subcommand("train", "Train a model and time every step");
  add_options(*cmd, args->list);
  add_config_option(*cmd, args->list);
  // `args` lives as long as the callback: CLI11's options write into its variables.
  cmd->callback([&action, args] {
    action = [] {
      TrainArgs parsed;
      declare(parsed);
      const OptionSources names = parse_with_config(parsed.list, command_arguments());
      return run_train(parsed, names);
    };
  });
}

}  // namespace scalescope::cli
