#include "harness/trainer/options.h"

#include <cmath>

#include "core/backend.h"
#include "core/check.h"
#include "core/device_spec.h"
#include "harness/trainer/layout.h"
#include "models/zoo.h"

namespace scalescope {

LrScaling parse_lr_scaling(const std::string& name) {
  if (name == "none") return LrScaling::kNone;
  if (name == "linear") return LrScaling::kLinear;
  if (name == "sqrt") return LrScaling::kSqrt;
  throw_error(fmt::format("--lr-scaling {}: unknown rule; use none, linear or sqrt", name));
}

std::string to_string(LrScaling scaling) {
  switch (scaling) {
    case LrScaling::kNone:
      return "none";
    case LrScaling::kLinear:
      return "linear";
    case LrScaling::kSqrt:
      return "sqrt";
  }
  return "?";
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

int64_t per_replica_batch(const TrainOptions& o, int replicas) {
  if (o.global_batch <= 0) return o.batch;
  const int64_t parts = static_cast<int64_t>(replicas) * o.accumulation;
  SS_CHECK(o.global_batch % parts == 0,
           "--global-batch {} does not divide over {} device(s){}: use a multiple of {}",
           o.global_batch, replicas,
           o.accumulation > 1 ? fmt::format(" × {} accumulated micro-batches", o.accumulation)
                              : std::string(),
           parts);
  return o.global_batch / parts;
}

void validate(const TrainOptions& o) {
  SS_CHECK(o.batch > 0, "--batch {} must be a positive number of samples", o.batch);
  SS_CHECK(o.global_batch >= 0, "--global-batch {} must be a positive number of samples",
           o.global_batch);
  SS_CHECK(o.accumulation >= 1 && o.accumulation <= 4096,
           "--accumulate {} must be between 1 and 4096 micro-batches per step", o.accumulation);
  SS_CHECK(o.lr_warmup_steps >= 0, "--lr-warmup-steps {} must not be negative", o.lr_warmup_steps);
  SS_CHECK(o.check_every >= 0, "--check-every {} must be 0 (only at the end) or positive",
           o.check_every);
  SS_CHECK(o.profile_first >= 0 && o.profile_last >= o.profile_first &&
               (o.profile_first > 0) == (o.profile_last > 0),
           "--profile-steps {}:{} must be FIRST:LAST with 1 <= FIRST <= LAST", o.profile_first,
           o.profile_last);
  SS_CHECK(o.profile_first == 0 || o.profile_last <= o.steps || o.epochs > 0,
           "--profile-steps {}:{} goes past the {} measured steps", o.profile_first, o.profile_last,
           o.steps);
  SS_CHECK(std::isfinite(o.memory_limit_mb) && o.memory_limit_mb >= 0.0,
           "--memory-limit-mb {} must be 0 (no limit) or a positive size", o.memory_limit_mb);
  if (o.adaptive_warmup.enabled) {
    SS_CHECK(o.epochs == 0, "an adaptive warm-up needs --steps (measured steps), not --epochs");
    SS_CHECK(o.adaptive_warmup.max_steps >= 1, "the warm-up bound {} must be at least one step",
             o.adaptive_warmup.max_steps);
  }
  SS_CHECK(o.epochs >= 0, "--epochs {} must be a positive number of epochs", o.epochs);
  SS_CHECK(o.epochs == 0 || o.steps == 0, "give --steps or --epochs, not both");
  SS_CHECK(o.epochs > 0 || o.steps > 0, "--steps {} must be a positive number of steps", o.steps);
  SS_CHECK(o.threads >= 0, "--threads {} must be 0 (automatic) or positive", o.threads);
  SS_CHECK(o.warmup_steps >= 0, "warm-up steps {} must not be negative", o.warmup_steps);
  SS_CHECK(std::isfinite(o.optimizer.lr) && o.optimizer.lr > 0.0f,
           "--lr {} must be a positive number", o.optimizer.lr);
  SS_CHECK(std::isfinite(o.bucket_cap_mb) && o.bucket_cap_mb > 0.0,
           "--bucket-cap-mb {} must be a positive size", o.bucket_cap_mb);
  SS_CHECK(std::isfinite(o.first_bucket_mb) && o.first_bucket_mb > 0.0,
           "--first-bucket-mb {} must be a positive size", o.first_bucket_mb);
  SS_CHECK(o.collective_timeout_ms > 0, "collective timeout {} ms must be positive",
           o.collective_timeout_ms);
  const DeviceSpec spec = parse_device_spec(o.devices);
  const ProcessLayout layout = process_layout(o.cluster, o.replicas_per_process, spec.count());
  if (layout.processes > 1 && spec.kind != DeviceKind::kCpu) {
    // Each process opens its node's devices: check this node's share.
    DeviceSpec mine{.kind = spec.kind, .indices = {}};
    for (int i = 0; i < layout.on_node; ++i) mine.indices.push_back(i);
    check_devices_available(mine);
  } else if (layout.processes == 1) {
    check_devices_available(spec);
  }
  (void)per_replica_batch(o, spec.count());
  (void)make_model(o.model);  // throws on an unknown model or key
  (void)parse_data_spec(o.data.spec);
}

}  // namespace scalescope
