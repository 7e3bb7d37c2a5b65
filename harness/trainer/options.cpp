#include "harness/trainer/options.h"

#include <fmt/format.h>

#include <cmath>

#include "core/backend.h"
#include "core/check.h"
#include "core/device_spec.h"
#include "core/enum_names.h"
#include "harness/options/run_options.h"
#include "harness/trainer/layout.h"
#include "models/checkpoint.h"
#include "models/zoo.h"
#include "pipelines/dataset.h"

namespace scalescope {

namespace {

constexpr auto kLrScalingNames = enum_names<LrScaling>("none", "linear", "sqrt");

}  // namespace

LrScaling parse_lr_scaling(const std::string& name) {
  const std::optional<LrScaling> scaling = kLrScalingNames.parse(name);
  SS_CHECK_INPUT(scaling.has_value(), "lr_scaling '{}': unknown rule; use {}", name,
                 kLrScalingNames.accepted());
  return *scaling;
}

std::string to_string(LrScaling scaling) {
  return std::string(kLrScalingNames(scaling));
}

double scheduled_lr(double base, LrScaling scaling, int replicas, int64_t warmup_steps,
                    int64_t step) {
  const double n = static_cast<double>(replicas);
  const double factor = scaling == LrScaling::kLinear ? n
                        : scaling == LrScaling::kSqrt ? std::sqrt(n)
                                                      : 1.0;
  const double target = base * factor;
  if (warmup_steps <= 0 || step >= warmup_steps) return target;
  // Goyal et al.'s gradual warm-up: from the one-replica rate to the scaled one.
  const double t = static_cast<double>(step) / static_cast<double>(warmup_steps);
  return base + (target - base) * t;
}

namespace {

// per_replica_batch, naming the options as `names` says.
int64_t replica_batch(const TrainOptions& o, int replicas, const OptionSources& names) {
  if (o.global_batch <= 0) return o.batch;
  const int64_t parts = static_cast<int64_t>(replicas) * o.accumulation;
  SS_CHECK_INPUT(o.global_batch % parts == 0,
                 "{} does not divide over {} device(s){}: use a multiple of {}",
                 names.subject("global_batch", o.global_batch), replicas,
                 o.accumulation > 1 ? fmt::format(" × {} accumulated micro-batches", o.accumulation)
                                    : std::string(),
                 parts);
  return o.global_batch / parts;
}

// The checks across options.
void check_length(const TrainOptions& o, const OptionSources& names) {
  SS_CHECK_INPUT(
      o.profile_first >= 0 && o.profile_last >= o.profile_first &&
          (o.profile_first > 0) == (o.profile_last > 0),
      "{} must be FIRST:LAST with 1 <= FIRST <= LAST",
      names.subject("profile_steps", fmt::format("{}:{}", o.profile_first, o.profile_last)));
  SS_CHECK_INPUT(
      o.profile_first == 0 || o.profile_last <= o.steps || o.epochs > 0,
      "{} goes past the {} measured steps",
      names.subject("profile_steps", fmt::format("{}:{}", o.profile_first, o.profile_last)),
      o.steps);
  if (o.adaptive_warmup.enabled) {
    SS_CHECK_INPUT(o.epochs == 0, "an adaptive warm-up needs {} (measured steps), not {}",
                   names.name("steps"), names.name("epochs"));
    SS_CHECK_INPUT(o.adaptive_warmup.max_steps >= 1, "{} must be at least one step",
                   names.subject("max_warmup_steps", o.adaptive_warmup.max_steps));
  }
  SS_CHECK_INPUT(o.epochs == 0 || o.steps == 0, "give {} or {}, not both", names.name("steps"),
                 names.name("epochs"));
  SS_CHECK_INPUT(o.until_accuracy == 0.0 || o.until_loss == 0.0, "give {} or {}, not both",
                 names.name("until_accuracy"), names.name("until_loss"));
  SS_CHECK_INPUT(!o.has_target() || o.eval, "{} needs evaluations (not --no-eval)",
                 names.name(o.until_accuracy > 0.0 ? "until_accuracy" : "until_loss"));
  SS_CHECK_INPUT(o.epochs > 0 || o.steps > 0, "{} must be a positive number of steps",
                 names.subject("steps", o.steps));
}

// How replicas reach each other: a lost one must not hang the others, which transport CPU
// replicas of one process use, and whether batch norm's statistics cross them.
void add_collective_options(OptionList& list, TrainOptions& o) {
  list.add("--collective-timeout-ms", o.collective_timeout_ms,
           "A collective that waits longer fails the run (a lost replica never hangs it)",
           at_least<int64_t>(1, "must be a positive number of milliseconds"));
  list.add("--cpu-collectives",
           Choice{{"shared-memory", "gloo"},
                  [&o] { return std::string(o.cpu_shared_memory ? "shared-memory" : "gloo"); },
                  [&o](const std::string& name) { o.cpu_shared_memory = name == "shared-memory"; }},
           "How CPU devices of one process all-reduce: shared-memory (each sums its slice of the "
           "others' buffers, as NCCL does within a node) or gloo (TCP on loopback, as separate "
           "hosts would); across processes always Gloo");
  list.add("--sync-batchnorm", o.sync_batchnorm,
           "Batch norm over every replica's batch: its statistics all-reduced inside forward and "
           "backward (PyTorch's SyncBatchNorm; the batchnorm_sync phase); without, each "
           "replica's own batch, as DDP");
}

// The optimizer and its learning rate.
void add_optimizer_options(OptionList& list, TrainOptions& o) {
  add_optimizer_option(list, o.optimizer);
  // 0 is allowed: the weights then stay as they began (measurements at fixed weights).
  list.add("--lr", o.optimizer.lr, "Base learning rate",
           finite_above(0.0f, true, "must be 0 or a positive number"))
      .shown_default("0.001 (adam) or 0.01 (sgd)")
      .written_always();
  // The default learning rate is the optimizer's.
  list.on_settle([&o](const OptionSources& given) {
    if (!given.given("lr"))
      o.optimizer.lr = o.optimizer.kind == OptimizerKind::kSgd ? 0.01f : 1e-3f;
  });
  list.add("--lr-scaling",
           Choice{{"none", "linear", "sqrt"},
                  [&o] { return to_string(o.lr_scaling); },
                  [&o](const std::string& name) { o.lr_scaling = parse_lr_scaling(name); }},
           "Learning rate rule for N devices: none, linear (×N) or sqrt (×√N)");
  list.add("--lr-warmup-steps", o.lr_warmup_steps,
           "Steps over which the learning rate rises from --lr to the scaled rate",
           at_least<int64_t>(0, "must not be negative"));
  add_momentum_option(list, o.optimizer);
  list.add("--weight-decay", o.optimizer.weight_decay, "L2 weight decay",
           finite_above(0.0f, true, "must be 0 or more"));
}

// --precision (a list in a sweep), and the retired --no-tf32, which says what replaced it.
void add_precision_options(OptionList& list, TrainOptions& o, const TrainingAxes* axes) {
  if (axes != nullptr) {
    add_precision_option(list, *axes->precisions);
  } else {
    add_precision_option(list, o.precision);
  }
  list.add("!--no-tf32", o.retired_tf32, "Replaced by --precision fp32",
           [](const bool& allowed) {
             return allowed ? std::string()
                            : std::string(
                                  "is now --precision fp32 (config key \"precision\": "
                                  "\"fp32\")");
           })
      .present_when([] { return false; });
}

}  // namespace

void add_training_options(OptionList& list, TrainOptions& o, const TrainingAxes* axes) {
  add_optimizer_options(list, o);
  list.add("--accumulate", o.accumulation,
           "Gradient accumulation: micro-batches per step, all-reduced once",
           in_range(1, 4096, "must be between 1 and 4096 micro-batches per step"));
  const char* cap_help = "Gradient bucket size cap (MiB)";
  const char* first_help = "Cap of the first bucket, which starts communication early (MiB)";
  const OptionCheck<double> size = mib_size(false, "must be a positive size");
  if (axes != nullptr) {
    list.add("--bucket-cap-mb", *axes->caps_mb, fmt::format("{}; a list is a sweep axis", cap_help),
             size);
    list.add("--first-bucket-mb", *axes->first_mb,
             fmt::format("{}; a list is a sweep axis", first_help), size);
  } else {
    list.add("--bucket-cap-mb", o.bucket_cap_mb, cap_help, size);
    list.add("--first-bucket-mb", o.first_bucket_mb, first_help, size);
  }
  const char* compression_help =
      "Gradient compression: none, or fp16/bf16 (each bucket cast to 16 bits, pre-divided by "
      "the device count, all-reduced in that type and cast back: half the bytes)";
  if (axes != nullptr) {
    list.add("--grad-compression", *axes->compressions,
             fmt::format("{}; a list is a sweep axis", compression_help),
             parses([](const std::string& name) { (void)parse_grad_compression(name); }))
        .split_at_commas();
  } else {
    list.add("--grad-compression",
             Choice{grad_compression_names(), [&o] { return to_string(o.grad_compression); },
                    [&o](const std::string& name) {
                      o.grad_compression = parse_grad_compression(name);
                    }},
             compression_help);
  }
  list.add("--noise-scale", o.noise_scale,
           "Measure the gradient noise scale B_noise from each replica's gradient and their "
           "average (two passes over the gradients per step)");
  list.add("!--no-overlap", o.overlap,
           "All-reduce after backward instead of during it (shows what overlap buys)");
  list.add("!--no-prefetch", o.prefetch,
           "Copy each batch to the device at the start of its step instead of during the step "
           "before (shows what overlapping the copy buys)");
  list.add("!--no-fusion", o.fusion,
           "Run every activation as a layer of its own instead of inside the kernels next to it, "
           "and save every 16-bit activation copy in a pass of its own (shows what fusion buys)");
  add_precision_options(list, o, axes);
  list.add("--deterministic,!--no-deterministic", o.deterministic,
           "GPU kernels deterministic, so that two runs give bit-identical weights: by default "
           "wherever a deterministic cuDNN algorithm fits the workspace limit, elsewhere the "
           "fastest (the run report names each such layer); --deterministic requires it (a layer "
           "without one is an error), --no-deterministic allows cuDNN's faster atomics anywhere");
  list.add("--conv-search",
           Choice{conv_search_names(), [&o] { return to_string(o.conv_search); },
                  [&o](const std::string& name) { o.conv_search = parse_conv_search(name); }},
           "How GPU convolutions choose their cuDNN algorithms: heuristic (cuDNN's ranking, the "
           "default) or benchmark (each allowed candidate timed once when the layer is planned, "
           "as PyTorch's cudnn.benchmark; runs may then choose differently); the run report "
           "records which, and the time measured for each choice");
  add_collective_options(list, o);
  list.add("--memory-limit-mb", o.memory_limit_mb,
           "Device memory per replica in MiB (0: all), libraries' own buffers (NCCL's) included; "
           "more fails as out of memory",
           mib_size(true, "must be 0 (no limit) or a positive size"));
  add_seed_option(list, o.seed);
}

void add_target_options(OptionList& list, TrainOptions& o) {
  list.add("--eval-every", o.eval_every,
           "Evaluate every N steps instead of after every epoch (0: after every epoch)",
           at_least<int64_t>(0, "must be 0 (every epoch) or a positive number of steps"));
  list.add("--until-accuracy", o.until_accuracy,
           "Stop at the first evaluation whose accuracy reaches this fraction (time to accuracy)",
           [](const double& a) {
             return std::isfinite(a) && a >= 0.0 && a <= 1.0
                        ? std::string()
                        : std::string("must be a fraction between 0 and 1 (0: no target)");
           });
  list.add("--until-loss", o.until_loss,
           "Stop at the first evaluation whose loss falls to this value (time to a loss)",
           finite_above(0.0, true, "must be 0 (no target) or positive"));
}

void add_data_options(OptionList& list, DataOptions& o, bool with_workers) {
  list.add("--data", o.spec,
           "Data: synthetic, synthetic:device, idx:DIR (MNIST-format), cifar10:DIR",
           parses([](const std::string& spec) { (void)parse_data_spec(spec); }));
  if (with_workers) {
    add_workers_option(list, o.workers);
  }
  list.add("--queue-depth", o.queue_depth, "Ready batches kept ahead of the trainer",
           in_range(1, 1024, "must be between 1 and 1024"));
  list.add("!--no-normalize", o.normalize,
           "Do not normalise file data per channel (on by default)");
  list.add("--crop-padding", o.crop_padding,
           "Random crop after zero-padding each side by this many pixels (0: off)",
           at_least(0, "must not be negative"));
  list.add("--flip", o.flip, "Random horizontal flips");
  list.add("!--no-shuffle", o.shuffle,
           "Read the training data in file order every epoch instead of shuffling it (the "
           "batches another framework reading the file in order gets)");
  list.add("--train-samples", o.train_samples,
           "Train on the first N samples of the training split only (0: all)",
           at_least<int64_t>(0, "must not be negative"));
  list.add("--decode-cost-us", o.decode_cost_us,
           "Busy CPU time per sample emulating heavy decoding, in microseconds",
           at_least<int64_t>(0, "must not be negative"));
}

void add_profile_layers_option(OptionList& list, TrainOptions& o) {
  list.add("--profile-layers", o.profile_layers,
           "Time each layer's forward and backward on replica 0 (events around each layer on "
           "the device's stream) and print the layers that took longest");
}

void add_train_options(OptionList& list, TrainOptions& o) {
  add_model_option(list, o.model);
  add_devices_option(list, o.devices);
  add_threads_option(list, o.threads);
  add_batch_option(list, o.batch);
  add_global_batch_option(list, o.global_batch);
  list.add("--steps", o.steps, "Training steps",
           at_least<int64_t>(0, "must be a positive number of steps"))
      .shown_default("200 (0 with --epochs)")
      .written_always();
  list.add("--epochs", o.epochs, "Passes over the training data (instead of --steps)",
           at_least<int64_t>(0, "must be a positive number of epochs"));
  // --epochs alone: no step count.
  list.on_settle([&o](const OptionSources& given) {
    if (!given.given("steps") && o.epochs > 0) o.steps = 0;
  });
  list.add("!--no-eval", o.eval, "Skip evaluation on the eval split after each epoch");
  add_target_options(list, o);
  add_data_options(list, o.data);
  add_training_options(list, o);
  list.add("--warmup-steps", o.warmup_steps, "Steps left out of the timing summary",
           at_least<int64_t>(0, "must not be negative"));
  list.add("--check-every", o.check_every,
           "Compare the replicas' weight checksums every N steps (0: after the last only)",
           at_least<int64_t>(0, "must be 0 (only at the end) or positive"));
  add_profile_layers_option(list, o);
  list.add("--save", o.save, "Write a checkpoint (safetensors) at the end");
  list.add("--load", o.load, "Start from a checkpoint (safetensors)");
}

nlohmann::json train_config_json(const TrainOptions& options) {
  TrainOptions copy = options;  // the declarations bind variables; these are a copy's
  OptionList list;
  add_train_options(list, copy);
  return options_json(list);
}

Determinism determinism_of(const TrainOptions& o) {
  if (!o.deterministic) return Determinism::kPreferred;
  return *o.deterministic ? Determinism::kRequired : Determinism::kOff;
}

GradCompression effective_compression(const TrainOptions& o, int replicas) {
  return replicas > 1 ? o.grad_compression : GradCompression::kNone;
}

bool measures_noise(const TrainOptions& o, int replicas) {
  return o.noise_scale && (replicas > 1 || o.accumulation > 1);
}

std::optional<kernel_math::HalfFormat> half_format(GradCompression compression) {
  switch (compression) {
    case GradCompression::kFp16:
      return kernel_math::HalfFormat::kFp16;
    case GradCompression::kBf16:
      return kernel_math::HalfFormat::kBf16;
    case GradCompression::kNone:
      break;
  }
  return std::nullopt;
}

int64_t per_replica_batch(const TrainOptions& o, int replicas) {
  return replica_batch(o, replicas, {});
}

void validate(const TrainOptions& o, const OptionSources& names) {
  TrainOptions checked = o;  // the declarations bind variables; these are a copy's
  OptionList list;
  add_train_options(list, checked);
  check_options(list, names);
  check_length(o, names);
  const DeviceSpec spec = parse_device_spec(o.devices);
  const ProcessLayout layout = process_layout(o.cluster, o.replicas_per_process, spec.count());
  if (layout.processes > 1) {
    // Each process opens its node's devices, or its own when it sees only those.
    Backend& b = backend(spec.kind);
    if (!b.logical()) check_visible_devices(layout, spec.kind, b.device_count());
  } else {
    check_devices_available(spec);
  }
  // Replica 0 loads the checkpoint; the process running it reads the files' headers now, so
  // that a missing or broken file is named before any work starts.
  if (!o.load.empty() && layout.local > 0 && layout.first == 0) check_checkpoint_files(o.load);
  const int64_t threads = static_cast<int64_t>(layout.local) * o.threads;
  SS_CHECK_INPUT(
      !backend(spec.kind).logical() || threads <= kMaxCpuThreads,
      "{}: {} devices in this process × {} threads need {} threads; one process may use at "
      "most {}",
      names.subject("threads", o.threads), layout.local, o.threads, threads, kMaxCpuThreads);
  (void)replica_batch(o, spec.count(), names);
  const Precision precision = run_precision(o, spec.kind, names);
  // A skipped step has no gradients to measure; the noise scale is the gradients', whatever
  // the precision computing them.
  if (o.noise_scale && scales_loss(precision)) {
    throw_usage_error(fmt::format(
        "{} with {}: fp16's loss scaling skips the steps whose gradients overflow, which leaves "
        "gaps in the gradient norms; measure the noise scale in fp32 or bf16",
        names.name("noise_scale"), names.subject_text("precision", o.precision)));
  }
}

Precision run_precision(const std::string& name, DeviceKind kind, const OptionSources& names) {
  const std::vector<Precision> offered = kernel_backend(kind).precisions();
  if (name.empty()) return offered.front();
  const Precision p = parse_precision(name);
  if (std::find(offered.begin(), offered.end(), p) != offered.end()) return p;
  std::vector<std::string> offered_names;
  for (Precision q : offered) offered_names.push_back(to_string(q));
  const std::string why = kernel_backend(kind).precision_refusal(p);
  throw_usage_error(fmt::format(
      "{}: {} devices compute in {}{}", names.subject_text("precision", name), to_string(kind),
      fmt::join(offered_names, " or "), why.empty() ? "" : fmt::format(" ({})", why)));
}

Precision run_precision(const TrainOptions& o, DeviceKind kind, const OptionSources& names) {
  return run_precision(o.precision, kind, names);
}

}  // namespace scalescope
