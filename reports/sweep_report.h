// The report of a scaling sweep (`scalescope sweep -o report.json`): every point's raw
// per-step samples, and the analysis derived from them (throughput with confidence
// intervals, speedup and efficiency against one device, phase breakdown, bottleneck
// verdict, efficiency-loss breakdown, the all-reduce cost model and its projection).
//
// The samples are the record; the analysis is recomputed from them whenever a report is
// read (so `scalescope report` on an old file shows what this version concludes) and written
// next to them for readers that do not run scalescope.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/analysis/scaling.h"
#include "reports/analysis/stats.h"
#include "reports/analysis/time_to_target.h"
#include "reports/environment.h"
#include "reports/run_report.h"

namespace scalescope {

inline constexpr const char* kSweepSchema = "scalescope-sweep";
inline constexpr const char* kSweepSchemaVersion = "1.21";

// Weak scaling keeps the per-device batch (the global batch grows with the devices); strong
// scaling keeps the global batch (each device gets a smaller share).
enum class ScalingMode { kWeak, kStrong };
std::string to_string(ScalingMode mode);
ScalingMode parse_scaling_mode(const std::string& text);  // "weak" | "strong"

// One repeat of a point: its measured steps only (warm-up steps are not kept).
struct RepeatRecord {
  int64_t warmup_steps = 0;
  bool warmup_settled = true;  // false: the warm-up stopped at its bound, not settled
  double first_loss = 0.0;
  double last_loss = 0.0;
  std::vector<StepRecord> steps;                  // phases per replica; bucket_ms replica 0's
  std::optional<AllReduceSplit> allreduce_split;  // runs across nodes
  // GPU runs: NVML's utilisation over the measured steps, averaged over the GPUs sampled.
  std::optional<double> gpu_util_percent;
  std::optional<TargetRecord> target;             // time-to-accuracy sweeps
  std::optional<LossScalingRecord> loss_scaling;  // fp16 runs. Since 1.17.
};

// What the analysis derives for one point. Filled by analyze().
struct PointSummary {
  int64_t measured_steps = 0;
  Interval throughput;  // samples/s: global batch / median step time, bootstrap CI
  double step_ms_median = 0.0;
  double step_ms_p10 = 0.0;
  double step_ms_p90 = 0.0;
  double step_ms_cv = 0.0;
  // Per step, the phases of the slowest replica (it sets the step time): medians.
  PhaseMedians group;
  std::vector<PhaseMedians> replicas;
  // Against the one-device point of the same model and batch (weak: per-device batch,
  // strong: global batch); absent when that point is missing or failed.
  std::optional<Interval> speedup;
  std::optional<Interval> efficiency;
  std::optional<LossBreakdown> loss;  // N > 1 only
  // Runs across nodes: the share of the all-reduce that stays within a node (median of the
  // repeats' AllReduceSplit::intra_node_fraction); splits the loss breakdown's all-reduce share.
  std::optional<double> intra_node_fraction;
  std::optional<double> gpu_util_percent;  // GPU runs: median over the repeats
  Verdict verdict;
  // Bus bandwidth the all-reduces achieved in training (N > 1): Σ bus bytes / Σ time over the
  // buckets' median times.
  std::optional<double> bus_bandwidth_gbps;
  // --noise-scale: the gradient noise scale over the pooled measured steps (points whose
  // gradients came in two batch sizes).
  std::optional<NoiseScale> noise;
  // With a positive noise scale and a one-device baseline: what the larger global batch costs
  // in samples against the baseline's (the time-to-accuracy speedup is speedup × efficiency).
  std::optional<StatisticalScaling> statistics;
  // Time-to-accuracy sweeps: the repeats' time to the target, and against one device.
  std::optional<TimeToTarget> time_to_target;
};

// Bucket caps as tables and labels show them: "5 MB", or "5 MB (first 0.5 MB)" when the
// first bucket's cap is not the default.
std::string bucket_caps_text(double cap_mb, double first_mb);
// " in bf16" for a precision other than the devices' default, "" for the default: how labels
// and headings name a point's precision.
std::string precision_text(Precision precision, bool is_default);

struct SweepPoint {
  std::string model;
  int64_t params = 0;
  int64_t forward_flops_per_sample = 0;
  std::string device_kind;  // "cpu" | "cuda" | "sim" (simulated accelerators: CPU timings)
  int devices = 1;
  std::string device_spec;  // what the trainer ran on: "cpu:2", "cuda:2"
  int threads_per_device = 0;
  // Host threads each replica ran for communication (RunReport's); -1: not recorded (sweeps
  // before 1.14).
  int communication_threads_per_device = -1;
  ScalingMode mode = ScalingMode::kWeak;
  int64_t batch = 0;  // per device
  int64_t global_batch = 0;
  std::string status = "ok";  // "ok" | "failed"
  std::string error;          // why it failed
  // The caps the gradient buckets were planned with (MiB; harness/trainer/buckets.h). No
  // all-reduce runs on one device, so they tell apart only points of more than one.
  double bucket_cap_mb = kDefaultBucketCapMb;
  double first_bucket_mb = kDefaultFirstBucketMb;
  // Cast to 16 bits for the all-reduce (only points of more than one device). Since 1.6.
  GradCompression grad_compression = GradCompression::kNone;
  // What the kernels computed in. Since 1.16; earlier sweeps ran their devices' default, which
  // is what `precision_default` marks: a point of the default keeps its key, file name and label.
  Precision precision = Precision::kFp32;
  bool precision_default = true;
  std::vector<int64_t> bucket_bytes;  // all-reduced per replica: half the floats' compressed
  int64_t peak_memory_bytes = 0;      // most device memory one replica held
  // GPU points: the passes that ran a non-deterministic algorithm although deterministic ones
  // were preferred (fallback_passes of its runs). Since 1.14.
  std::vector<std::string> nondeterministic_fallbacks;
  // --profile-layers: replica 0's layers, their times the mean over the repeats. Since 1.15.
  std::vector<LayerTimeRecord> layer_profile;
  std::string trace;    // Chrome trace of its first repeat ("" none)
  std::string profile;  // Nsight Systems report of it ("" none)
  std::vector<RepeatRecord> repeats;
  PointSummary summary;  // analyze()

  bool ok() const { return status == "ok"; }
  bool simulated() const { return device_kind == "sim"; }
  bool default_buckets() const {
    return bucket_cap_mb == kDefaultBucketCapMb && first_bucket_mb == kDefaultFirstBucketMb;
  }
  std::string buckets_text() const { return bucket_caps_text(bucket_cap_mb, first_bucket_mb); }
  bool compressed() const { return grad_compression != GradCompression::kNone; }
  // "cifar-cnn cpu:2 batch 64" — how tables and progress name the point; "... bucket 5 MB"
  // on more than one device with other than the default caps, "... fp16 gradients" with
  // compression, "... in bf16" in a precision other than the devices' default.
  std::string label() const;
  // Points with equal keys measure the same thing (resume and compare match on it).
  std::string key() const;
};

// Per model: the all-reduce cost model fitted over every measured bucket of the model (in every
// precision: each all-reduces fp32 gradients), and per batch and precision the efficiency it
// projects for device counts beyond those measured.
struct CommunicationAnalysis {
  std::string model;
  std::optional<AlphaBetaFit> fit;
  std::string fit_error;  // why there is no fit (e.g. only one device measured)
  // Whether the fit took only the points whose replicas spanned nodes: when some did, the link
  // between nodes sets their all-reduce's cost, and points inside one node (at the node's own
  // speed) would pull a fit of both towards neither.
  bool across_nodes = false;
  // Whether the fit explains the measured times well enough to project from
  // (unreliable_fit_reason); without, there are no series.
  bool reliable = false;
  // Why there are no series, or why they stop short of 8 times the largest device count
  // measured (CPU devices beyond the cores they would share); "" when neither.
  std::string projection_note;
  struct Series {
    int64_t batch = 0;
    // The precision of the points it projects from (their compute time and one-device step):
    // as SweepPoint's.
    Precision precision = Precision::kFp32;
    bool precision_default = true;
    int measured_devices = 0;  // the largest device count the projection starts from
    std::vector<Projection> projections;
  };
  std::vector<Series> series;  // weak scaling only
};

// What the points that one comparison compares have in common: model, device kind and count,
// scaling mode, batch and precision.
struct PointGroup {
  std::string model;
  std::string device_kind;
  int devices = 2;
  ScalingMode mode = ScalingMode::kWeak;
  int64_t batch = 0;  // per device (weak) or global (strong), as the grid's batch axis
  Precision precision = Precision::kFp32;  // as SweepPoint's
  bool precision_default = true;
  static PointGroup of(const SweepPoint& p);
  // "cifar-cnn cpu:2 batch 64", "... in bf16" in a precision other than the devices' default;
  // `qualifier` (" fp16 gradients", " bucket 5 MB") goes before the precision, as in a point's.
  std::string label(std::string_view qualifier = "") const;
};

// Per model, scaling mode, batch and device count (N > 1) measured with more than one
// bucket setting: the setting of the best throughput, against the default caps (25 MB, first
// 1 MB) where the sweep measured them, else against its first setting.
struct BucketChoice : PointGroup {
  GradCompression compression = GradCompression::kNone;  // of every setting
  struct Setting {
    double cap_mb = 0.0;
    double first_mb = 0.0;
    double throughput = 0.0;    // samples/s, the point's median
    double allreduce_ms = 0.0;  // median per step, overlapped or not
    double exposed_ms = 0.0;    // median per step: the all-reduce nothing hid
    bool operator==(const Setting&) const = default;
    std::string text() const { return bucket_caps_text(cap_mb, first_mb); }
  };
  std::vector<Setting> settings;  // ascending cap, then first cap
  size_t best = 0;                // index into settings
  size_t reference = 0;
  bool reference_is_default = false;
  // Best throughput / the reference's, bootstrap CI over the pooled step times. "Better"
  // only when the whole interval lies above 1; otherwise no better than the reference.
  Interval gain;
  bool better() const { return best != reference && gain.low > 1.0; }
};
// One sentence: the best setting and what it gains over the reference, or that it is no
// better (tables and the HTML page say the same).
std::string bucket_conclusion(const BucketChoice& c);

// Per model, scaling mode, batch, device count (N > 1) and bucket caps measured both without
// and with gradient compression: what each compression changed against none.
struct CompressionEffect : PointGroup {
  double cap_mb = kDefaultBucketCapMb;
  double first_mb = kDefaultFirstBucketMb;
  struct Setting {
    GradCompression compression = GradCompression::kNone;
    int64_t bytes_per_step = 0;          // all-reduced per replica
    double throughput = 0.0;             // samples/s, the point's median
    double step_ms = 0.0;                // median
    double allreduce_ms = 0.0;           // median per step, overlapped or not (the casts apart)
    double exposed_ms = 0.0;             // median per step: the all-reduce (and casts) nothing hid
    double cast_ms = 0.0;                // median per step: the casts to 16 bits and back
    std::optional<Interval> efficiency;  // against the one-device point, when measured
    // Compressed settings: the step time saved against none (median; negative when slower),
    // and the throughput against none, bootstrap CI over the pooled step times (same global
    // batch). Faster only when the whole interval lies above 1.
    double saved_ms = 0.0;
    std::optional<Interval> gain;
    bool faster() const { return gain && gain->low > 1.0; }
  };
  std::vector<Setting> settings;  // none first, then fp16, bf16 as measured
};
// One sentence per compressed setting (settings[i], i >= 1): the bytes it sent, what it did
// to the exposed all-reduce and the step, and whether it is faster (tables and the HTML page
// say the same).
std::string compression_conclusion(const CompressionEffect& e, size_t i);

struct SweepReport {
  std::string tool_version;
  std::string created;                 // UTC ISO-8601 of the sweep's start
  Environment environment;             // rank 0's in a multi-process sweep
  std::optional<ClusterInfo> cluster;  // multi-process sweeps only
  nlohmann::json config;               // the sweep's options as run (resume reads them back)
  std::vector<SweepPoint> points;
  std::vector<CommunicationAnalysis> communication;    // analyze()
  std::vector<BucketChoice> bucket_choices;            // analyze()
  std::vector<CompressionEffect> compression_effects;  // analyze()
  bool complete = false;  // every point of the grid has run (ok or failed)
};

nlohmann::json to_json(const SweepReport& report);
// Strict: a missing or mistyped key throws Error naming it (and `what`, e.g. the path);
// analysis is recomputed from the samples.
SweepReport sweep_report_from_json(const nlohmann::json& j, const std::string& what);
// Written atomically: a reader (or a crash) never sees half a file.
void write_sweep_report(const std::string& path, const SweepReport& report);
SweepReport read_sweep_report(const std::string& path);

}  // namespace scalescope
