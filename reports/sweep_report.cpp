#include "reports/sweep_report.h"
#include "reports/analysis/sweep_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/fs.h"
#include "reports/json_reader.h"

namespace scalescope {

using nlohmann::json;

namespace {

constexpr auto kScalingModeNames = enum_names<ScalingMode>("weak", "strong");

}  // namespace

std::string to_string(ScalingMode mode) {
  return std::string(kScalingModeNames(mode));
}

ScalingMode parse_scaling_mode(const std::string& text) {
  const std::optional<ScalingMode> mode = kScalingModeNames.parse(text);
  SS_CHECK(mode.has_value(), "scaling mode '{}' is not {}", text, kScalingModeNames.accepted());
  return *mode;
}

std::string SweepPoint::key() const {
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}", model, device_kind, devices, to_string(mode),
                                batch, global_batch);
  if (devices > 1) key += fmt::format("|{}|{}", bucket_cap_mb, first_bucket_mb);
  // Uncompressed points keep the keys of reports written before compression existed.
  if (devices > 1 && compressed()) key += fmt::format("|{}", to_string(grad_compression));
  // Points of the devices' default precision keep the keys of reports written before it.
  if (!precision_default) key += fmt::format("|precision {}", to_string(precision));
  return key;
}

namespace {

json interval_json(const Interval& i) {
  return {{"value", i.value}, {"low", i.low}, {"high", i.high}};
}

json phases_json(const PhaseMedians& m, double step_ms) {
  json j = json::object();
  const auto add = [&](const std::string& key, double v) {
    j[key] = {{"median_ms", v}, {"share", step_ms > 0.0 ? v / step_ms : 0.0}};
  };
  for (const PhaseDef& d : kPhases) add(d.json_key(), m[d.phase]);
  add("step_ms", m.step_ms);
  return j;
}

json statistics_json(const StatisticalScaling& s, const Interval& speedup) {
  return {{"baseline_batch", s.small},
          {"steps_saved", s.steps_saved},
          {"efficiency", s.efficiency},
          {"time_to_accuracy_speedup", speedup.value * s.efficiency}};
}

json summary_json(const SweepPoint& p) {
  const PointSummary& s = p.summary;
  json replicas = json::array();
  for (const PhaseMedians& r : s.replicas) replicas.push_back(phases_json(r, r.step_ms));
  json findings = json::array();
  for (const Finding& f : s.verdict.findings) {
    findings.push_back({{"kind", f.kind},
                        {"severity", f.severity},
                        {"explanation", f.explanation},
                        {"share", f.share},
                        {"numbers", f.numbers}});
  }
  json j = {
      {"measured_steps", s.measured_steps},
      {"throughput", interval_json(s.throughput)},
      {"step_ms",
       {{"median", s.step_ms_median},
        {"p10", s.step_ms_p10},
        {"p90", s.step_ms_p90},
        {"cv", s.step_ms_cv}}},
      {"phases", phases_json(s.group, s.group.step_ms)},
      {"replicas", std::move(replicas)},
      {"speedup", s.speedup ? interval_json(*s.speedup) : json(nullptr)},
      {"efficiency", s.efficiency ? interval_json(*s.efficiency) : json(nullptr)},
      {"bottleneck", s.verdict.top().kind},
      {"verdict", std::move(findings)},
      {"bus_bandwidth_gbps", s.bus_bandwidth_gbps ? json(*s.bus_bandwidth_gbps) : json(nullptr)},
      {"noise_scale", s.noise ? to_json(*s.noise) : json(nullptr)},
      {"statistical_scaling",
       s.statistics ? statistics_json(*s.statistics, *s.speedup) : json(nullptr)},
      {"time_to_target", s.time_to_target ? to_json(*s.time_to_target) : json(nullptr)},
      // Device utilisation comes from NVML samples, which only GPU runs have.
      {"utilization",
       s.gpu_util_percent ? json{{"gpu_util_percent", *s.gpu_util_percent}} : json(nullptr)},
  };
  if (s.loss) {
    j["efficiency_loss"] = {{"efficiency", s.loss->efficiency}, {"lost", s.loss->lost}};
    const std::array<LossComponent, kLossCauseCount> components = loss_components(*s.loss);
    for (const LossComponent& c : components) j["efficiency_loss"][c.def->key] = c.share;
    if (s.loss->intervals) {
      json intervals = json::object();
      json beyond = json::array();
      for (const LossComponent& c : components) {
        intervals[c.def->key] = {{"low", c.interval->low}, {"high", c.interval->high}};
        if (c.beyond_noise()) beyond.push_back(c.def->key);
      }
      j["efficiency_loss"]["intervals"] = std::move(intervals);
      j["efficiency_loss"]["beyond_noise"] = std::move(beyond);
    }
    if (s.intra_node_fraction) {
      // The all-reduce share, split by what the node-local all-reduce of the same bytes
      // took against the global one.
      const double allreduce = s.loss->share(LossCause::kAllReduce);
      j["efficiency_loss"]["allreduce_intra_node"] = allreduce * *s.intra_node_fraction;
      j["efficiency_loss"]["allreduce_inter_node"] = allreduce * (1.0 - *s.intra_node_fraction);
    }
  } else {
    j["efficiency_loss"] = nullptr;
  }
  return j;
}

// --noise-scale: each replica's "grad_sq_local" column joins its columns; the averaged
// gradient's norms per step are returned. Nothing when the steps have no norms.
std::optional<json> grad_norms_json(const std::vector<StepRecord>& steps, json& per_replica) {
  if (steps.empty() || !steps.front().grad_norms) return std::nullopt;
  json global = json::array();
  for (const StepRecord& s : steps) {
    global.push_back(s.grad_norms->global);
    for (size_t k = 0; k < per_replica.size(); ++k) {
      per_replica[k]["grad_sq_local"].push_back(s.grad_norms->local[k]);
    }
  }
  return global;
}

json repeat_json(const RepeatRecord& r, size_t buckets) {
  json step = json::array();
  json loss = json::array();
  json step_ms = json::array();
  json lr = json::array();
  const size_t replicas = r.steps.empty() ? 0 : r.steps.front().replicas.size();
  json per_replica = json::array();
  for (size_t k = 0; k < replicas; ++k) {
    // Columns of the named records: one array per key, a value per step.
    json columns = json::object();
    for (const StepRecord& s : r.steps) {
      const json record = to_json(s.replicas[k], false);
      for (const auto& [key, value] : record.items()) columns[key].push_back(value);
    }
    per_replica.push_back(std::move(columns));
  }
  json bucket_ms = json::array();
  for (size_t b = 0; b < buckets; ++b) {
    json v = json::array();
    for (const StepRecord& s : r.steps) v.push_back(b < s.bucket_ms.size() ? s.bucket_ms[b] : 0.0);
    bucket_ms.push_back(std::move(v));
  }
  for (const StepRecord& s : r.steps) {
    step.push_back(s.step);
    loss.push_back(s.loss);
    step_ms.push_back(s.step_ms);
    lr.push_back(s.lr);
  }
  const std::optional<json> global = grad_norms_json(r.steps, per_replica);
  json out = {{"warmup_steps", r.warmup_steps},
              {"warmup_settled", r.warmup_settled},
              {"first_loss", r.first_loss},
              {"last_loss", r.last_loss},
              {"step", std::move(step)},
              {"loss", std::move(loss)},
              {"lr", std::move(lr)},
              {"step_ms", std::move(step_ms)},
              {"replicas", std::move(per_replica)},
              {"bucket_ms", std::move(bucket_ms)}};
  if (r.allreduce_split) out["allreduce_split"] = to_json(*r.allreduce_split);
  if (r.gpu_util_percent) out["gpu_util_percent"] = *r.gpu_util_percent;
  if (global) out["grad_sq_global"] = *global;
  if (r.target) out["target"] = to_json(*r.target);
  if (r.loss_scaling) out["loss_scaling"] = write_fields(*r.loss_scaling);
  return out;
}

json point_json(const SweepPoint& p) {
  json repeats = json::array();
  for (const RepeatRecord& r : p.repeats) repeats.push_back(repeat_json(r, p.bucket_bytes.size()));
  json j = {{"model", p.model},
            {"params", p.params},
            {"forward_flops_per_sample", p.forward_flops_per_sample},
            {"device_kind", p.device_kind},
            {"devices", p.devices},
            {"device_spec", p.device_spec},
            {"threads_per_device", p.threads_per_device},
            {"mode", to_string(p.mode)},
            {"batch", p.batch},
            {"global_batch", p.global_batch},
            {"status", p.status},
            {"error", p.error},
            {"bucket_cap_mb", p.bucket_cap_mb},
            {"first_bucket_mb", p.first_bucket_mb},
            {"grad_compression", to_string(p.grad_compression)},
            {"precision", to_string(p.precision)},
            {"precision_default", p.precision_default},
            {"bucket_bytes", p.bucket_bytes},
            {"allreduce_bytes_per_step", allreduce_bytes(p.bucket_bytes)},
            {"peak_memory_bytes", p.peak_memory_bytes},
            {"nondeterministic_fallbacks", p.nondeterministic_fallbacks},
            {"trace", p.trace},
            {"profile", p.profile},
            {"repeats", std::move(repeats)},
            {"summary", p.ok() && !p.repeats.empty() ? summary_json(p) : json(nullptr)}};
  // Not recorded (-1) in a point read from a sweep before 1.14: left out, as it was.
  if (p.communication_threads_per_device >= 0) {
    j["communication_threads_per_device"] = p.communication_threads_per_device;
  }
  if (!p.layer_profile.empty()) j["layer_profile"] = json_fields::value_json(p.layer_profile);
  return j;
}

json communication_json(const CommunicationAnalysis& c) {
  json series = json::array();
  for (const CommunicationAnalysis::Series& s : c.series) {
    json projections = json::array();
    for (const Projection& p : s.projections) {
      projections.push_back({{"devices", p.devices},
                             {"allreduce_ms", p.allreduce_ms},
                             {"exposed_ms", p.exposed_ms},
                             {"step_ms", p.step_ms},
                             {"efficiency", p.efficiency},
                             {"projection", true}});
    }
    series.push_back({{"batch", s.batch},
                      {"precision", to_string(s.precision)},
                      {"measured_devices", s.measured_devices},
                      {"projections", std::move(projections)}});
  }
  json fit = nullptr;
  if (c.fit) {
    fit = {{"alpha_ms", c.fit->alpha_ms},   {"beta_ms_per_byte", c.fit->beta_ms_per_byte},
           {"r_squared", c.fit->r_squared}, {"bus_bandwidth_gbps", c.fit->bus_bandwidth_gbps},
           {"samples", c.fit->samples},     {"model", "ms = alpha + beta * bytes * 2(N-1)/N"},
           {"reliable", c.reliable},        {"min_r_squared", kMinProjectionRSquared}};
  }
  return {{"model", c.model},
          {"fit", std::move(fit)},
          {"fit_error", c.fit_error},
          {"across_nodes", c.across_nodes},
          {"projection_note", c.projection_note},
          {"series", std::move(series)}};
}

json group_json(const PointGroup& g) {
  return {{"model", g.model},     {"device_kind", g.device_kind},
          {"devices", g.devices}, {"mode", to_string(g.mode)},
          {"batch", g.batch},     {"precision", to_string(g.precision)}};
}

json bucket_choice_json(const BucketChoice& c) {
  json settings = json::array();
  for (const BucketChoice::Setting& s : c.settings) {
    settings.push_back({{"bucket_cap_mb", s.cap_mb},
                        {"first_bucket_mb", s.first_mb},
                        {"throughput", s.throughput},
                        {"allreduce_ms", s.allreduce_ms},
                        {"exposed_allreduce_ms", s.exposed_ms}});
  }
  const BucketChoice::Setting& best = c.settings[c.best];
  const BucketChoice::Setting& reference = c.settings[c.reference];
  json j = group_json(c);
  j.update({{"grad_compression", to_string(c.compression)},
            {"settings", std::move(settings)},
            {"best", {{"bucket_cap_mb", best.cap_mb}, {"first_bucket_mb", best.first_mb}}},
            {"reference",
             {{"bucket_cap_mb", reference.cap_mb},
              {"first_bucket_mb", reference.first_mb},
              {"is_default", c.reference_is_default}}},
            {"gain", interval_json(c.gain)},
            {"better", c.better()}});
  return j;
}

json compression_effect_json(const CompressionEffect& e) {
  json settings = json::array();
  for (const CompressionEffect::Setting& s : e.settings) {
    settings.push_back({{"grad_compression", to_string(s.compression)},
                        {"allreduce_bytes_per_step", s.bytes_per_step},
                        {"throughput", s.throughput},
                        {"step_ms", s.step_ms},
                        {"allreduce_ms", s.allreduce_ms},
                        {"exposed_allreduce_ms", s.exposed_ms},
                        {"grad_cast_ms", s.cast_ms},
                        {"efficiency", s.efficiency ? interval_json(*s.efficiency) : json(nullptr)},
                        {"step_ms_saved", s.saved_ms},
                        {"gain", s.gain ? interval_json(*s.gain) : json(nullptr)},
                        {"faster", s.faster()}});
  }
  json j = group_json(e);
  j.update({{"bucket_cap_mb", e.cap_mb},
            {"first_bucket_mb", e.first_mb},
            {"settings", std::move(settings)}});
  return j;
}

// The group's record of each step: number, loss, learning rate and step time.
std::vector<StepRecord> steps_from_json(const JsonReader& r) {
  const std::vector<int64_t> step = r.int64s("step");
  const std::vector<double> loss = r.numbers("loss");
  const std::vector<double> lr = r.numbers("lr");
  const std::vector<double> step_ms = r.numbers("step_ms");
  const size_t n = step.size();
  SS_CHECK(loss.size() == n && lr.size() == n && step_ms.size() == n,
           "{}: 'step', 'loss', 'lr' and 'step_ms' must be equally long", r.name(""));
  std::vector<StepRecord> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].step = step[i];
    out[i].loss = loss[i];
    out[i].lr = lr[i];
    out[i].step_ms = step_ms[i];
  }
  return out;
}

// Replica k's columns: an array per key of its named record (to_json(PhaseTimes)), a value
// per step.
void replica_from_json(const JsonReader& columns, size_t k, std::vector<StepRecord>& steps) {
  const size_t n = steps.size();
  const auto read = [&](const std::string& key, const auto& set) {
    const std::vector<double> v = columns.numbers(key);
    SS_CHECK(v.size() == n, "{}: {} values for {} steps", columns.name(key), v.size(), n);
    for (size_t i = 0; i < n; ++i) set(steps[i].replicas[k], v[i]);
  };
  for (const PhaseDef& d : kPhases) {
    const std::optional<Phase> same = absent_means_same_as(d.phase);
    if (!columns.has(d.json_key()) && (absent_means_zero(d.phase) || same)) {
      if (same) {
        for (StepRecord& s : steps) s.replicas[k][d.phase] = s.replicas[k][*same];
      }
      continue;
    }
    read(d.json_key(), [&d](PhaseTimes& p, double v) { p[d.phase] = v; });
  }
  read("step_ms", [](PhaseTimes& p, double v) { p.step_ms = v; });
  if (columns.has("start_ms")) {  // added in 1.0's lifetime: optional when reading
    read("start_ms", [](PhaseTimes& p, double v) { p.start_ms = v; });
  }
}

// Replica 0's time of each bucket (a row per bucket, a value per step) into the steps.
void bucket_ms_from_json(const JsonReader& r, size_t buckets, std::vector<StepRecord>& steps) {
  const size_t n = steps.size();
  const json& bucket_ms = r.array("bucket_ms");
  SS_CHECK(bucket_ms.size() == buckets, "{}: {} buckets, but bucket_bytes has {}",
           r.name("bucket_ms"), bucket_ms.size(), buckets);
  for (size_t b = 0; b < buckets; ++b) {
    SS_CHECK(bucket_ms[b].is_array() && bucket_ms[b].size() == n,
             "{}[{}] must hold one time per step", r.name("bucket_ms"), b);
    for (size_t i = 0; i < n; ++i) {
      SS_CHECK(bucket_ms[b][i].is_number(), "{}[{}][{}] must be a number", r.name("bucket_ms"), b,
               i);
      steps[i].bucket_ms.push_back(bucket_ms[b][i].get<double>());
    }
  }
}

// The squared gradient norms of --noise-scale: the averaged gradient's per step, and each
// replica's "grad_sq_local" column.
void grad_norms_from_json(const JsonReader& r, std::vector<StepRecord>& steps) {
  const auto checked = [&](const JsonReader& from, const std::string& key) {
    const std::vector<double> v = from.numbers(key);
    SS_CHECK(v.size() == steps.size(), "{}: {} values for {} steps", from.name(key), v.size(),
             steps.size());
    for (const double x : v) {
      SS_CHECK(std::isfinite(x) && x >= 0.0, "{}: {} is not a squared norm", from.name(key), x);
    }
    return v;
  };
  const std::vector<double> global = checked(r, "grad_sq_global");
  for (size_t i = 0; i < steps.size(); ++i) steps[i].grad_norms = StepGradNorms{{}, global[i]};
  for (size_t k = 0; k < r.array("replicas").size(); ++k) {
    const std::vector<double> local = checked(r.element("replicas", k), "grad_sq_local");
    for (size_t i = 0; i < steps.size(); ++i) steps[i].grad_norms->local.push_back(local[i]);
  }
}

RepeatRecord repeat_from_json(const JsonReader& r, size_t buckets) {
  RepeatRecord out;
  out.warmup_steps = r.int64("warmup_steps");
  out.warmup_settled = r.boolean("warmup_settled");
  out.first_loss = r.number("first_loss");
  out.last_loss = r.number("last_loss");
  out.steps = steps_from_json(r);
  const size_t replicas = r.array("replicas").size();
  SS_CHECK(replicas >= 1 || out.steps.empty(), "{}: no replicas", r.name("replicas"));
  for (StepRecord& s : out.steps) s.replicas.resize(replicas);
  for (size_t k = 0; k < replicas; ++k) replica_from_json(r.element("replicas", k), k, out.steps);
  bucket_ms_from_json(r, buckets, out.steps);
  if (r.has("grad_sq_global")) grad_norms_from_json(r, out.steps);         // since 1.7
  if (r.has("target")) out.target = target_from_json(r.object("target"));  // since 1.7
  if (r.has("loss_scaling")) {                                             // since 1.17
    out.loss_scaling = read_fields<LossScalingRecord>(r.object("loss_scaling"));
  }
  if (r.has("allreduce_split")) {  // since 1.2
    out.allreduce_split = split_from_json(r.object("allreduce_split"));
  }
  if (r.has("gpu_util_percent")) {  // since 1.2
    const double u = r.number("gpu_util_percent");
    SS_CHECK(u >= 0.0 && u <= 100.0, "{}: {} is not a percentage", r.name("gpu_util_percent"), u);
    out.gpu_util_percent = u;
  }
  // The group's step times are the record's (the slowest replica's when written); its input
  // wait is derived from the replicas, as the trainer derives it.
  for (StepRecord& s : out.steps) {
    if (s.replicas.empty()) continue;
    const double step_ms = s.step_ms;
    set_group_times(s);
    s.step_ms = step_ms;
  }
  return out;
}

// Points before 1.16 ran their devices' default at the time: TF32 on GPUs (unless the sweep's
// config said "tf32": false), fp32 elsewhere.
void read_precision(const JsonReader& r, SweepPoint& p) {
  if (!r.has("precision")) {
    p.precision = p.device_kind == "cuda" ? Precision::kTf32 : Precision::kFp32;
    p.precision_default = true;
    return;
  }
  const std::string name = r.string("precision");
  const std::vector<std::string> names = precision_names();
  SS_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
           "{}: '{}' is not a precision (accepted: {})", r.name("precision"), name,
           fmt::join(names, ", "));
  p.precision = parse_precision(name);
  p.precision_default = r.boolean("precision_default");
}

SweepPoint point_from_json(const JsonReader& r) {
  SweepPoint p;
  p.model = r.string("model");
  p.params = r.int64("params");
  p.forward_flops_per_sample = r.int64("forward_flops_per_sample");
  p.device_kind = r.string("device_kind");
  SS_CHECK(p.device_kind == "cpu" || p.device_kind == "cuda" || p.device_kind == "sim",
           "{} '{}' is not a device kind (accepted: cpu, cuda, sim)", r.name("device_kind"),
           p.device_kind);
  p.devices = r.int32("devices");
  SS_CHECK(p.devices >= 1, "{}: must be at least 1, not {}", r.name("devices"), p.devices);
  p.device_spec = r.string("device_spec");
  p.threads_per_device = r.int32("threads_per_device");
  if (r.has("communication_threads_per_device")) {  // since 1.14
    p.communication_threads_per_device = r.int32("communication_threads_per_device");
    SS_CHECK(p.communication_threads_per_device >= 0, "{}: {} must not be negative",
             r.name("communication_threads_per_device"), p.communication_threads_per_device);
  }
  p.mode = parse_scaling_mode(r.string("mode"));
  p.batch = r.int64("batch");
  p.global_batch = r.int64("global_batch");
  SS_CHECK(p.batch >= 1 && p.global_batch >= 1, "{}: batch sizes must be positive",
           r.name("batch"));
  p.status = r.string("status");
  SS_CHECK(p.status == "ok" || p.status == "failed", "{}: '{}' is not ok or failed",
           r.name("status"), p.status);
  p.error = r.string("error");
  if (r.has("bucket_cap_mb")) {  // since 1.5; earlier sweeps ran the default caps
    p.bucket_cap_mb = r.number("bucket_cap_mb");
    p.first_bucket_mb = r.number("first_bucket_mb");
    SS_CHECK(std::isfinite(p.bucket_cap_mb) && p.bucket_cap_mb > 0.0 &&
                 std::isfinite(p.first_bucket_mb) && p.first_bucket_mb > 0.0,
             "{}: bucket caps must be positive sizes, not {} and {}", r.name("bucket_cap_mb"),
             p.bucket_cap_mb, p.first_bucket_mb);
  }
  if (r.has("grad_compression")) {  // since 1.6; earlier sweeps did not compress
    const std::string name = r.string("grad_compression");
    const std::vector<std::string> names = grad_compression_names();
    SS_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
             "{}: '{}' is not a gradient compression (accepted: {})", r.name("grad_compression"),
             name, fmt::join(names, ", "));
    p.grad_compression = parse_grad_compression(name);
  }
  read_precision(r, p);
  p.bucket_bytes = r.int64s("bucket_bytes");
  p.peak_memory_bytes = r.int64("peak_memory_bytes");
  if (r.has("nondeterministic_fallbacks")) {  // since 1.14
    p.nondeterministic_fallbacks = r.strings("nondeterministic_fallbacks");
  }
  if (r.has("layer_profile")) {  // since 1.15
    json_fields::read_value(r, "layer_profile", p.layer_profile);
  }
  // Added in 1.0's lifetime: optional when reading.
  if (r.has("trace")) p.trace = r.string("trace");
  if (r.has("profile")) p.profile = r.string("profile");
  const size_t repeats = r.array("repeats").size();
  for (size_t i = 0; i < repeats; ++i) {
    p.repeats.push_back(repeat_from_json(r.element("repeats", i), p.bucket_bytes.size()));
  }
  SS_CHECK(!p.ok() || !p.repeats.empty(), "{}: an ok point without repeats", r.name("repeats"));
  return p;
}

}  // namespace

json to_json(const SweepReport& r) {
  json points = json::array();
  for (const SweepPoint& p : r.points) points.push_back(point_json(p));
  json communication = json::array();
  for (const CommunicationAnalysis& c : r.communication) {
    communication.push_back(communication_json(c));
  }
  json bucket_choices = json::array();
  for (const BucketChoice& c : r.bucket_choices) bucket_choices.push_back(bucket_choice_json(c));
  json compression = json::array();
  for (const CompressionEffect& e : r.compression_effects) {
    compression.push_back(compression_effect_json(e));
  }
  json j = {{"schema", kSweepSchema},
            {"schema_version", kSweepSchemaVersion},
            {"tool_version", r.tool_version},
            {"created", r.created},
            {"complete", r.complete},
            {"environment", to_json(r.environment)},
            {"config", r.config},
            {"points", std::move(points)},
            {"communication", std::move(communication)},
            {"bucket_choices", std::move(bucket_choices)},
            {"compression_effects", std::move(compression)}};
  if (r.cluster) j["cluster"] = to_json(*r.cluster);
  return j;
}

SweepReport sweep_report_from_json(const json& j, const std::string& what) {
  const JsonReader r(j, what);
  const std::string schema = r.string("schema");
  SS_CHECK(schema == kSweepSchema, "{}: this is a '{}' file, not a sweep report ('{}')", what,
           schema, kSweepSchema);
  const std::string version = r.string("schema_version");
  // Minor versions only add keys; another major version changed what keys mean.
  SS_CHECK(version.substr(0, version.find('.')) == "1",
           "{}: schema version {} is not readable by this scalescope (reads 1.x)", what, version);
  SweepReport out;
  out.tool_version = r.string("tool_version");
  out.created = r.string("created");
  out.complete = r.boolean("complete");
  try {
    out.environment = environment_from_json(r.at("environment"));
  } catch (const Error& e) {
    throw_error(fmt::format("{}: in 'environment': {}", what, e.message()));
  }
  if (r.has("cluster")) {
    try {
      out.cluster = cluster_from_json(r.object("cluster"));
    } catch (const Error& e) {
      throw_error(fmt::format("{}: in 'cluster': {}", what, e.message()));
    }
  }
  out.config = r.object("config").value();
  const size_t points = r.array("points").size();
  for (size_t i = 0; i < points; ++i) out.points.push_back(point_from_json(r.element("points", i)));
  analyze(out);
  return out;
}

void write_sweep_report(const std::string& path, const SweepReport& report) {
  write_file_atomic(path, dump_json(to_json(report), 1) + "\n");
}

SweepReport read_sweep_report(const std::string& path) {
  return sweep_report_from_json(parse_json(read_file(path), path), path);
}

}  // namespace scalescope
