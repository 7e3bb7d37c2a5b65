#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>

#include "core/log.h"
#include "harness/cli/commands.h"
#include "harness/cli/data_options.h"
#include "harness/cli/training_options.h"
#include "harness/collectives/cluster.h"
#include "harness/trainer/trainer.h"
#include "reports/run_report.h"
#include "reports/trace.h"

namespace scalescope::cli {
namespace {

struct TrainArgs {
  TrainOptions options;
  TrainingFlags flags;
  std::optional<int64_t> steps;
  std::string output;
  std::string trace;
  bool quiet = false;
  std::string command_line;
};

int run_train(TrainArgs& args) {
  TrainOptions& o = args.options;
  apply_training_flags(args.flags, o);
  o.command_line = args.command_line;
  o.steps = args.steps.value_or(o.epochs > 0 ? 0 : 200);
  // Started by mpirun or srun: the processes join (alone: nothing happens).
  const std::unique_ptr<Cluster> cluster =
      Cluster::join(std::chrono::milliseconds(o.collective_timeout_ms));
  check_launch(args.flags, *cluster);
  o.cluster = cluster.get();
  validate(o);  // every value checked before any work starts
  // Rank 0 alone prints and writes; every process ends with the same report.
  const bool lead = cluster->rank() == 0;
  const int64_t every = std::max<int64_t>(1, o.steps / 10);
  TrainHooks hooks;
  if (!args.quiet && lead) {
    hooks.on_step = [&](const StepRecord& r) {
      if (r.step == 1 || (o.steps > 0 && (r.step % every == 0 || r.step == o.steps)) ||
          (o.steps == 0 && r.step % 100 == 0)) {
        fmt::print("step {:>6}  loss {:>9.5f}  {:>8.2f} ms (input {:.2f} ms)\n", r.step, r.loss,
                   r.step_ms, r.input_ms);
        std::fflush(stdout);
      }
    };
  }
  if (lead)
    hooks.on_eval = [&](const EvalRecord& e) {
      fmt::print("eval after epoch {} (step {}): loss {:.4f}, accuracy {:.2f}%\n", e.epoch, e.step,
                 e.loss, 100.0 * e.accuracy);
      std::fflush(stdout);
    };
  const RunReport report = train(o, hooks);
  if (!lead) return 0;
  const RunSummary s = summarize(report);
  const std::string processes =
      report.cluster ? fmt::format(" over {} processes on {} node{}", report.cluster->processes,
                                   report.cluster->nodes, report.cluster->nodes == 1 ? "" : "s")
                     : "";
  fmt::print(
      "{} on {}{} ({} thread{}/device), global batch {}, {}: median step {:.2f} ms "
      "(p10 {:.2f}, p90 {:.2f}) over {} steps, {:.1f} samples/s; loss {:.4f} -> {:.4f}\n",
      report.model, report.devices, processes, report.threads_per_device,
      report.threads_per_device == 1 ? "" : "s", report.global_batch(), report.optimizer,
      s.step_ms_median, s.step_ms_p10, s.step_ms_p90, s.measured_steps, s.samples_per_second,
      s.first_loss, s.last_loss);
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

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<TrainArgs>();
  TrainOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand("train", "Train a model and time every step");
  cmd->add_option("--model", o.model, "Model spec name[:key=value,...] (see `scalescope models`)")
      ->capture_default_str();
  cmd->add_option("--devices", o.devices, "Devices: cpu, cpu:N, cuda:I[,J...]")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "CPU threads per device (0: cores / devices)")
      ->capture_default_str();
  cmd->add_option("--batch", o.batch, "Samples per micro-batch and device")->capture_default_str();
  cmd->add_option("--global-batch", o.global_batch,
                  "Samples per step over all devices (instead of --batch; must divide by the "
                  "devices × --accumulate)");
  cmd->add_option("--steps", args->steps, "Training steps (default 200 unless --epochs)");
  cmd->add_option("--epochs", o.epochs, "Passes over the training data (instead of --steps)");
  cmd->add_flag("!--no-eval", o.eval, "Skip evaluation on the eval split after each epoch");
  add_data_options(*cmd, o.data);
  add_training_options(*cmd, o, args->flags);
  cmd->add_option("--warmup-steps", o.warmup_steps, "Steps left out of the timing summary")
      ->capture_default_str();
  cmd->add_option("--check-every", o.check_every,
                  "Compare the replicas' weight checksums every N steps (0: after the last only)")
      ->capture_default_str();
  cmd->add_option("--save", o.save, "Write a checkpoint (safetensors) at the end");
  cmd->add_option("--load", o.load, "Start from a checkpoint (safetensors)");
  cmd->add_option("-o,--output", args->output, "Write the run (per-step loss and time) as JSON");
  cmd->add_option("--trace", args->trace,
                  "Write the measured steps as a Chrome/Perfetto trace (JSON)");
  cmd->add_flag("-q,--quiet", args->quiet, "Print only the summary");
  cmd->callback([&action, args, cmd] {
    args->command_line = command_line();
    action = [args] { return run_train(*args); };
  });
}

}  // namespace scalescope::cli
