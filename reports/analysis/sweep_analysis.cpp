// analyze(): a sweep report's summaries from its samples. Per point: the phase medians, the
// step-time spread, the verdict, the bus bandwidth, and against its one-device baseline the
// speedup, efficiency and efficiency-loss breakdown; per model, the all-reduce cost model
// and its projections.
#include "reports/analysis/sweep_analysis.h"
#include "reports/sweep_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cpu_affinity.h"
#include "core/random.h"
#include "reports/analysis/scaling.h"
#include "reports/analysis/stats.h"

namespace scalescope {

using nlohmann::json;

namespace {

PhaseMedians medians_of(const std::vector<PhaseTimes>& steps) {
  PhaseMedians m;
  std::vector<double> v(steps.size());
  for (const PhaseDef& d : kPhases) {
    for (size_t i = 0; i < steps.size(); ++i) v[i] = steps[i][d.phase];
    m[d.phase] = median(v);
  }
  for (size_t i = 0; i < steps.size(); ++i) v[i] = steps[i].step_ms;
  m.step_ms = median(v);
  return m;
}

// The measured steps of every repeat, in order.
std::vector<const StepRecord*> pooled_steps(const SweepPoint& p) {
  std::vector<const StepRecord*> out;
  for (const RepeatRecord& r : p.repeats) {
    for (const StepRecord& s : r.steps) out.push_back(&s);
  }
  return out;
}

// Median time of each bucket over the pooled steps.
std::vector<double> bucket_medians(const SweepPoint& p) {
  const std::vector<const StepRecord*> steps = pooled_steps(p);
  std::vector<double> out;
  for (size_t b = 0; b < p.bucket_bytes.size(); ++b) {
    std::vector<double> v;
    for (const StepRecord* s : steps) {
      if (b < s->bucket_ms.size()) v.push_back(s->bucket_ms[b]);
    }
    out.push_back(v.empty() ? 0.0 : median(v));
  }
  return out;
}

// The noise scale of the point's pooled steps, when every step measured its gradient norms.
std::optional<NoiseScale> point_noise(const SweepPoint& p,
                                      const std::vector<const StepRecord*>& steps) {
  const NoiseBatches b{p.batch, p.global_batch};
  if (!estimable(b)) return std::nullopt;
  std::vector<GradSqNorms> norms;
  for (const StepRecord* s : steps) {
    if (!s->grad_norms || s->grad_norms->local.empty()) return std::nullopt;
    norms.push_back(s->grad_norms->norms());
  }
  return summarize_noise(norms, b);
}

void summarize_point(SweepPoint& p) {
  PointSummary s;
  const std::vector<const StepRecord*> steps = pooled_steps(p);
  SS_CHECK(!steps.empty(), "point {} has no measured steps", p.label());
  const std::vector<double> times = pooled_step_ms(p);
  s.measured_steps = static_cast<int64_t>(times.size());
  const auto batch = static_cast<double>(p.global_batch);
  s.throughput =
      bootstrap_median_ci(times, [batch](double median_ms) { return batch * 1e3 / median_ms; });
  s.step_ms_median = median(times);
  s.step_ms_p10 = percentile(times, 0.1);
  s.step_ms_p90 = percentile(times, 0.9);
  s.step_ms_cv = times.size() >= 2 ? coefficient_of_variation(times) : 0.0;
  std::vector<PhaseTimes> slowest;
  const size_t replicas = steps.front()->replicas.size();
  std::vector<std::vector<PhaseTimes>> per_replica(replicas);
  for (const StepRecord* st : steps) {
    SS_CHECK(st->replicas.size() == replicas, "point {}: steps disagree on the replica count",
             p.label());
    slowest.push_back(slowest_replica(st->replicas));
    for (size_t r = 0; r < replicas; ++r) per_replica[r].push_back(st->replicas[r]);
  }
  s.group = medians_of(slowest);
  // The group's step is the median group step time, which the slowest replica's median
  // phases approximate; keep the exact one.
  s.group.step_ms = s.step_ms_median;
  for (const std::vector<PhaseTimes>& r : per_replica) s.replicas.push_back(medians_of(r));
  std::vector<double> fractions;
  std::vector<double> utilization;
  for (const RepeatRecord& r : p.repeats) {
    if (r.allreduce_split) fractions.push_back(r.allreduce_split->intra_node_fraction());
    if (r.gpu_util_percent) utilization.push_back(*r.gpu_util_percent);
  }
  if (!fractions.empty()) s.intra_node_fraction = median(fractions);
  // A GPU busy u% of the time ran kernels for u% of the step: the rest the host kept it
  // waiting (the verdict's host-bound rule).
  std::optional<double> device_busy_ms;
  if (!utilization.empty()) {
    s.gpu_util_percent = median(utilization);
    device_busy_ms = *s.gpu_util_percent / 100.0 * s.group.step_ms;
  }
  s.verdict = diagnose(VerdictInput{s.group, s.replicas, device_busy_ms});
  if (p.devices > 1 && !p.bucket_bytes.empty()) {
    const std::vector<double> ms = bucket_medians(p);
    double bytes = 0.0;
    double total_ms = 0.0;
    for (size_t b = 0; b < ms.size(); ++b) {
      bytes += static_cast<double>(p.bucket_bytes[b]) * bus_factor(p.devices);
      total_ms += ms[b];
    }
    if (total_ms > 0.0) s.bus_bandwidth_gbps = bytes / (total_ms * 1e6);
  }
  s.noise = point_noise(p, steps);
  std::vector<TargetRecord> targets;
  for (const RepeatRecord& r : p.repeats) {
    if (r.target) targets.push_back(*r.target);
  }
  if (!targets.empty()) s.time_to_target = summarize_targets(targets);
  p.summary = std::move(s);
}

const SweepPoint* baseline_of(const std::vector<SweepPoint>& points, const SweepPoint& p) {
  for (const SweepPoint& b : points) {
    if (b.ok() && b.devices == 1 && b.model == p.model && b.device_kind == p.device_kind &&
        b.mode == p.mode && b.precision == p.precision &&
        (p.mode == ScalingMode::kWeak ? b.batch == p.batch : b.global_batch == p.global_batch)) {
      return &b;
    }
  }
  return nullptr;
}

struct SharedCores {
  int replicas = 0;
  int cores = 0;
};

// Across the processes of a launch, the replicas of a point that run on the same cores: per
// process taking part, those of the processes that share its cores (share_cores) and the
// union of their CPUs; the group with the most replicas per core. None where the report does
// not record the processes' CPUs (before 1.20).
std::optional<SharedCores> busiest_cores(const ClusterInfo& c, int devices) {
  const int per = std::min(std::max(c.replicas_per_process, 1), devices);
  const auto processes = std::min(static_cast<size_t>(devices / per), c.members.size());
  for (size_t i = 0; i < processes; ++i) {
    if (c.members[i].cpus.empty()) return std::nullopt;
  }
  std::optional<SharedCores> busiest;
  for (size_t i = 0; i < processes; ++i) {
    std::set<int> cores;
    int replicas = 0;
    for (size_t j = 0; j < processes; ++j) {
      if (!share_cores(c.members[i], c.members[j])) continue;
      replicas += per;
      const std::vector<int> cpus = parse_cpu_set(c.members[j].cpus);
      cores.insert(cpus.begin(), cpus.end());
    }
    const SharedCores group{replicas, static_cast<int>(cores.size())};
    if (!busiest || static_cast<int64_t>(group.replicas) * busiest->cores >
                        static_cast<int64_t>(busiest->replicas) * group.cores) {
      busiest = group;
    }
  }
  return busiest;
}

// What the replicas of a CPU point run on: their threads against the cores of the process
// (across processes: of the processes running on the same cores, busiest_cores). None when
// the report does not say how many input workers ran.
std::optional<ThreadBudget> thread_budget(const SweepReport& report, const SweepPoint& p) {
  if (p.device_kind != "cpu" || p.threads_per_device <= 0) return std::nullopt;
  std::optional<SharedCores> shared;
  if (report.cluster && report.cluster->processes > 1) {
    shared = busiest_cores(*report.cluster, p.devices);
    if (!shared) return std::nullopt;
  }
  const json& c = report.config;
  if (!c.is_object() || !c.contains("workers") || !c["workers"].is_number_integer()) {
    return std::nullopt;
  }
  const bool resident = c.contains("data") && c["data"] == "synthetic:device";
  ThreadBudget t;
  t.replicas = shared ? shared->replicas : p.devices;
  t.compute_per_replica = p.threads_per_device;
  t.input_per_replica = resident ? 0 : c["workers"].get<int>();
  // As the run counted them. Sweeps before 1.14 did not count: they are read as before, with a
  // reducer thread and Gloo's event loop (an overcount where they reduced in shared memory).
  t.communication_per_replica = p.communication_threads_per_device >= 0
                                    ? p.communication_threads_per_device
                                    : (p.devices > 1 ? 2 : 0);
  t.usable_cores = shared ? shared->cores : report.environment.host.usable_cores;
  return t;
}

// A point's measured steps as columns, for resampling: per phase of the schema and then the
// step time, the value of every step ranked, for the group (the slowest replica of each step)
// and for each replica.
struct StepColumns {
  using Columns = std::vector<RankedSamples>;  // [phase, then step time]
  Columns group;
  std::vector<Columns> replicas;
  size_t steps = 0;

  explicit StepColumns(const SweepPoint& p) {
    const std::vector<const StepRecord*> pooled = pooled_steps(p);
    steps = pooled.size();
    using Values = std::vector<std::vector<double>>;  // [phase, then step time][step]
    const auto add = [](Values& c, const PhaseTimes& t) {
      c.resize(kPhases.size() + 1);
      for (size_t k = 0; k < kPhases.size(); ++k) c[k].push_back(t[kPhases[k].phase]);
      c.back().push_back(t.step_ms);
    };
    Values g;
    std::vector<Values> r;
    for (const StepRecord* s : pooled) {
      add(g, slowest_replica(s->replicas));
      g.back().back() = s->step_ms;  // the group's step time, as the summary's median
      r.resize(s->replicas.size());
      for (size_t k = 0; k < s->replicas.size(); ++k) add(r[k], s->replicas[k]);
    }
    const auto rank = [](const Values& v) { return Columns(v.begin(), v.end()); };
    group = rank(g);
    for (const Values& v : r) replicas.push_back(rank(v));
  }

  // The medians of a resample of the steps: `drawn[i]` the times it took step i.
  static PhaseMedians medians(const Columns& c, std::span<const uint32_t> drawn) {
    PhaseMedians m;
    for (size_t k = 0; k < c.size(); ++k) {
      (k < kPhases.size() ? m[kPhases[k].phase] : m.step_ms) = c[k].percentile(drawn, 0.5);
    }
    return m;
  }
};

constexpr int kLossResamples = 1000;

// Each share of p's loss breakdown against `one` with its 95% bootstrap interval: the measured
// steps of both points drawn again with replacement (independently, each step whole with every
// replica's phases) and the breakdown recomputed from the medians of the draw.
std::array<LossBreakdown::Range, kLossCauseCount> loss_intervals(const SweepPoint& p,
                                                                 const SweepPoint& one) {
  const StepColumns a(one);
  const StepColumns b(p);
  Rng rng(1);
  std::vector<uint32_t> drawn_a;
  std::vector<uint32_t> drawn_b;
  std::array<std::vector<double>, kLossCauseCount> shares;
  std::vector<PhaseMedians> replicas(b.replicas.size());
  for (int r = 0; r < kLossResamples; ++r) {
    RankedSamples::draw(a.steps, rng, drawn_a);
    RankedSamples::draw(b.steps, rng, drawn_b);
    const PhaseMedians base = StepColumns::medians(a.group, drawn_a);
    const PhaseMedians group = StepColumns::medians(b.group, drawn_b);
    for (size_t k = 0; k < replicas.size(); ++k) {
      replicas[k] = StepColumns::medians(b.replicas[k], drawn_b);
    }
    const double ideal = p.mode == ScalingMode::kWeak ? base.step_ms : base.step_ms / p.devices;
    const LossBreakdown l = efficiency_loss(base, replicas, group, ideal);
    for (size_t k = 0; k < l.shares.size(); ++k) shares[k].push_back(l.shares[k]);
  }
  std::array<LossBreakdown::Range, kLossCauseCount> out;
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = {percentile(shares[k], 0.025), percentile(shares[k], 0.975)};
  }
  return out;
}

void compare_with_baseline(SweepPoint& p, const SweepPoint& one,
                           std::optional<ThreadBudget> threads) {
  const std::vector<double> a = pooled_step_ms(one);
  const std::vector<double> b = pooled_step_ms(p);
  // throughput_N / throughput_1 = (G_N / median_N) / (G_1 / median_1).
  const double batches =
      static_cast<double>(p.global_batch) / static_cast<double>(one.global_batch);
  Interval r = bootstrap_median_ratio_ci(a, b);
  Interval speedup{r.value * batches, r.low * batches, r.high * batches};
  p.summary.speedup = speedup;
  const double n = p.devices;
  p.summary.efficiency = Interval{speedup.value / n, speedup.low / n, speedup.high / n};
  if (p.devices > 1) {
    const double ideal =
        p.mode == ScalingMode::kWeak ? one.summary.step_ms_median : one.summary.step_ms_median / n;
    PointSummary& s = p.summary;
    s.loss = efficiency_loss(one.summary.group, s.replicas, s.group, ideal);
    s.loss->intervals = loss_intervals(p, one);
    s.verdict = explain_scaling(s.verdict, ScalingInput{*s.loss, s.group.step_ms, threads});
    if (s.noise && s.noise->b_noise && s.noise->b_noise->value > 0.0) {
      s.statistics = statistical_scaling(s.noise->b_noise->value, one.global_batch, p.global_batch);
      add_statistical_finding(s.verdict, *s.loss, *s.statistics);
    }
    if (s.time_to_target && one.summary.time_to_target) {
      compare_targets(*s.time_to_target, *one.summary.time_to_target);
      if (s.statistics) s.time_to_target->predicted_statistical = s.statistics->efficiency;
    }
  }
}

bool spans_nodes(const SweepPoint& p) {
  return std::any_of(p.repeats.begin(), p.repeats.end(), [](const RepeatRecord& r) {
    return r.allreduce_split && r.allreduce_split->nodes > 1;
  });
}

// A model's all-reduce samples: each bucket's median time on each point on more than one
// device that ran with float gradients (across nodes, only the points that span them).
struct AllReduceSamples {
  std::vector<AllReduceSample> samples;
  bool compressed = false;  // a point left out because it compressed its gradients
  bool failed = false;      // a point on more than one device that did not run
};

AllReduceSamples allreduce_samples(const std::string& model, const std::vector<SweepPoint>& points,
                                   bool across_nodes) {
  AllReduceSamples r;
  for (const SweepPoint& p : points) {
    if (p.model != model || p.devices < 2) continue;
    r.failed = r.failed || !p.ok();
    if (!p.ok()) continue;
    // The fit describes the float all-reduce: a 16-bit one sums with other code.
    r.compressed = r.compressed || p.compressed();
    if (p.compressed() || (across_nodes && !spans_nodes(p))) continue;
    const std::vector<double> ms = bucket_medians(p);
    for (size_t b = 0; b < ms.size(); ++b) {
      r.samples.push_back({p.bucket_bytes[b], p.devices, ms[b]});
    }
  }
  return r;
}

// When the samples cannot give an alpha-beta fit, one sentence on what to run so that they do,
// on the kind of device the sweep ran on ("cuda", "sim", "cpu").
std::optional<std::string> fit_advice(const AllReduceSamples& all, const std::string& device_kind) {
  const std::vector<AllReduceSample>& samples = all.samples;
  if (samples.empty() && all.compressed) {
    return "every point on more than one device compressed its gradients, and the model "
           "describes the float all-reduce; add none to --grad-compression";
  }
  if (samples.empty() && all.failed) {
    return "every point on more than one device failed, so none measured the all-reduce; each "
           "one's error is in its row";
  }
  if (samples.empty()) {
    return fmt::format(
        "no point ran on more than one device; add one (e.g. --devices {}:1,2) to measure the "
        "all-reduce",
        device_kind);
  }
  std::set<double> sizes;
  for (const AllReduceSample& s : samples) {
    sizes.insert(static_cast<double>(s.bytes) * bus_factor(s.devices));
  }
  if (sizes.size() >= 2) return std::nullopt;
  return fmt::format(
      "every all-reduce moved {} bytes on {} devices, one size cannot separate latency from "
      "bandwidth; add a device count (each link carries 2(N-1)/N of the buffer) or a "
      "--bucket-cap-mb below {:.3g} (buckets of other sizes)",
      samples.front().bytes, samples.front().devices,
      static_cast<double>(samples.front().bytes) / (1 << 20));
}

// The device counts to project point `p` to: 2, 4 and 8 times its own, without those whose
// threads would not fit the cores the sweep's process may use (CPU and simulated devices: more
// of them on this machine would share its cores, which the all-reduce model does not
// describe). `note` says why counts were left out, or why they were not.
std::vector<int> projection_counts(const SweepReport& report, const SweepPoint& p,
                                   std::string& note) {
  std::vector<int> counts = {p.devices * 2, p.devices * 4, p.devices * 8};
  const int cores = report.environment.host.usable_cores;
  const int threads = p.threads_per_device;
  if ((p.device_kind != "cpu" && p.device_kind != "sim") || threads <= 0 || cores <= 0) {
    return counts;
  }
  if (report.cluster && report.cluster->processes > 1) {
    note =
        "projected past one machine's cores: the sweep ran across processes, so more "
        "devices are taken to come with cores of their own (more nodes)";
    return counts;
  }
  const auto cut =
      std::find_if(counts.begin(), counts.end(), [&](int n) { return n * threads > cores; });
  if (cut == counts.end()) return counts;
  note = fmt::format(
      "{}: {} {} devices × {} thread{} would need {} cores, and this machine may use {} (more "
      "devices here would share them, which the all-reduce model does not describe)",
      cut == counts.begin() ? "no projection" : fmt::format("projected up to {}", *(cut - 1)), *cut,
      p.device_kind, threads, threads == 1 ? "" : "s", *cut * threads, cores);
  counts.erase(cut, counts.end());
  return counts;
}

CommunicationAnalysis analyze_communication(const std::string& model, const SweepReport& report) {
  const std::vector<SweepPoint>& points = report.points;
  CommunicationAnalysis c;
  c.model = model;
  c.across_nodes = std::any_of(points.begin(), points.end(), [&](const SweepPoint& p) {
    return p.ok() && p.model == model && !p.compressed() && spans_nodes(p);
  });
  const AllReduceSamples samples = allreduce_samples(model, points, c.across_nodes);
  const auto first = std::find_if(points.begin(), points.end(),
                                  [&](const SweepPoint& p) { return p.model == model; });
  const std::string kind = first != points.end() ? first->device_kind : "cpu";
  if (const std::optional<std::string> advice = fit_advice(samples, kind)) {
    c.fit_error = *advice;
    return c;
  }
  try {
    c.fit = fit_alpha_beta(samples.samples);
  } catch (const Error& e) {
    c.fit_error = e.message();
    return c;
  }
  c.projection_note = unreliable_fit_reason(*c.fit);
  c.reliable = c.projection_note.empty();
  if (!c.reliable) return c;
  // Weak scaling: from the largest measured device count of each batch and precision, project
  // 2, 4 and 8 times as many devices (as many of them as projection_counts keeps).
  std::map<std::pair<int64_t, Precision>, const SweepPoint*> largest;
  for (const SweepPoint& p : points) {
    if (!p.ok() || p.model != model || p.mode != ScalingMode::kWeak || p.devices < 2 ||
        p.compressed()) {
      continue;
    }
    // Of several bucket settings, the default caps' (the trainer's unless told otherwise).
    const SweepPoint*& l = largest[{p.batch, p.precision}];
    if (l == nullptr || p.devices > l->devices ||
        (p.devices == l->devices && p.default_buckets() && !l->default_buckets())) {
      l = &p;
    }
  }
  for (const auto& [key, p] : largest) {
    const SweepPoint* one = baseline_of(points, *p);
    if (one == nullptr) continue;
    const std::vector<int> counts = projection_counts(report, *p, c.projection_note);
    if (counts.empty()) continue;
    const PhaseMedians& g = p->summary.group;
    // Anchored at the measurement: everything but input and exposed all-reduce counts as
    // compute, so the model reproduces the measured step at the measured device count and
    // only the all-reduce's growth moves the projection (the phase medians alone do not add
    // up to the median step).
    const double input = g.exposed_ms(PhaseKind::kInput);
    const double capacity = overlap_capacity_ms(g);
    const double exposed =
        std::max(0.0, projected_allreduce_ms(*c.fit, p->bucket_bytes, p->devices) - capacity);
    const double compute = std::max(0.0, p->summary.step_ms_median - input - exposed);
    c.series.push_back({p->batch, p->precision, p->precision_default, p->devices,
                        project_efficiency(*c.fit, p->bucket_bytes, counts,
                                           one->summary.step_ms_median, compute, input, capacity)});
  }
  return c;
}

// The points that differ only in their bucket settings: same model, devices, batch axis,
// compression and precision.
std::string bucket_group_key(const SweepPoint& p) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}", p.model, p.device_kind, p.devices, to_string(p.mode),
                     p.mode == ScalingMode::kWeak ? p.batch : p.global_batch,
                     to_string(p.grad_compression), to_string(p.precision));
}

BucketChoice choose_bucket(std::vector<const SweepPoint*> group) {
  std::sort(group.begin(), group.end(), [](const SweepPoint* a, const SweepPoint* b) {
    return std::pair(a->bucket_cap_mb, a->first_bucket_mb) <
           std::pair(b->bucket_cap_mb, b->first_bucket_mb);
  });
  const SweepPoint& first = *group.front();
  BucketChoice c;
  static_cast<PointGroup&>(c) = PointGroup::of(first);
  c.compression = first.grad_compression;
  for (size_t i = 0; i < group.size(); ++i) {
    const PointSummary& s = group[i]->summary;
    c.settings.push_back({group[i]->bucket_cap_mb, group[i]->first_bucket_mb, s.throughput.value,
                          s.group[Phase::kAllReduce], s.group[Phase::kAllReduceExposed]});
    if (s.throughput.value > c.settings[c.best].throughput) c.best = i;
    if (group[i]->default_buckets()) {
      c.reference = i;
      c.reference_is_default = true;
    }
  }
  // Same global batch: the throughput ratio is the inverse ratio of the median step times.
  c.gain = bootstrap_median_ratio_ci(pooled_step_ms(*group[c.reference]),
                                     pooled_step_ms(*group[c.best]));
  return c;
}

// One choice per group of points measured with more than one bucket setting, in the order
// of the groups' first points.
std::vector<BucketChoice> analyze_buckets(const std::vector<SweepPoint>& points) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const SweepPoint*>> groups;
  for (const SweepPoint& p : points) {
    if (!p.ok() || p.devices < 2) continue;
    const std::string key = bucket_group_key(p);
    if (!groups.contains(key)) order.push_back(key);
    groups[key].push_back(&p);
  }
  std::vector<BucketChoice> out;
  for (const std::string& key : order) {
    if (groups[key].size() >= 2) out.push_back(choose_bucket(groups[key]));
  }
  return out;
}

}  // namespace

PointGroup PointGroup::of(const SweepPoint& p) {
  return {p.model,
          p.device_kind,
          p.devices,
          p.mode,
          p.mode == ScalingMode::kWeak ? p.batch : p.global_batch,
          p.precision,
          p.precision_default};
}

std::vector<double> pooled_step_ms(const SweepPoint& p) {
  std::vector<double> out;
  for (const StepRecord* s : pooled_steps(p)) out.push_back(s->step_ms);
  SS_CHECK(!out.empty(), "point {} is ok but has no measured steps", p.label());
  return out;
}

// What the best setting gains over the reference, or that it gains nothing certain.
std::string bucket_conclusion(const BucketChoice& c) {
  const BucketChoice::Setting& best = c.settings[c.best];
  const std::string reference = fmt::format("{}{}", c.reference_is_default ? "the default " : "",
                                            c.settings[c.reference].text());
  if (c.best == c.reference) return fmt::format("best: {}, no other setting beat it", reference);
  const std::string gain =
      fmt::format("{:.3f}x [{:.3f}, {:.3f}]", c.gain.value, c.gain.low, c.gain.high);
  if (c.better()) {
    return fmt::format("best: {}, {} the throughput of {}", best.text(), gain, reference);
  }
  return fmt::format("best: no better than {} ({} had {}, the interval includes 1)", reference,
                     best.text(), gain);
}

void analyze(SweepReport& report) {
  for (SweepPoint& p : report.points) {
    if (p.ok()) summarize_point(p);
  }
  for (SweepPoint& p : report.points) {
    if (!p.ok()) continue;
    if (const SweepPoint* one = baseline_of(report.points, p)) {
      compare_with_baseline(p, *one, thread_budget(report, p));
    }
  }
  report.communication.clear();
  std::set<std::string> seen;
  for (const SweepPoint& p : report.points) {
    if (seen.insert(p.model).second) {
      report.communication.push_back(analyze_communication(p.model, report));
    }
  }
  report.bucket_choices = analyze_buckets(report.points);
  report.compression_effects = analyze_compression(report.points);
}

}  // namespace scalescope
