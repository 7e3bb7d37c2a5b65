#include "harness/sweep/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <new>
#include <set>

#include "core/backend.h"
#include "core/check.h"
#include "core/log.h"
#include "harness/collectives/cluster.h"
#include "harness/trainer/data.h"
#include "models/zoo.h"
#include "reports/json_reader.h"
#include "reports/trace.h"

namespace scalescope {
namespace {

std::vector<int> parse_counts(std::string_view text, std::string_view whole) {
  std::vector<int> counts;
  for (int64_t v :
       parse_positive_list(text, 1024, fmt::format("--devices {}", whole),
                           "a device count from 1 to 1024", "1,2,4 or cpu:1,2 or cuda:1,2,4,8")) {
    counts.push_back(static_cast<int>(v));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

Cluster* cluster_of(const SweepOptions& o) {
  return o.train.cluster != nullptr && o.train.cluster->multi_process() ? o.train.cluster : nullptr;
}

// Rank 0 alone writes the report and the traces (every process holds the same results).
bool writes_files(const SweepOptions& o) {
  return cluster_of(o) == nullptr || cluster_of(o)->rank() == 0;
}

// Replicas each process hosts: the largest count spread over all processes.
int replicas_per_process(const SweepOptions& o, const DeviceAxis& axis) {
  const Cluster* cluster = cluster_of(o);
  const int most = axis.counts.back();
  if (cluster == nullptr) return most;
  SS_CHECK(most % cluster->size() == 0,
           "--devices {}: the largest count, {}, does not spread evenly over the {} processes of "
           "this launch (each process hosts the same number of devices)",
           o.devices, most, cluster->size());
  return most / cluster->size();
}

// Devices that share one node's cores (or GPUs) at the sweep's largest point.
int devices_per_node(const SweepOptions& o, const DeviceAxis& axis) {
  const Cluster* cluster = cluster_of(o);
  if (cluster == nullptr) return axis.counts.back();
  return replicas_per_process(o, axis) * cluster->local_size();
}

int cpu_threads_per_device(const SweepOptions& o, const DeviceAxis& axis) {
  if (o.threads > 0) return o.threads;
  const int cores = backend(DeviceKind::kCpu).device_count();
  return std::max(1, cores / devices_per_node(o, axis));
}

std::string device_spec_for(DeviceKind kind, int count) {
  if (kind == DeviceKind::kCpu) return fmt::format("cpu:{}", count);
  std::vector<int> ids(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) ids[static_cast<size_t>(i)] = i;
  return fmt::format("cuda:{}", fmt::join(ids, ","));
}

// The grid, in run order: per model and batch, ascending device counts (the one-device
// baseline first, so speedups are known as soon as possible).
std::vector<SweepPoint> grid(const SweepOptions& o, const DeviceAxis& axis) {
  std::vector<SweepPoint> points;
  const int threads = axis.kind == DeviceKind::kCpu ? cpu_threads_per_device(o, axis) : 0;
  for (const std::string& model : o.models) {
    for (int64_t batch : o.batches) {
      for (int n : axis.counts) {
        SweepPoint p;
        p.model = model;
        p.device_kind = axis.kind == DeviceKind::kCpu ? "cpu" : "cuda";
        p.devices = n;
        p.device_spec = device_spec_for(axis.kind, n);
        p.threads_per_device = threads;
        p.mode = o.mode;
        const int64_t parts = static_cast<int64_t>(n) * o.train.accumulation;
        p.batch = o.mode == ScalingMode::kWeak ? batch : batch / parts;
        p.global_batch = o.mode == ScalingMode::kWeak ? batch * parts : batch;
        points.push_back(std::move(p));
      }
    }
  }
  return points;
}

TrainOptions train_options_for(const SweepOptions& o, const SweepPoint& p) {
  TrainOptions t = o.train;
  t.model = p.model;
  t.devices = p.device_spec;
  t.threads = p.threads_per_device;
  t.batch = p.batch;
  t.global_batch = 0;
  t.steps = o.steps;
  t.epochs = 0;
  t.eval = false;
  t.save.clear();
  t.load.clear();
  t.adaptive_warmup.enabled = true;
  t.adaptive_warmup.max_steps = o.max_warmup_steps;
  t.adaptive_warmup.steady = o.steady;
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
    p.error = e.what();
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

std::vector<int64_t> int64_list(const JsonReader& r, std::string_view key) {
  if (r.at(key).is_number_integer()) return {r.int64(key)};
  return r.int64s(key);
}

}  // namespace

std::vector<int64_t> parse_positive_list(std::string_view text, int64_t max,
                                         const std::string& flag, const std::string& what,
                                         const std::string& accepted) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item(text.substr(start, end - start));
    char* rest = nullptr;
    const long long v = std::strtoll(item.c_str(), &rest, 10);
    SS_CHECK(!item.empty() && *rest == '\0' && v >= 1 && v <= max,
             "{}: '{}' is not {} (accepted: {})", flag, item, what, accepted);
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

std::pair<int64_t, int64_t> parse_profile_steps(const std::string& text) {
  const size_t colon = text.find(':');
  int64_t first = 0;
  int64_t last = 0;
  const bool ok = colon != std::string::npos &&
                  std::sscanf(text.c_str(), "%" SCNd64, &first) == 1 &&
                  std::sscanf(text.c_str() + colon + 1, "%" SCNd64, &last) == 1 &&
                  text.find_first_not_of("0123456789:") == std::string::npos;
  SS_CHECK(ok && first >= 1 && last >= first,
           "--profile-steps {}: give FIRST:LAST measured steps, 1 <= FIRST <= LAST (e.g. 3:7)",
           text);
  return {first, last};
}

std::string point_file_name(const SweepPoint& p) {
  std::string model = p.model;
  for (char& c : model) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '.') c = '_';
  }
  return fmt::format("{}_{}{}_{}{}", model, p.device_kind, p.devices,
                     p.mode == ScalingMode::kWeak ? "b" : "gb",
                     p.mode == ScalingMode::kWeak ? p.batch : p.global_batch);
}

// "cifar-cnn,cnn:width=1,2,4" → cifar-cnn, cnn:width=1, cnn:width=2, cnn:width=4. A token
// with ':' starts a model; "key=value" adds a key to the one before; a bare value repeats
// the one before with its last key set to that value.
std::vector<std::string> split_model_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    SS_CHECK(!item.empty(), "--models {}: an empty model name", text);
    const bool is_value = item.find(':') == std::string::npos &&
                          item.find_first_not_of("0123456789.") == std::string::npos;
    if (!out.empty() && item.find(':') == std::string::npos &&
        item.find('=') != std::string::npos) {
      out.back() += "," + item;
    } else if (!out.empty() && is_value && out.back().find('=') != std::string::npos) {
      const std::string& last = out.back();
      out.push_back(last.substr(0, last.rfind('=') + 1) + item);
    } else {
      out.push_back(item);
    }
    start = end + 1;
  }
  return out;
}

void apply_sweep_config(const nlohmann::json& config, SweepOptions& o, const std::string& what) {
  const JsonReader r(config, what);
  // The known keys are those the report records (one source of truth for both).
  std::set<std::string, std::less<>> known = {"batch", "global_batch"};
  const SweepOptions default_options;
  const nlohmann::json defaults = sweep_config_json(default_options);
  for (auto it = defaults.begin(); it != defaults.end(); ++it) known.insert(it.key());
  r.only(known);
  if (r.has("models")) {
    o.models = r.at("models").is_string() ? std::vector<std::string>{r.string("models")}
                                          : r.strings("models");
  }
  if (r.has("devices")) {
    o.devices = r.at("devices").is_string()
                    ? r.string("devices")
                    : fmt::format("{}", fmt::join(int64_list(r, "devices"), ","));
  }
  SS_CHECK(!(r.has("batch") && r.has("global_batch")),
           "{}: give 'batch' (weak scaling) or 'global_batch' (strong scaling), not both", what);
  if (r.has("batch")) {
    o.mode = ScalingMode::kWeak;
    o.batches = int64_list(r, "batch");
  }
  if (r.has("global_batch")) {
    o.mode = ScalingMode::kStrong;
    o.batches = int64_list(r, "global_batch");
  }
  if (r.has("threads")) o.threads = r.int32("threads");
  if (r.has("oversubscribe")) o.oversubscribe = r.boolean("oversubscribe");
  if (r.has("repeats")) o.repeats = r.int32("repeats");
  if (r.has("steps")) o.steps = r.int64("steps");
  if (r.has("max_warmup_steps")) o.max_warmup_steps = r.int64("max_warmup_steps");
  if (r.has("steady_window")) o.steady.window = r.int32("steady_window");
  if (r.has("steady_tolerance")) o.steady.tolerance = r.number("steady_tolerance");
  TrainOptions& t = o.train;
  if (r.has("optimizer")) {
    const std::string name = r.string("optimizer");
    SS_CHECK(name == "sgd" || name == "adam", "{}: optimizer '{}' is not sgd or adam", what, name);
    t.optimizer.kind = name == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdam;
  }
  if (r.has("lr")) t.optimizer.lr = static_cast<float>(r.number("lr"));
  if (r.has("momentum")) t.optimizer.momentum = static_cast<float>(r.number("momentum"));
  if (r.has("weight_decay"))
    t.optimizer.weight_decay = static_cast<float>(r.number("weight_decay"));
  if (r.has("lr_scaling")) t.lr_scaling = parse_lr_scaling(r.string("lr_scaling"));
  if (r.has("lr_warmup_steps")) t.lr_warmup_steps = r.int64("lr_warmup_steps");
  if (r.has("accumulate")) t.accumulation = r.int32("accumulate");
  if (r.has("bucket_cap_mb")) t.bucket_cap_mb = r.number("bucket_cap_mb");
  if (r.has("first_bucket_mb")) t.first_bucket_mb = r.number("first_bucket_mb");
  if (r.has("overlap")) t.overlap = r.boolean("overlap");
  if (r.has("tf32")) t.tf32 = r.boolean("tf32");
  if (r.has("seed")) t.seed = static_cast<uint64_t>(r.int64("seed"));
  if (r.has("data")) t.data.spec = r.string("data");
  if (r.has("workers")) t.data.workers = r.int32("workers");
  if (r.has("queue_depth")) t.data.queue_depth = r.int32("queue_depth");
  if (r.has("collective_timeout_ms")) t.collective_timeout_ms = r.int64("collective_timeout_ms");
  if (r.has("output")) o.output = r.string("output");
  if (r.has("memory_limit_mb")) t.memory_limit_mb = r.number("memory_limit_mb");
  if (r.has("normalize")) t.data.normalize = r.boolean("normalize");
  if (r.has("crop_padding")) t.data.crop_padding = r.int32("crop_padding");
  if (r.has("flip")) t.data.flip = r.boolean("flip");
  if (r.has("decode_cost_us")) t.data.decode_cost_us = r.int64("decode_cost_us");
}

nlohmann::json sweep_config_json(const SweepOptions& o) {
  const TrainOptions& t = o.train;
  nlohmann::json j = {
      {"models", o.models},
      {"devices", o.devices},
      {"threads", o.threads},
      {"oversubscribe", o.oversubscribe},
      {"repeats", o.repeats},
      {"steps", o.steps},
      {"max_warmup_steps", o.max_warmup_steps},
      {"steady_window", o.steady.window},
      {"steady_tolerance", o.steady.tolerance},
      {"optimizer", to_string(t.optimizer.kind)},
      {"lr", t.optimizer.lr},
      {"momentum", t.optimizer.momentum},
      {"weight_decay", t.optimizer.weight_decay},
      {"lr_scaling", to_string(t.lr_scaling)},
      {"lr_warmup_steps", t.lr_warmup_steps},
      {"accumulate", t.accumulation},
      {"bucket_cap_mb", t.bucket_cap_mb},
      {"first_bucket_mb", t.first_bucket_mb},
      {"overlap", t.overlap},
      {"tf32", t.tf32},
      {"seed", t.seed},
      {"data", t.data.spec},
      {"workers", t.data.workers},
      {"queue_depth", t.data.queue_depth},
      {"collective_timeout_ms", t.collective_timeout_ms},
      {"memory_limit_mb", t.memory_limit_mb},
      {"normalize", t.data.normalize},
      {"crop_padding", t.data.crop_padding},
      {"flip", t.data.flip},
      {"decode_cost_us", t.data.decode_cost_us},
      {"output", o.output},
  };
  j[o.mode == ScalingMode::kWeak ? "batch" : "global_batch"] = o.batches;
  return j;
}

DeviceAxis resolve_devices(const SweepOptions& o) {
  DeviceAxis axis;
  std::string_view text = o.devices;
  const int cpu_cores = backend(DeviceKind::kCpu).device_count();
  if (text.empty()) {
    axis.counts = cpu_cores >= 2 ? std::vector<int>{1, 2} : std::vector<int>{1};
    return axis;
  }
  if (text.starts_with("cpu:")) {
    text.remove_prefix(4);
  } else if (text.starts_with("cuda:")) {
    text.remove_prefix(5);
    axis.kind = DeviceKind::kCuda;
  } else {
    // Bare counts: GPUs where there are any.
    bool gpus = false;
    for (Backend* b : backends())
      gpus = gpus || (b->kind() == DeviceKind::kCuda && b->device_count() > 0);
    axis.kind = gpus ? DeviceKind::kCuda : DeviceKind::kCpu;
  }
  axis.counts = parse_counts(text, o.devices);
  if (axis.kind == DeviceKind::kCuda) {
    const Backend& b = backend(DeviceKind::kCuda);
    const int here = devices_per_node(o, axis);
    SS_CHECK(here <= b.device_count(), "--devices {}: {} GPUs asked for{}, this machine has {}{}",
             o.devices, here, cluster_of(o) != nullptr ? " on this node" : "", b.device_count(),
             b.device_count() == 0 ? fmt::format(" ({})", b.unavailable_reason()) : "");
  }
  return axis;
}

void validate(const SweepOptions& o) {
  SS_CHECK(!o.models.empty(),
           "--models is empty: give at least one model (see `scalescope models`)");
  for (const std::string& m : o.models) (void)make_model(m);
  SS_CHECK(!o.batches.empty(), "--batch is empty: give at least one batch size");
  for (int64_t b : o.batches) {
    SS_CHECK(b >= 1, "{} {} must be a positive number of samples",
             o.mode == ScalingMode::kWeak ? "--batch" : "--global-batch", b);
  }
  SS_CHECK(o.repeats >= 1 && o.repeats <= 1000, "--repeats {} must be from 1 to 1000", o.repeats);
  SS_CHECK(o.steps >= 2, "--steps {} must be at least 2 measured steps per repeat", o.steps);
  SS_CHECK(o.max_warmup_steps >= 1, "--max-warmup-steps {} must be at least 1", o.max_warmup_steps);
  SS_CHECK(o.steady.window >= 1 && o.steady.window <= 1000,
           "--steady-window {} must be from 1 to 1000 steps", o.steady.window);
  SS_CHECK(
      std::isfinite(o.steady.tolerance) && o.steady.tolerance > 0.0 && o.steady.tolerance < 1.0,
      "--steady-tolerance {} must be a fraction between 0 and 1", o.steady.tolerance);
  SS_CHECK(o.threads >= 0, "--threads {} must be 0 (automatic) or positive", o.threads);
  SS_CHECK(!o.output.empty(), "-o/--output must name a file");
  const DeviceAxis axis = resolve_devices(o);
  if (axis.kind == DeviceKind::kCpu) {
    const int cores = backend(DeviceKind::kCpu).device_count();
    const int threads = cpu_threads_per_device(o, axis);
    const int most = devices_per_node(o, axis);
    SS_CHECK(o.oversubscribe || most * threads <= cores,
             "--devices {}: {} CPU devices × {} thread{} need {} cores; this node may use {} "
             "(ask for fewer devices or threads, or --oversubscribe to share cores, which makes "
             "the scaling figures meaningless)",
             o.devices.empty() ? "cpu:1,2" : o.devices, most, threads, threads == 1 ? "" : "s",
             most * threads, cores);
  }
  if (o.mode == ScalingMode::kStrong) {
    for (int64_t g : o.batches) {
      for (int n : axis.counts) {
        const int64_t parts = static_cast<int64_t>(n) * o.train.accumulation;
        SS_CHECK(g % parts == 0,
                 "--global-batch {} does not split evenly over {} devices{}: use multiples of {}",
                 g, n,
                 o.train.accumulation > 1
                     ? fmt::format(" × {} accumulated micro-batches", o.train.accumulation)
                     : "",
                 parts);
      }
    }
  }
  // The data, opened once per model: a missing file or a model that cannot train on it is
  // refused now, not at every point.
  for (const std::string& m : o.models)
    (void)open_run_data(o.train.data, make_model(m), o.train.seed);
  // The training options of every point, checked as the trainer will.
  for (const SweepPoint& p : grid(o, axis)) {
    TrainOptions t = train_options_for(o, p);
    if (axis.kind == DeviceKind::kCuda) continue;  // the trainer names what GPUs lack per point
    validate(t);
  }
}

SweepReport run_sweep(const SweepOptions& o, const Environment& environment,
                      const SweepProgress& progress, const SweepReport* resume) {
  validate(o);
  const DeviceAxis axis = resolve_devices(o);
  std::vector<SweepPoint> points = grid(o, axis);
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
  report.config = sweep_config_json(o);
  if (Cluster* cluster = cluster_of(o)) {
    // Every process's machine: the nodes of a cluster need not be alike.
    ClusterInfo c;
    c.processes = cluster->size();
    c.nodes = cluster->node_count();
    c.replicas_per_process = replicas_per_process(o, axis);
    c.members = cluster->members();
    const std::vector<std::string> all = cluster->exchange(
        to_json(environment).dump(), std::chrono::milliseconds(o.train.collective_timeout_ms),
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
    run_point(o, p, progress, done, total, start, fatal);
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
