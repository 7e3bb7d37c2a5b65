// The HTML page around the charts: the header, a section per model (its charts, the
// all-reduce model and a table of its points), the verdicts, the failed points and the
// environment; the style sheet inline.
#include <fmt/format.h>

#include <cctype>
#include <iterator>

#include "core/fs.h"
#include "reports/html/bucket_chart.h"
#include "reports/html/compression_chart.h"
#include "reports/html/heatmap_chart.h"
#include "reports/html/layers_table.h"
#include "reports/html/noise_chart.h"
#include "reports/html/page.h"
#include "reports/html/phases_chart.h"
#include "reports/html/precision_section.h"
#include "reports/html/speedup_chart.h"
#include "reports/html/svg.h"
#include "reports/html/target_chart.h"
#include "reports/html/view.h"
#include "reports/html/waterfall_chart.h"

namespace scalescope::html {
namespace {

using svg::escape;

constexpr const char* kStyle = R"css(
:root { --ink: #1f2933; --muted: #5f6b76; --line: #e3e5e8; --panel: #ffffff; --bg: #f5f6f8;
        --accent: #1f4e79; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
             sans-serif; }
main { max-width: 1160px; margin: 0 auto; padding: 24px 20px 48px; }
header.page { background: var(--accent); color: #fff; }
header.page .inner { max-width: 1160px; margin: 0 auto; padding: 22px 20px 18px; }
header.page h1 { margin: 0 0 4px; font-size: 24px; font-weight: 650; letter-spacing: .2px; }
header.page .meta { opacity: .9; font-size: 13px; }
header.page .meta span + span::before { content: "·"; margin: 0 8px; opacity: .7; }
nav.toc { margin-top: 12px; font-size: 13px; }
nav.toc a { color: #fff; opacity: .92; margin-right: 14px; text-decoration: none;
            border-bottom: 1px solid rgba(255,255,255,.45); }
.pill { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px;
        font-weight: 600; }
.pill.ok { background: #d7f0df; color: #17613a; }
.pill.warn { background: #fde7c7; color: #8a4b08; }
.pill.bad { background: #fbd9d6; color: #a4231a; }
.pill.info { background: #e7ebef; color: #45505b; }
section { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
          padding: 18px 20px 20px; margin: 18px 0; }
h2 { font-size: 19px; margin: 0 0 2px; }
h2 code { font-size: 18px; }
h3 { font-size: 14px; margin: 18px 0 8px; color: var(--muted); text-transform: uppercase;
     letter-spacing: .6px; font-weight: 650; }
.sub { color: var(--muted); font-size: 13px; margin-bottom: 6px; }
.charts { display: flex; flex-wrap: wrap; gap: 18px 28px; align-items: flex-start; }
figure { margin: 0; }
figcaption { font-weight: 600; font-size: 13px; margin: 4px 0 6px; }
figcaption .hint { font-weight: 400; color: var(--muted); }
svg { display: block; max-width: 100%; height: auto; font-family: inherit; }
svg .svg-grid { stroke: #eceef1; stroke-width: 1; }
svg .svg-axis { stroke: #8a939c; stroke-width: 1; }
svg .svg-tick { font-size: 11px; fill: #5f6b76; }
svg .svg-label { font-size: 12px; fill: #3e4852; }
svg .svg-legend { font-size: 11px; fill: #3e4852; }
svg .svg-value { font-size: 11px; font-weight: 600; fill: #1f2933; }
svg .svg-note { font-size: 11px; fill: #6b7580; }
svg .svg-error { font-size: 11.5px; fill: #b42318; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
.wide { overflow-x: auto; max-width: 100%; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { color: var(--muted); font-weight: 600; background: #fafbfc; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td { color: #a4231a; }
table.kv th { width: 38%; background: none; white-space: normal; }
table.kv td { overflow-wrap: anywhere; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr));
         gap: 8px 28px; }
.grid2 > *, .charts > * { min-width: 0; max-width: 100%; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
            monospace; font-size: 12.5px; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 0; }
.note { color: var(--muted); font-size: 13px; }
details summary { cursor: pointer; color: var(--accent); font-weight: 600; }
footer { color: var(--muted); font-size: 12px; text-align: center; margin-top: 24px; }
)css";

std::string severity_pill(const std::string& severity) {
  const char* cls = severity == kSeverityHigh       ? "bad"
                    : severity == kSeverityModerate ? "warn"
                                                    : "info";
  return fmt::format(R"(<span class="pill {}">{}</span>)", cls, escape(severity));
}

std::string interval_text(const std::optional<Interval>& i, bool as_percent) {
  if (!i) return "&ndash;";
  if (as_percent) {
    return fmt::format("{} <span class=\"note\">[{}, {}]</span>", percent(i->value, 0),
                       percent(i->low, 0), percent(i->high, 0));
  }
  return fmt::format("{:.2f} <span class=\"note\">[{:.2f}, {:.2f}]</span>", i->value, i->low,
                     i->high);
}

void points_table(std::string& out, const ModelView& m) {
  out +=
      "<h3>Points</h3>\n<div class=\"wide\"><table>\n<tr><th class=\"num\">devices</th>"
      "<th class=\"num\">batch</th>"
      "<th class=\"num\">global batch</th><th class=\"num\">samples/s [95% CI]</th>"
      "<th class=\"num\">step ms (p10&ndash;p90)</th><th class=\"num\">speedup</th>"
      "<th class=\"num\">efficiency</th><th>bottleneck</th></tr>\n";
  for (int64_t b : m.batches) {
    for (const SweepPoint* p : m.series(b, true)) {
      std::string devices = fmt::format("{}:{}", p->device_kind, p->devices);
      if (p->devices > 1 && !p->default_buckets()) devices += ", bucket " + p->buckets_text();
      if (p->devices > 1 && p->compressed()) {
        devices += fmt::format(", {}", compression_text(p->grad_compression));
      }
      devices = escape(devices);
      if (!p->ok()) {
        fmt::format_to(std::back_inserter(out),
                       "<tr class=\"failed\"><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                       "<td class=\"num\">{}</td><td colspan=\"5\">failed: {}</td></tr>\n",
                       devices, p->batch, p->global_batch, escape(p->error));
        continue;
      }
      const PointSummary& s = p->summary;
      const Finding& top = s.verdict.top();
      fmt::format_to(
          std::back_inserter(out),
          "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
          "<td class=\"num\">{} <span class=\"note\">[{}, {}]</span></td>"
          "<td class=\"num\">{} <span class=\"note\">({}&ndash;{})</span></td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"nowrap\">{} "
          "{}</td></tr>\n",
          devices, p->batch, p->global_batch, short_number(s.throughput.value),
          short_number(s.throughput.low), short_number(s.throughput.high),
          short_number(s.step_ms_median), short_number(s.step_ms_p10), short_number(s.step_ms_p90),
          interval_text(s.speedup, false), interval_text(s.efficiency, true), escape(top.kind),
          severity_pill(top.severity));
    }
  }
  out += "</table></div>\n";
}

// What the speedup chart projects from the fit, or why it projects nothing (or less).
std::string projection_text(const CommunicationAnalysis& c) {
  std::string note = escape(c.projection_note);
  if (!note.empty()) {
    note[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(note[0])));
    note += ".";
  }
  if (!c.reliable) {
    return "<span data-projection=\"unreliable\">" + note + " No projection is drawn.</span>";
  }
  if (c.series.empty()) {
    return note.empty() ? "No projection: it needs weak scaling and a one-device point." : note;
  }
  return "The dashed lines in the speedup chart project it to more devices, with the compute "
         "and input time of the largest measured point." +
         (note.empty() ? "" : " " + note);
}

void communication_text(std::string& out, const ModelView& m) {
  if (m.communication == nullptr) return;
  const CommunicationAnalysis& c = *m.communication;
  out += "<h3>All-reduce model</h3>\n<p class=\"note\">";
  if (!c.fit) {
    out += "Not fitted: " + escape(c.fit_error) + ".";
  } else {
    fmt::format_to(std::back_inserter(out),
                   "time = {:.3f} ms + bytes &middot; 2(N&minus;1)/N &divide; {} GB/s "
                   "(r&sup2; {:.3f}, {} bucket samples). {}",
                   c.fit->alpha_ms,
                   c.fit->bus_bandwidth_gbps > 0 ? short_number(c.fit->bus_bandwidth_gbps)
                                                 : std::string("&infin;"),
                   c.fit->r_squared, c.fit->samples, projection_text(c));
    if (m.other_precisions) {
      out +=
          " Fitted over the buckets of every precision's points (each all-reduces fp32 "
          "gradients); the projection starts from this precision's own.";
    }
  }
  out += "</p>\n";
}

void waterfalls_text(std::string& out, const WaterfallsData& w) {
  out += "<h3>Efficiency lost at the largest device count</h3>\n";
  if (!w.charts.empty()) {
    out += "<div class=\"charts\">\n";
    for (const WaterfallData& d : w.charts) {
      fmt::format_to(std::back_inserter(out),
                     "<figure><figcaption>Efficiency lost at {}:{}, {}</figcaption>\n{}\n"
                     "</figure>\n",
                     escape(d.device_kind), d.devices, escape(d.batch_text), draw_waterfall(d));
    }
    out += "</div>\n";
  }
  if (!w.missing.empty()) {
    std::string list;
    for (const std::string& s : w.missing) list += (list.empty() ? "" : ", ") + s;
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\">No breakdown for {}: it needs a successful point on more "
                   "than one device and the one-device point to compare with.</p>\n",
                   escape(list));
  }
}

// Efficiency with and without gradient compression, and what each compression changed.
void compression_figure(std::string& out, const ModelView& m) {
  if (m.compression_effects.empty()) return;
  const CompressionChartData d = prepare_compression(m);
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Efficiency with and without gradient compression <span "
                 "class=\"hint\">(against one device; bars: 95% CI)</span></figcaption>\n{}\n"
                 "</figure>\n",
                 draw_compression(d));
  for (const std::string& c : d.conclusions) {
    fmt::format_to(std::back_inserter(out), "<p class=\"note\" data-compression-effect>{}</p>\n",
                   escape(c));
  }
  for (const std::string& c : d.missing) {
    fmt::format_to(std::back_inserter(out), "<p class=\"note\" data-compression-missing>{}</p>\n",
                   escape(c));
  }
}

// The gradient noise scale of the points that measured it, and what it costs each in time to
// a target.
void noise_figure(std::string& out, const ModelView& m) {
  if (!has_noise(m)) return;
  const NoiseChartData d = prepare_noise(m);
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Gradient noise scale against global batch <span "
                 "class=\"hint\">(log scales; bars: 95% CI; below the diagonal, extra samples "
                 "per step buy little)</span></figcaption>\n{}\n</figure>\n",
                 draw_noise(d));
  for (const NoiseChartData::Point& p : d.points) {
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\" data-noise-point=\"{}\" data-b-noise=\"{}\">{}</p>\n",
                   escape(p.label),
                   p.b_noise ? fmt::format("{:.4g}", p.b_noise->value) : std::string("none"),
                   escape(p.sentence));
  }
}

// The time-to-target speedup of the points that trained to a target, split into hardware and
// statistical efficiency, and a sentence per point with the numbers behind it.
void target_figure(std::string& out, const ModelView& m) {
  if (!has_target(m)) return;
  const TargetChartData d = prepare_target(m);
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Time to {} <span class=\"hint\">(speedup against one "
                 "device: time to target = hardware &times; statistical efficiency; dashed: "
                 "ideal; ring: what the noise scale predicted)</span></figcaption>\n{}\n"
                 "</figure>\n",
                 escape(d.target), draw_target(d));
  for (const TargetChartData::Point& p : d.points) {
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\" data-target-point=\"{}\" data-reached=\"{}/{}\" "
                   "data-speedup=\"{}\">{}</p>\n",
                   escape(p.label), p.time.reached, p.time.repeats,
                   p.time.speedup ? fmt::format("{:.4f}", *p.time.speedup) : std::string("none"),
                   escape(p.sentence));
  }
}

void layers_text(std::string& out, const ModelView& m) {
  const std::string table = draw_layers_table(prepare_layers(m));
  if (table.empty()) return;
  out +=
      "<h3>Slowest layers</h3>\n<p class=\"note\">Replica 0's layers (<code>--profile-layers"
      "</code>), forward + backward, mean ms per measured step and share of the point's "
      "layers' sum.</p>\n" +
      table;
}

void model_section(std::string& out, const ModelView& m) {
  const SweepPoint& any = *m.points.front();
  fmt::format_to(std::back_inserter(out), "<section id=\"model-{}\" data-model=\"{}\">\n", m.index,
                 escape(m.name));
  fmt::format_to(std::back_inserter(out), "<h2><code>{}</code></h2>\n<div class=\"sub\">",
                 escape(m.name));
  std::vector<std::string> facts;
  facts.push_back(to_string(m.mode) + " scaling");
  if (any.params > 0) facts.push_back(count_with_commas(any.params) + " parameters");
  if (any.forward_flops_per_sample > 0) {
    facts.push_back(fmt::format("{:.3g} MFLOP forward per sample",
                                static_cast<double>(any.forward_flops_per_sample) / 1e6));
  }
  const size_t points = m.all_points.size();
  facts.push_back(fmt::format("{} point{}", points, points == 1 ? "" : "s"));
  for (size_t i = 0; i < facts.size(); ++i) out += (i > 0 ? " &middot; " : "") + escape(facts[i]);
  out += "</div>\n";
  if (any.simulated()) {
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\" data-simulated=\"true\"><span class=\"pill warn\">simulated "
                   "devices</span> {}.</p>\n",
                   escape(kSimulatedDevicesNote));
  }
  out += "<div class=\"charts\">\n";
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Speedup against devices <span class=\"hint\">(log scales; "
                 "bars: 95% CI)</span></figcaption>\n{}\n</figure>\n",
                 draw_speedup(prepare_speedup(m)));
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Scaling efficiency <span class=\"hint\">(speedup &divide; "
                 "devices)</span></figcaption>\n{}\n</figure>\n",
                 draw_heatmap(prepare_heatmap(m)));
  out += "</div>\n";
  fmt::format_to(std::back_inserter(out),
                 "<figure><figcaption>Where the step goes <span class=\"hint\">(median phases "
                 "of the slowest replica; other = step &minus; the phases)</span></figcaption>\n"
                 "{}\n</figure>\n",
                 draw_phases(prepare_phases(m)));
  if (!m.bucket_choices.empty()) {
    const BucketChartData buckets = prepare_buckets(m);
    fmt::format_to(std::back_inserter(out),
                   "<figure><figcaption>Exposed all-reduce against bucket cap <span "
                   "class=\"hint\">(medians per step; dashed: the whole all-reduce, overlapped "
                   "or not)</span></figcaption>\n{}\n</figure>\n",
                   draw_buckets(buckets));
    for (const std::string& c : buckets.conclusions) {
      fmt::format_to(std::back_inserter(out), "<p class=\"note\" data-bucket-choice>{}</p>\n",
                     escape(c));
    }
  }
  compression_figure(out, m);
  noise_figure(out, m);
  target_figure(out, m);
  waterfalls_text(out, prepare_waterfalls(m));
  communication_text(out, m);
  layers_text(out, m);
  points_table(out, m);
  out += "</section>\n";
}

// A finding's share of the step, except for "statistically-limited": its share is the fraction
// of the samples beyond what one device needs to reach a target (1 − statistical efficiency),
// which no share of the step measures, so the cell names its unit.
std::string share_cell(const Finding& f) {
  if (f.kind != "statistically-limited") return percent(f.share);
  return fmt::format(
      "<span data-share-of=\"samples\" title=\"samples trained beyond what one device needs "
      "for the same progress (1 &minus; statistical efficiency), not a share of the step\">{} "
      "of samples</span>",
      percent(f.share));
}

void verdicts_section(std::string& out, const SweepReport& report) {
  out +=
      "<section id=\"verdicts\">\n<h2>Verdicts</h2>\n<div class=\"sub\">Every finding of "
      "every point. At N devices the efficiency-loss components lead (as in the waterfall), "
      "the largest first; then what the step shows on its own.</div>\n<div class=\"wide\">"
      "<table data-table=\"verdicts\">"
      "\n<tr><th>point</th><th>finding</th><th>severity</th><th class=\"num\">share of "
      "step</th><th>explanation</th></tr>\n";
  bool any = false;
  for (const SweepPoint& p : report.points) {
    if (!p.ok()) continue;
    const std::vector<Finding>& findings = p.summary.verdict.findings;
    for (size_t i = 0; i < findings.size(); ++i) {
      const Finding& f = findings[i];
      any = true;
      out += "<tr>";
      if (i == 0) {
        fmt::format_to(std::back_inserter(out), "<td class=\"nowrap\" rowspan=\"{}\">{}</td>",
                       findings.size(), escape(p.label()));
      }
      fmt::format_to(std::back_inserter(out),
                     "<td class=\"nowrap\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td>"
                     "</tr>\n",
                     escape(f.kind), severity_pill(f.severity), share_cell(f),
                     escape(f.explanation));
    }
  }
  if (!any) out += "<tr><td colspan=\"5\" class=\"note\">No successful point.</td></tr>\n";
  out += "</table></div>\n</section>\n";
}

void failures_section(std::string& out, const SweepReport& report) {
  out += "<section id=\"failures\">\n<h2>Failed points</h2>\n";
  std::string rows;
  for (const SweepPoint& p : report.points) {
    if (p.ok()) continue;
    fmt::format_to(std::back_inserter(rows), "<tr class=\"failed\"><td>{}</td><td>{}</td></tr>\n",
                   escape(p.label()), escape(p.error));
  }
  if (rows.empty()) {
    out += "<p class=\"note\">None: every point ran.</p>\n";
  } else {
    out +=
        "<div class=\"wide\"><table data-table=\"failures\">\n<tr><th>point</th>"
        "<th>error</th></tr>\n" +
        rows + "</table></div>\n";
  }
  out += "</section>\n";
}

void kv_table(std::string& out, const char* title,
              const std::vector<std::pair<std::string, std::string>>& rows) {
  fmt::format_to(std::back_inserter(out),
                 "<div><h3>{}</h3>\n<div class=\"wide\"><table class=\"kv\">\n", title);
  for (const auto& [k, v] : rows) {
    fmt::format_to(std::back_inserter(out), "<tr><th>{}</th><td>{}</td></tr>\n", escape(k),
                   v.empty() ? std::string("<span class=\"note\">&ndash;</span>") : escape(v));
  }
  out += "</table></div></div>\n";
}

void gpus_table(std::string& out, const Environment& e) {
  out += "<h3>GPUs</h3>\n";
  if (!e.simulated_devices.empty()) {
    out +=
        "<p class=\"note\" data-simulated=\"true\"><span class=\"pill warn\">simulated "
        "devices</span> " +
        escape(e.simulated_devices) + ".</p>\n";
  }
  if (e.gpus.empty()) {
    out += "<p class=\"note\">None" +
           (e.gpu_error.empty() ? std::string(".") : ": " + escape(e.gpu_error)) + "</p>\n";
    return;
  }
  out +=
      "<div class=\"wide\"><table>\n<tr><th class=\"num\">#</th><th>name</th>"
      "<th class=\"num\">memory</th>"
      "<th class=\"num\">compute capability</th><th class=\"num\">SMs</th><th>PCI bus</th>"
      "<th>UUID</th></tr>\n";
  for (const GpuInfo& g : e.gpus) {
    fmt::format_to(std::back_inserter(out),
                   "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>"
                   "<td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td>"
                   "<td><code>{}</code></td></tr>\n",
                   g.index, escape(g.name), gib(g.memory_bytes), escape(g.compute_capability),
                   g.sm_count, escape(g.pci_bus_id), escape(g.uuid));
  }
  out += "</table></div>\n";
  if (!e.gpu_error.empty()) out += "<p class=\"note\">" + escape(e.gpu_error) + "</p>\n";
}

void environment_section(std::string& out, const SweepReport& report) {
  const Environment& e = report.environment;
  out += "<section id=\"environment\">\n<h2>Environment</h2>\n";
  if (!e.captured_at.empty()) {
    out += "<div class=\"sub\">Captured " + escape(e.captured_at) + "</div>\n";
  }
  out += "<div class=\"grid2\">\n";
  kv_table(out, "Host",
           {{"hostname", e.host.hostname},
            {"CPU", e.host.cpu_model},
            {"cores", fmt::format("{} logical, {} usable by this process", e.host.logical_cores,
                                  e.host.usable_cores)},
            {"memory", gib(e.host.memory_bytes)},
            {"OS", e.host.os},
            {"kernel", e.host.kernel},
            {"architecture", e.host.arch}});
  const LibraryVersions& l = e.libraries;
  kv_table(out, "Libraries",
           {{"CUDA driver", l.cuda_driver},
            {"CUDA runtime", l.cuda_runtime},
            {"cuDNN", l.cudnn},
            {"NCCL", l.nccl},
            {"cuBLAS", l.cublas},
            {"oneDNN", l.onednn},
            {"Gloo", l.gloo},
            {"OpenMP", l.openmp}});
  const BuildInfo& b = e.build;
  kv_table(out, "Build",
           {{"scalescope", b.scalescope_version},
            {"compiler", b.compiler},
            {"build type", b.build_type},
            {"CUDA", b.with_cuda ? "yes" : "no"},
            {"CUDA architectures", b.cuda_architectures},
            {"git commit", b.git_commit},
            {"working tree", b.git_dirty ? "dirty (uncommitted changes)" : "clean"}});
  out += "<div><h3>Environment variables</h3>\n";
  if (e.env_vars.empty()) {
    out += "<p class=\"note\">None of the recorded variables was set.</p>\n";
  } else {
    out += "<div class=\"wide\"><table class=\"kv\">\n";
    for (const auto& [k, v] : e.env_vars) {
      fmt::format_to(std::back_inserter(out),
                     "<tr><th><code>{}</code></th><td><code>{}</code>"
                     "</td></tr>\n",
                     escape(k), escape(v));
    }
    out += "</table></div>\n";
  }
  out += "</div>\n</div>\n";
  gpus_table(out, e);
  out += "<h3>Command line</h3>\n<pre data-field=\"command-line\">" + escape(e.command_line) +
         "</pre>\n";
  if (!report.config.is_null() && !report.config.empty()) {
    out += "<details><summary>Sweep options</summary>\n<pre>" +
           escape(report.config.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) +
           "</pre></details>\n";
  }
  out += "</section>\n";
}

// <head> and the page's banner: what the sweep is, its state, and a link per section.
void page_header(std::string& out, const SweepReport& report,
                 const std::vector<ModelView>& models) {
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  std::string model_names;
  for (const ModelView& m : models) model_names += (model_names.empty() ? "" : ", ") + m.name;
  fmt::format_to(std::back_inserter(out), "<title>scalescope sweep: {}</title>\n",
                 escape(model_names.empty() ? std::string("no points") : model_names));
  out += "<style>";
  out += kStyle;
  out +=
      "</style>\n</head>\n<body>\n<header class=\"page\"><div class=\"inner\">\n"
      "<h1>scalescope &middot; scaling sweep</h1>\n<div class=\"meta\">";
  size_t failed = 0;
  for (const SweepPoint& p : report.points) failed += p.ok() ? 0 : 1;
  std::vector<std::string> meta;
  if (!report.created.empty()) meta.push_back("started " + escape(report.created));
  if (!report.environment.host.hostname.empty()) {
    meta.push_back("on " + escape(report.environment.host.hostname));
  }
  if (!report.tool_version.empty()) meta.push_back("scalescope " + escape(report.tool_version));
  meta.push_back(
      fmt::format("{} point{}", report.points.size(), report.points.size() == 1 ? "" : "s"));
  meta.push_back(failed == 0 ? std::string("<span class=\"pill ok\">all points ran</span>")
                             : fmt::format("<span class=\"pill bad\">{} failed</span>", failed));
  if (!report.complete) meta.push_back("<span class=\"pill warn\">incomplete sweep</span>");
  for (const std::string& s : meta) out += "<span>" + s + "</span>";
  out += "</div>\n<nav class=\"toc\">";
  for (const ModelView& m : models) {
    fmt::format_to(std::back_inserter(out), "<a href=\"#model-{}\">{}</a>", m.index,
                   escape(m.name));
  }
  out +=
      "<a href=\"#verdicts\">Verdicts</a><a href=\"#failures\">Failed points</a>"
      "<a href=\"#environment\">Environment</a></nav>\n</div></header>\n<main>\n";
}

}  // namespace
}  // namespace scalescope::html

namespace scalescope {

std::string format_sweep_html(const SweepReport& report) {
  const std::vector<html::ModelView> models = html::models_of(report);
  std::string out;
  out.reserve(64 * 1024);
  html::page_header(out, report, models);
  if (models.empty()) {
    out += "<section><p class=\"note\">This report has no points yet.</p></section>\n";
  }
  for (const html::ModelView& m : models) html::model_section(out, m);
  for (const html::ModelView& m : html::precision_views(report, static_cast<int>(models.size()))) {
    html::precision_section(out, report, m);
  }
  html::verdicts_section(out, report);
  html::failures_section(out, report);
  html::environment_section(out, report);
  out += "<footer>Written by scalescope";
  if (!report.tool_version.empty()) out += " " + svg::escape(report.tool_version);
  out += ". Self-contained: open it anywhere, offline.</footer>\n</main>\n</body>\n</html>\n";
  return out;
}

void write_sweep_html(const std::string& path, const SweepReport& report) {
  write_file_atomic(path, format_sweep_html(report));
}

std::string html_page_style() {
  return html::kStyle;
}

}  // namespace scalescope
