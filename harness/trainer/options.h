// The options of one training run (what `scalescope train` and every sweep point run), their
// declarations in the option schema, the learning-rate schedule they imply, and the checks
// that refuse a bad value before any work starts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness/options/option_schema.h"
#include "harness/trainer/data.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "models/optimizer.h"
#include "reports/analysis/stats.h"
#include "reports/run_report.h"

namespace scalescope {

class Cluster;

// How the learning rate grows with the number of replicas N (the global batch grows with N
// in data parallelism): kept, × N (Goyal et al. 2017) or × √N (Krizhevsky 2014).
enum class LrScaling { kNone, kLinear, kSqrt };
LrScaling parse_lr_scaling(const std::string& name);  // throws Error naming the value
std::string to_string(LrScaling scaling);

// The learning rate of step `step` (1-based): `base` × the rule's factor for `replicas`,
// reached linearly over the first `warmup_steps` steps from `base` (gradual warm-up; no
// warm-up when 0).
double scheduled_lr(double base, LrScaling scaling, int replicas, int64_t warmup_steps,
                    int64_t step);

struct TrainOptions {
  std::string model = "cifar-cnn";
  std::string devices = "cpu:1";
  int threads = 0;  // per CPU device; 0: all cores divided by the device count
  // Samples per micro-batch and device. `global_batch` (when > 0) instead fixes the
  // samples per step over all devices; it must divide by devices × accumulation.
  int64_t batch = 64;
  int64_t global_batch = 0;
  // Gradient accumulation: each step runs this many micro-batches of `batch` per replica and
  // all-reduces once; the step's global batch is batch × replicas × accumulation.
  int accumulation = 1;
  // Length: `steps` steps, or `epochs` passes over the training data (exactly one > 0).
  int64_t steps = 200;
  int64_t epochs = 0;
  DataOptions data;
  // Evaluate on the eval split after every epoch (and after a final partial one), or every
  // `eval_every` steps (and after the last) when that is positive.
  bool eval = true;
  int64_t eval_every = 0;
  // Time to accuracy: training stops at the first evaluation whose accuracy reaches
  // `until_accuracy` (a fraction; 0: no target) or whose loss falls to `until_loss` (0: no
  // target); `steps` or `epochs` is then the most it may train.
  double until_accuracy = 0.0;
  double until_loss = 0.0;
  bool has_target() const { return until_accuracy > 0.0 || until_loss > 0.0; }
  OptimizerConfig optimizer;  // optimizer.lr is the base (one-replica) learning rate
  LrScaling lr_scaling = LrScaling::kNone;
  int64_t lr_warmup_steps = 0;
  uint64_t seed = 1;
  std::string save;  // checkpoint to write at the end ("" = none)
  std::string load;  // checkpoint to start from ("" = fresh weights from the seed)
  int64_t warmup_steps = 5;
  // Adaptive warm-up (sweeps): instead of a fixed `warmup_steps`, warm-up steps run until the
  // group's step time settles (detect_steady_state), at most `max_steps` of them; then
  // `steps` measured steps follow. Replicas share their step times during warm-up (one
  // all-gather of a number per step, outside the timed step) so all decide alike.
  struct AdaptiveWarmup {
    bool enabled = false;
    int64_t max_steps = 50;
    SteadyStateOptions steady;
  } adaptive_warmup;
  // Gradient buckets: all-reduced during backward (overlap) or after it.
  double bucket_cap_mb = kDefaultBucketCapMb;
  double first_bucket_mb = kDefaultFirstBucketMb;
  bool overlap = true;
  // Each step's batch copied to the device during the step before (when the input pipeline
  // has it ready by then) instead of at the step's start.
  bool prefetch = true;
  // Replica 0 times each layer's forward and backward (events around each, on the stream).
  bool profile_layers = false;
  // Each bucket cast to a 16-bit type for its all-reduce (runs of more than one device).
  GradCompression grad_compression = GradCompression::kNone;
  // The gradient noise scale (reports/analysis/noise_scale.h): every step, each gradient bucket's
  // squared norm before and after its all-reduce (two passes over the gradients).
  bool noise_scale = false;
  // Every collective gives up after this long (a lost replica must not hang the others).
  int64_t collective_timeout_ms = 60000;
  // CPU replicas of one process all-reduce through shared memory (false: over Gloo's TCP on
  // loopback, as separate hosts would). Across processes it is always Gloo.
  bool cpu_shared_memory = true;
  // Batch norm normalizes with the statistics of every replica's batch, all-reduced inside
  // forward and backward (PyTorch's SyncBatchNorm); false: each replica's own (DDP's default).
  bool sync_batchnorm = false;
  // Consistency guard: every this many steps (and after the last one) the replicas compare
  // checksums of their weights; a difference is an error naming the step and the replicas.
  // 0: only after the last step.
  int64_t check_every = 100;
  // Device memory each replica may use, in MiB (0: what the device has): emulates a smaller
  // device; a run that needs more fails as out of memory.
  double memory_limit_mb = 0.0;
  // Measured steps first..last (1-based, counted after the warm-up; 0: none) run inside a
  // profiler capture range: cudaProfilerStart/Stop on GPUs and an NVTX range "profile" on
  // every replica thread, so `nsys profile --capture-range=cudaProfilerApi` (or
  // `--capture-range=nvtx`) records just them.
  int64_t profile_first = 0;
  int64_t profile_last = 0;
  std::string command_line;
  // The precision kernels compute in (core/precision.h; models/kernels.h set_precision, set
  // for the whole process when train() begins): a name, or "" for the devices' default (tf32
  // on GPUs, fp32 on CPU and simulated devices; run_precision).
  std::string precision;
  // The retired --no-tf32 (config key "tf32"), now --precision fp32: only its check is left,
  // which names the new spelling when it is given false.
  bool retired_tf32 = true;
  // Whether GPU kernels must be deterministic: unset (the default) prefers deterministic
  // algorithms where they fit, true requires them, false allows any (determinism_of; set for
  // the whole process with the precision).
  std::optional<bool> deterministic;
  // How cuDNN's convolution algorithms are chosen (models/kernels.h ConvSearch; set for the
  // whole process with the precision).
  ConvSearch conv_search = ConvSearch::kHeuristic;
  // Models run activations inside the kernels next to them (models/fusion.h
  // set_fuse_layers; set with the precision).
  bool fusion = true;
  // Multi-process runs (harness/collectives/cluster.h): the processes of an MPI launch, or
  // null for this process alone. `devices` counts devices over all processes; each process
  // hosts `replicas_per_process` of them as threads (0: devices / processes), and a run
  // with fewer devices than the processes host uses the first processes only (the others
  // take part in its rendezvous and wait for its results). Every process must call train()
  // with the same options; each returns the whole run's report.
  Cluster* cluster = nullptr;
  int replicas_per_process = 0;
};

// The precision a run of `options` on devices of `kind` computes in: `options.precision`, or
// the kind's default when that is "". Throws Error naming the option (through `names`) when
// the kind's kernels do not compute in it.
Precision run_precision(const TrainOptions& options, DeviceKind kind,
                        const OptionSources& names = {});
// The same for one name of a sweep's precision axis ("" for the default).
Precision run_precision(const std::string& name, DeviceKind kind, const OptionSources& names = {});

// What `options.deterministic` asks of the kernels (models/kernels.h set_determinism).
Determinism determinism_of(const TrainOptions& options);

// The per-replica micro-batch of `options` on `replicas` replicas: `batch`, or
// `global_batch` / (replicas × accumulation), which must divide exactly (throws Error naming
// the values otherwise).
int64_t per_replica_batch(const TrainOptions& options, int replicas);

// The gradient compression a run on `replicas` replicas applies: none on one replica, which
// all-reduces nothing.
GradCompression effective_compression(const TrainOptions& options, int replicas);
// Whether a run on `replicas` replicas measures the gradient noise scale: when asked to and
// its gradients come in two batch sizes (more than one replica, or accumulation).
bool measures_noise(const TrainOptions& options, int replicas);
// The 16-bit format of a compression (nullopt for none).
std::optional<kernel_math::HalfFormat> half_format(GradCompression compression);

// The options' declarations (harness/options/option_schema.h), in groups: the optimizer and
// gradient exchange ("training"); the input pipeline ("data"; `with_workers` false for a
// command with its own list of worker counts); everything a `train` run takes (the model,
// devices, batch and length, and both groups).
// Sweeps declare the bucket caps, the gradient compression and the precision as lists (axes
// of their grid) instead of one value each.
struct TrainingAxes {
  std::vector<double>* caps_mb = nullptr;
  std::vector<double>* first_mb = nullptr;
  std::vector<std::string>* compressions = nullptr;
  std::vector<std::string>* precisions = nullptr;
};
// --profile-layers (train's and sweep's).
void add_profile_layers_option(OptionList& list, TrainOptions& options);
void add_training_options(OptionList& list, TrainOptions& options,
                          const TrainingAxes* axes = nullptr);
void add_data_options(OptionList& list, DataOptions& options, bool with_workers = true);
// Evaluation every N steps and the time-to-accuracy targets (`train` and `sweep`).
void add_target_options(OptionList& list, TrainOptions& options);
void add_train_options(OptionList& list, TrainOptions& options);
// `options` as a config file for `train` holds them (a run report's config block).
nlohmann::json train_config_json(const TrainOptions& options);

// Checks the options that need no data before any work starts: every declaration's check,
// then those across options; throws Error naming the bad value as `names` says (by the
// options' keys unless told how the user gave them) and what would be accepted.
void validate(const TrainOptions& options, const OptionSources& names = {});

// What a caller of train() may run inside the run; none of it changes what is measured
// unless said.
struct TrainHooks {
  // Progress, in the process of replica 0: after every step (once all of that process's
  // replicas recorded it: its loss and times as the report has them in a run of one process,
  // over that process's replicas in one of several; one call at a time, on one of their
  // threads), and after every evaluation (on replica 0's thread).
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const EvalRecord&)> on_eval;
  // Fault injection (tests): called on every replica's thread after each optimizer step
  // with the replica's weights (on devices whose memory the host cannot read, a host copy
  // written back after the call).
  std::function<void(int rank, int64_t step, std::span<float> weights)> after_step;
  // Fault injection (tests): called on every replica's thread in each step after its work
  // (the gradients' all-reduce included) is queued, just before the step's host wait, where
  // an error other than the collectives' (the next batch's prefetch) leaves them queued.
  std::function<void(int rank, int64_t step)> before_step_wait;
  // Fault injection (tests), fp16 runs: replica `rank`'s loss at step `step` is scaled by what
  // this returns on top of the loss scale (1: as the scaler says), so that its gradients
  // overflow fp16 where a real model's would.
  std::function<float(int rank, int64_t step)> loss_scale_factor;
  // Tests: reduce the buckets on the device's streams (StreamReducer) even where the
  // communicator blocks, so that the enqueued path's step logic runs on CPU devices. The
  // results are the same, without overlap.
  bool reduce_on_streams = false;
};

}  // namespace scalescope
