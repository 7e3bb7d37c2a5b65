#include "harness/cli/training_options.h"

#include "harness/collectives/cluster.h"

namespace scalescope::cli {

TrainingFlags training_flags_from(const TrainOptions& o, bool lr_set) {
  TrainingFlags f;
  f.optimizer = to_string(o.optimizer.kind);
  if (lr_set) f.lr = o.optimizer.lr;
  f.lr_scaling = to_string(o.lr_scaling);
  return f;
}

void add_training_options(CLI::App& cmd, TrainOptions& o, TrainingFlags& f) {
  cmd.add_option("--optimizer", f.optimizer, "sgd or adam")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  cmd.add_option("--lr", f.lr, "Base learning rate (default: 0.001 for adam, 0.01 for sgd)");
  cmd.add_option("--lr-scaling", f.lr_scaling,
                 "Learning rate rule for N devices: none, linear (×N) or sqrt (×√N)")
      ->capture_default_str();
  cmd.add_option("--lr-warmup-steps", o.lr_warmup_steps,
                 "Steps over which the learning rate rises from --lr to the scaled rate")
      ->capture_default_str();
  cmd.add_option("--momentum", o.optimizer.momentum, "SGD momentum")->capture_default_str();
  cmd.add_option("--weight-decay", o.optimizer.weight_decay, "L2 weight decay")
      ->capture_default_str();
  cmd.add_option("--accumulate", o.accumulation,
                 "Gradient accumulation: micro-batches per step, all-reduced once")
      ->capture_default_str();
  cmd.add_option("--bucket-cap-mb", o.bucket_cap_mb, "Gradient bucket size cap (MiB)")
      ->capture_default_str();
  cmd.add_option("--first-bucket-mb", o.first_bucket_mb,
                 "Cap of the first bucket, which starts communication early (MiB)")
      ->capture_default_str();
  cmd.add_flag("!--no-overlap", o.overlap,
               "All-reduce after backward instead of during it (shows what overlap buys)");
  cmd.add_flag("!--no-tf32", o.tf32,
               "GPU kernels compute fp32 products in strict fp32, not TF32 on tensor cores");
  cmd.add_option("--collective-timeout-ms", o.collective_timeout_ms,
                 "A collective that waits longer fails the run (a lost replica never hangs it)")
      ->capture_default_str();
  cmd.add_option("--memory-limit-mb", o.memory_limit_mb,
                 "Device memory per replica in MiB (0: all); more fails as out of memory")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "Seed of weights and data")->capture_default_str();
  cmd.add_option("--ranks-per-node", f.ranks_per_node,
                 "Under mpirun/srun: the processes each node must run (1: one per node hosting "
                 "its devices as threads; the device count: one per device); a launch that "
                 "differs is refused. 0: as launched")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void check_launch(const TrainingFlags& f, const Cluster& cluster) {
  if (f.ranks_per_node > 0) cluster.check_ranks_per_node(f.ranks_per_node);
}

void apply_training_flags(const TrainingFlags& f, TrainOptions& o) {
  o.optimizer.kind = f.optimizer == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdam;
  o.optimizer.lr = f.lr.value_or(o.optimizer.kind == OptimizerKind::kSgd ? 0.01f : 1e-3f);
  o.lr_scaling = parse_lr_scaling(f.lr_scaling);
}

}  // namespace scalescope::cli
