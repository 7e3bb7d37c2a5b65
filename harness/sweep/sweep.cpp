#include "harness/sweep/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <new>
#include <set>

#include "core/backend.h"
#include "core/check.h"
#include "core/device_spec.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "harness/collectives/cluster.h"
#include "harness/trainer/data.h"
#include "models/zoo.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/json_reader.h"
#include "reports/writers/trace.h"

namespace scalescope {
namespace {

Cluster* cluster_of(const SweepOptions& o) {
  return o.train.cluster != nullptr && o.train.cluster->multi_process() ? o.train.cluster : nullptr;
}

// Rank 0 alone writes the report and the traces (every process holds the same results).
bool writes_files(const SweepOptions& o) {
  return cluster_of(o) == nullptr || cluster_of(o)->rank() == 0;
}

// Replicas each process hosts: the largest count spread over all processes.
int replicas_per_process(const SweepOptions& o, const DeviceAxis& axis,
                         const OptionSources& names = {}) {
  const Cluster* cluster = cluster_of(o);
  const int most = axis.counts.back();
  if (cluster == nullptr) return most;
  SS_CHECK_INPUT(most % cluster->size() == 0,
                 "{}: the largest count, {}, does not spread evenly over the {} processes of this "
                 "launch (each process hosts the same number of devices)",
                 names.subject("devices", o.devices), most, cluster->size());
  return most / cluster->size();
}

// Devices on this process's node at the sweep's largest point.
int devices_per_node(const SweepOptions& o, const DeviceAxis& axis) {
  const Cluster* cluster = cluster_of(o);
  if (cluster == nullptr) return axis.counts.back();
  return replicas_per_process(o, axis) * cluster->local_size();
}

// Devices that share this process's cores at the sweep's largest point: its own and those of
// the processes running on the same cores (Cluster::shares_cores_with).
int devices_sharing_cores(const SweepOptions& o, const DeviceAxis& axis) {
  const Cluster* cluster = cluster_of(o);
  if (cluster == nullptr) return axis.counts.back();
  return replicas_per_process(o, axis) * cluster->processes_sharing_cores();
}

int cpu_threads_per_device(const SweepOptions& o, const DeviceAxis& axis) {
  if (o.threads > 0) return o.threads;
  const int cores = backend(DeviceKind::kCpu).device_count();
  return std::max(1, cores / devices_sharing_cores(o, axis));
}

std::vector<double> ascending_unique(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The compressions named, in the enum's order (none first), each once.
std::vector<GradCompression> compression_axis(const std::vector<std::string>& names) {
  std::vector<GradCompression> out;
  for (const std::string& name : names) out.push_back(parse_grad_compression(name));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The settings of the gradient exchange a point of `devices` devices runs: every cap × first
// cap × compression, or on one device (which all-reduces nothing) the first of each.
struct GradientSetting {
  double cap_mb;
  double first_mb;
  GradCompression compression;
};
std::vector<GradientSetting> gradient_settings(const SweepOptions& o, int devices) {
  const std::vector<double> caps = ascending_unique(o.bucket_caps_mb);
  const std::vector<double> firsts = ascending_unique(o.first_buckets_mb);
  const std::vector<GradCompression> compressions = compression_axis(o.grad_compressions);
  SS_CHECK_INPUT(
      !caps.empty() && !firsts.empty() && !compressions.empty(),
      "bucket_cap_mb, first_bucket_mb and grad_compression need a value each (the grid has "
      "no points)");
  if (devices == 1) return {{caps.front(), firsts.front(), GradCompression::kNone}};
  std::vector<GradientSetting> out;
  for (double cap : caps) {
    for (double first : firsts) {
      for (GradCompression c : compressions) out.push_back({cap, first, c});
    }
  }
  return out;
}

// The precisions of the grid's points on devices of `kind`, each once, in the order given (the
// devices' default alone when none is).
std::vector<Precision> precision_axis(const SweepOptions& o, DeviceKind kind) {
  std::vector<Precision> out;
  if (o.precisions.empty()) return {run_precision("", kind)};
  for (const std::string& name : o.precisions) {
    const Precision p = run_precision(name, kind);
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<SweepPoint> sweep_grid(const SweepOptions& o, const DeviceAxis& axis) {
  std::vector<SweepPoint> points;
  const int threads = backend(axis.kind).logical() ? cpu_threads_per_device(o, axis) : 0;
  const std::vector<Precision> precisions = precision_axis(o, axis.kind);
  const Precision fallback = run_precision("", axis.kind);  // the devices' default
  for (const std::string& model : o.models) {
    for (int64_t batch : o.axis_batches(model)) {
      for (int n : axis.counts) {
        SweepPoint p;
        p.model = model;
        p.device_kind = to_string(axis.kind);
        p.devices = n;
        p.device_spec = to_string(DeviceSpec{axis.kind, n});
        p.threads_per_device = threads;
        p.mode = o.mode();
        const int64_t parts = static_cast<int64_t>(n) * o.train.accumulation;
        p.batch = p.mode == ScalingMode::kWeak ? batch : batch / parts;
        p.global_batch = p.mode == ScalingMode::kWeak ? batch * parts : batch;
        for (const Precision precision : precisions) {
          p.precision = precision;
          p.precision_default = precision == fallback;
          for (const GradientSetting& g : gradient_settings(o, n)) {
            p.bucket_cap_mb = g.cap_mb;
            p.first_bucket_mb = g.first_mb;
            p.grad_compression = g.compression;
            points.push_back(p);
          }
        }
      }
    }
  }
  return points;
}

namespace {

TrainOptions train_options_for(const SweepOptions& o, const SweepPoint& p) {
  TrainOptions t = o.train;
  t.model = p.model;
  t.devices = p.device_spec;
  t.threads = p.threads_per_device;
  t.batch = p.batch;
  t.bucket_cap_mb = p.bucket_cap_mb;
  t.first_bucket_mb = p.first_bucket_mb;
  t.grad_compression = p.grad_compression;
  t.precision = to_string(p.precision);
  t.global_batch = 0;
  t.save.clear();
  t.load.clear();
  if (t.has_target()) {
    // Every step counts towards the time to the target: a fixed warm-up, then all measured.
    t.steps = 0;
    t.epochs = o.max_epochs;
    t.eval = true;
    t.adaptive_warmup.enabled = false;
  } else {
    t.steps = o.steps;
    t.epochs = 0;
    t.eval = false;
    t.adaptive_warmup.enabled = true;
    t.adaptive_warmup.max_steps = o.max_warmup_steps;
    t.adaptive_warmup.steady = o.steady;
  }
  const auto profile = parse_profile_steps(o.profile_steps);
  t.profile_first = profile ? profile->first : 0;
  t.profile_last = profile ? profile->second : 0;
  t.command_line = o.command_line;
  // Fewer devices than a process hosts run in the first process alone (intra-node first).
  t.replicas_per_process =
      cluster_of(o) != nullptr ? replicas_per_process(o, resolve_devices(o)) : 0;
  return t;
}

RepeatRecord repeat_of(const RunReport& run) {
  RepeatRecord r;
  r.warmup_steps = run.warmup_steps;
  r.warmup_settled = run.warmup_settled;
  r.first_loss = run.steps.front().loss;
  r.last_loss = run.steps.back().loss;
  r.steps.assign(run.steps.begin() + static_cast<std::ptrdiff_t>(run.warmup_steps),
                 run.steps.end());
  r.allreduce_split = run.allreduce_split;
  r.target = run.target;
  r.loss_scaling = run.loss_scaling;
  double util = 0.0;
  int gpus = 0;
  for (const GpuUtilization& u : run.gpu_utilization) {
    if (u.samples == 0) continue;
    util += u.mean_gpu_util_percent;
    ++gpus;
  }
  if (gpus > 0) r.gpu_util_percent = util / gpus;
  return r;
}

// The point's layer profile, the mean of its repeats': `run`'s is repeat number `repeat`.
void add_layer_times(std::vector<LayerTimeRecord>& mean, const std::vector<LayerTimeRecord>& run,
                     int repeat) {
  if (repeat == 0) mean = run;
  if (repeat == 0 || mean.size() != run.size()) return;
  const double n = static_cast<double>(repeat + 1);
  for (size_t i = 0; i < run.size(); ++i) {
    mean[i].forward_ms += (run[i].forward_ms - mean[i].forward_ms) / n;
    mean[i].backward_ms += (run[i].backward_ms - mean[i].backward_ms) / n;
  }
}

void run_point(const SweepOptions& o, SweepPoint& p, const SweepProgress& progress, int& done,
               int total, std::chrono::steady_clock::time_point start, std::string& fatal) {
  const int first = done;
  try {
    for (int repeat = 0; repeat < o.repeats; ++repeat) {
      if (progress.on_run) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        progress.on_run(p, repeat, done, total, elapsed);
      }
      const RunReport run = train(train_options_for(o, p));
      p.params = run.params;
      p.forward_flops_per_sample = run.forward_flops_per_sample;
      p.threads_per_device = run.threads_per_device;
      p.communication_threads_per_device = run.communication_threads_per_device;
      p.nondeterministic_fallbacks = fallback_passes(run.kernels);
      add_layer_times(p.layer_profile, run.layer_profile, repeat);
      p.bucket_bytes = run.bucket_bytes;
      for (int64_t bytes : run.peak_memory_bytes) {
        p.peak_memory_bytes = std::max(p.peak_memory_bytes, bytes);
      }
      p.repeats.push_back(repeat_of(run));
      if (repeat == 0 && !o.trace_prefix.empty() && writes_files(o)) {
        p.trace = o.trace_prefix + point_file_name(p) + ".trace.json";
        write_chrome_trace(p.trace, p.repeats.back().steps, {p.label(), p.bucket_bytes});
      }
      ++done;
    }
  } catch (const std::bad_alloc&) {
    p.status = "failed";
    p.error = "out of memory";
  } catch (const Error& e) {
    p.status = "failed";
    // As main prints an error: a usage error (the point's batch larger than the dataset) reads
    // without our source line, which --verbose adds.
    p.error = error_text(e, log_level() <= LogLevel::kDebug);
    // A lost process ends the sweep: every later point would fail the same way (or, worse,
    // wait for it). The caller records this point and rethrows.
    if (e.library() == kClusterLibrary) fatal = e.message();
  } catch (const std::exception& e) {
    p.status = "failed";
    p.error = e.what();
  }
  if (!p.ok()) {
    p.repeats.clear();
    done = first + o.repeats;
  }
}

// After a signal: the report on disk holds every finished point (it is rewritten after each).
void throw_if_stopped(const SweepOptions& o, const SweepReport& report) {
  const int signal = interrupt_signal();
  if (signal == 0) return;
  const size_t n = report.points.size();
  std::string where;
  if (writes_files(o) && n == 0) {
    where = "; no point had finished";
  } else if (writes_files(o)) {
    where = fmt::format(
        "; its {} finished point{} in {} (`scalescope sweep --resume {}` runs "
        "the rest)",
        n, n == 1 ? " is" : "s are", o.output, o.output);
  }
  throw Interrupted(signal, "the sweep stopped" + where);
}

}  // namespace

std::string point_file_name(const SweepPoint& p) {
  std::string model = p.model;
  for (char& c : model) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '.') c = '_';
  }
  std::string name = fmt::format("{}_{}{}_{}{}", model, p.device_kind, p.devices,
                                 p.mode == ScalingMode::kWeak ? "b" : "gb",
                                 p.mode == ScalingMode::kWeak ? p.batch : p.global_batch);
  if (p.devices > 1 && !p.default_buckets()) {
    name += fmt::format("_bucket{}", p.bucket_cap_mb);
    if (p.first_bucket_mb != kDefaultFirstBucketMb)
      name += fmt::format("_first{}", p.first_bucket_mb);
  }
  if (p.devices > 1 && p.compressed()) name += "_" + to_string(p.grad_compression);
  if (!p.precision_default) name += fmt::format("_precision-{}", to_string(p.precision));
  return name;
}

DeviceAxis resolve_devices(const SweepOptions& o, const OptionSources& names) {
  DeviceAxis axis;
  naming(names, "devices", o.devices, [&] {
    axis = sweep_device_axis(o.devices, cluster_of(o) != nullptr ? cluster_of(o)->size() : 1);
  });
  (void)replicas_per_process(o, axis, names);
  if (axis.kind == DeviceKind::kCuda) {
    const Backend& b = backend(DeviceKind::kCuda);
    const int here = devices_per_node(o, axis);
    SS_CHECK_INPUT(here <= b.device_count(), "{}: {} GPUs asked for{}, this machine has {}{}",
                   names.subject("devices", o.devices), here,
                   cluster_of(o) != nullptr ? " on this node" : "", b.device_count(),
                   b.device_count() == 0 ? fmt::format(" ({})", b.unavailable_reason()) : "");
  }
  return axis;
}

void validate(const SweepOptions& o, const OptionSources& names) {
  SweepOptions checked = o;  // the declarations bind variables; these are a copy's
  OptionList list;
  add_sweep_options(list, checked);
  check_options(list, names);
  SS_CHECK_INPUT(!o.models.empty(),
                 "{} is empty: give at least one model (see `scalescope models`)",
                 names.name("models"));
  const char* batch_key = o.mode() == ScalingMode::kWeak ? "batch" : "global_batch";
  SS_CHECK_INPUT(!o.axis_batches().empty(), "{} is empty: give at least one batch size",
                 names.name(batch_key));
  SS_CHECK_INPUT(!o.bucket_caps_mb.empty(), "{} is empty: give at least one size",
                 names.name("bucket_cap_mb"));
  SS_CHECK_INPUT(!o.first_buckets_mb.empty(), "{} is empty: give at least one size",
                 names.name("first_bucket_mb"));
  SS_CHECK_INPUT(!o.grad_compressions.empty(), "{} is empty: give none, fp16 or bf16",
                 names.name("grad_compression"));
  SS_CHECK_INPUT(o.train.until_accuracy == 0.0 || o.train.until_loss == 0.0,
                 "give {} or {}, not both", names.name("until_accuracy"), names.name("until_loss"));
  SS_CHECK_INPUT(!o.train.has_target() || o.max_epochs > 0,
                 "{} needs {}: the most epochs each run may train before it counts as not reached",
                 names.name(o.train.until_accuracy > 0.0 ? "until_accuracy" : "until_loss"),
                 names.name("max_epochs"));
  const DeviceAxis axis = resolve_devices(o, names);
  for (const std::string& name : o.precisions) (void)run_precision(name, axis.kind, names);
  if (backend(axis.kind).logical()) {
    const int cores = backend(DeviceKind::kCpu).device_count();
    const int threads = cpu_threads_per_device(o, axis);
    const int most = devices_sharing_cores(o, axis);
    const int64_t need = compute_threads(most, threads);
    SS_CHECK_INPUT(need <= kMaxCpuThreads,
                   "{}: {} {} devices × {} threads need {} threads; one process may use at most {}",
                   names.subject("threads", threads), most, to_string(axis.kind), threads, need,
                   kMaxCpuThreads);
    SS_CHECK_INPUT(
        o.oversubscribe || !oversubscribed(most, threads, cores),
        "{}: {} {} devices × {} thread{} need {} cores; this process may use {} (ask for fewer "
        "devices or threads, or {} to share cores, which makes the scaling figures "
        "meaningless)",
        names.subject("devices", o.devices.empty() ? to_string(axis) : o.devices), most,
        to_string(axis.kind), threads, threads == 1 ? "" : "s", need, cores,
        names.name("oversubscribe"));
  }
  const int64_t accumulation = o.train.accumulation;
  for (int64_t g : o.global_batches) {
    for (int n : axis.counts) {
      const int64_t parts = static_cast<int64_t>(n) * accumulation;
      SS_CHECK_INPUT(
          g % parts == 0, "{} does not split evenly over {} devices{}: use multiples of {}",
          names.subject("global_batch", g), n,
          accumulation > 1 ? fmt::format(" × {} accumulated micro-batches", accumulation) : "",
          parts);
    }
  }
  // The data, opened once per model: a missing file or a model that cannot train on it is
  // refused now, not at every point.
  for (const std::string& m : o.models)
    (void)open_run_data(o.train.data, make_model(m), o.train.seed);
  // The training options of every point, checked as the trainer will.
  if (axis.kind == DeviceKind::kCuda) return;  // the trainer names what GPUs lack per point
  for (const SweepPoint& p : sweep_grid(o, axis)) validate(train_options_for(o, p), names);
}

SweepReport run_sweep(const SweepOptions& o, const Environment& environment,
                      const SweepProgress& progress, const SweepReport* resume) {
  validate(o);
  const DeviceAxis axis = resolve_devices(o);
  std::vector<SweepPoint> points = sweep_grid(o, axis);
  SweepReport report;
  if (resume != nullptr) {
    report.tool_version = resume->tool_version;
    report.created = resume->created;
    report.environment = resume->environment;
  } else {
    report.created = environment.captured_at;  // captured as the sweep starts
    report.environment = environment;
  }
  report.tool_version = environment.build.scalescope_version;
  if (axis.kind == DeviceKind::kSim) report.environment.simulated_devices = kSimulatedDevicesNote;
  report.config = sweep_config_json(o);
  if (Cluster* cluster = cluster_of(o)) {
    // Every process's machine: the nodes of a cluster need not be alike.
    ClusterInfo c;
    c.processes = cluster->size();
    c.nodes = cluster->node_count();
    c.replicas_per_process = replicas_per_process(o, axis);
    c.members = cluster->members();
    const std::vector<std::string> all = cluster->exchange(
        dump_json(to_json(environment)), std::chrono::milliseconds(o.train.collective_timeout_ms),
        "gathering the processes' environments");
    for (size_t r = 0; r < all.size(); ++r) {
      c.environments.push_back(environment_from_json(nlohmann::json::parse(all[r])));
    }
    report.cluster = std::move(c);
  }
  std::map<std::string, const SweepPoint*> finished;
  if (resume != nullptr) {
    for (const SweepPoint& p : resume->points) finished[p.key()] = &p;
  }
  // Finished points outside this grid (flags narrowed it) stay in the report: results
  // already written are never dropped.
  std::set<std::string> grid_keys;
  for (const SweepPoint& p : points) grid_keys.insert(p.key());
  if (resume != nullptr) {
    for (const SweepPoint& p : resume->points) {
      if (!grid_keys.contains(p.key())) report.points.push_back(p);
    }
  }
  int total = 0;
  for (const SweepPoint& p : points) total += finished.contains(p.key()) ? 0 : o.repeats;
  int done = 0;
  size_t grid_done = 0;
  const auto start = std::chrono::steady_clock::now();
  for (SweepPoint& p : points) {
    ++grid_done;
    if (auto it = finished.find(p.key()); it != finished.end()) {
      report.points.push_back(*it->second);
      continue;
    }
    std::string fatal;  // why the sweep cannot go on (a process was lost)
    throw_if_stopped(o, report);
    run_point(o, p, progress, done, total, start, fatal);
    throw_if_stopped(o, report);  // the interrupted point is not a finished one, nor a failed one
    report.points.push_back(std::move(p));
    analyze(report);
    report.complete = grid_done == points.size() && fatal.empty();
    if (writes_files(o)) write_sweep_report(o.output, report);
    if (progress.on_point_done) progress.on_point_done(report.points.back());
    if (!fatal.empty()) {
      throw Error(
          kClusterLibrary, "run_sweep",
          fmt::format(
              "{}; the sweep stopped{}", fatal,
              writes_files(o) ? fmt::format(" (its finished points are in {})", o.output) : ""));
    }
  }
  analyze(report);
  report.complete = true;
  if (writes_files(o)) write_sweep_report(o.output, report);
  return report;
}

}  // namespace scalescope
