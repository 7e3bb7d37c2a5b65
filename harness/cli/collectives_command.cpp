// `scalescope collectives`: all-reduce time and bandwidth over a range of message sizes, as
// nccl-tests' all_reduce_perf measures them, with a data check per size. The α-β fit at the
// end is the cost model the sweep's projections use, taken from this measurement alone.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "core/backend.h"
#include "core/check.h"
#include "core/device_spec.h"
#include "core/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/launch.h"
#include "harness/cli/option_app.h"
#include "harness/collectives/benchmark.h"
#include "harness/collectives/collective_backends.h"
#include "harness/options/run_options.h"
#include "harness/telemetry/environment.h"
#include "harness/trainer/layout.h"
#include "reports/json_reader.h"

namespace scalescope::cli {
namespace {

struct CollectivesArgs {
  std::string devices = "cpu:2";
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  int64_t factor = 2;
  int warmup_iters = 5;
  int iters = 20;
  std::string op = "sum";
  double timeout_s = 300;
  std::string json;
  LaunchOptions launch;
  OptionList list;  // the declarations of all of the above
};

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0) {
    return fmt::format("{}G", bytes >> 30);
  }
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    return fmt::format("{}M", bytes >> 20);
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

void print_row(const AllReduceSizeResult& s, ReduceOp op) {
  fmt::print("{:>12} {:>13} {:>9} {:>7} {:>11.2f} {:>8.2f} {:>8.2f} {:>7}\n", s.bytes, s.count,
             "float", to_string(op), s.time_us, s.algbw_gbps, s.busbw_gbps, s.wrong);
  std::fflush(stdout);
}

void print_header(const CollectivesArgs& a, const DeviceSpec& spec,
                  const AllReduceBenchOptions& options, const Cluster& cluster) {
  const int ranks = spec.count();
  // Gloo alone, or the kind's device collectives (NCCL, shared memory) on each device's
  // communication stream.
  const char* device_collectives = collective_backend(spec.kind).device_collectives();
  const std::string where =
      cluster.multi_process()
          ? fmt::format("{} per process over {} processes on {} node{}", ranks / cluster.size(),
                        cluster.size(), cluster.node_count(), cluster.node_count() == 1 ? "" : "s")
          : std::string("threads of this process");
  const std::string transport = device_collectives != nullptr
                                    ? "one device each, on its communication stream"
                                : cluster.multi_process() ? "TCP"
                                                          : "TCP on loopback";
  fmt::print("# scalescope collectives: all_reduce over {}, {} rank{} ({}: {}, {})\n",
             device_collectives != nullptr ? device_collectives : "Gloo", ranks,
             ranks == 1 ? "" : "s", to_string(spec), where, transport);
  if (const std::optional<NetworkInfo>& n = cluster.network()) {
    fmt::print("# network (rank 0): {} {} (chosen by {})\n",
               n->interface.empty() ? "?" : n->interface, n->address, n->chosen_by);
  }
  fmt::print(
      "# sizes {} .. {} bytes (factor {}), {} warm-up + {} timed all-reduces per size, op "
      "{}, float32, in place\n",
      size_text(options.sizes.front()), size_text(options.sizes.back()), a.factor,
      options.warmup_iters, options.iters, a.op);
  fmt::print(
      "# time: mean per all-reduce on each rank (events on its stream: the host clock on "
      "CPU); ranks combined by {}: the slowest rank defines the collective\n",
      kRankCombinePolicy);
  fmt::print("#\n");
  fmt::print("# {:>10} {:>13} {:>9} {:>7} {:>11} {:>8} {:>8} {:>7}\n", "size", "count", "type",
             "redop", "time", "algbw", "busbw", "#wrong");
  fmt::print("# {:>10} {:>13} {:>9} {:>7} {:>11} {:>8} {:>8} {:>7}\n", "(B)", "(elements)", "", "",
             "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void print_summary(const AllReduceBenchResult& result) {
  const int64_t wrong = result.wrong();
  fmt::print("# Wrong values      : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  fmt::print("# Avg bus bandwidth : {:.3f} GB/s\n", result.average_busbw_gbps());
  const std::optional<AlphaBetaFit> fit = fit_all_reduce(result);
  if (fit) {
    const std::string bandwidth =
        fit->bus_bandwidth_gbps > 0
            ? fmt::format("bus bandwidth {:.3f} GB/s", fit->bus_bandwidth_gbps)
            : std::string("no per-byte cost found in these sizes");
    fmt::print("# α-β fit over {} sizes: α = {:.2f} us, β = {:.4g} ms/byte ({}), R² = {:.4f}\n",
               fit->samples, fit->alpha_ms * 1e3, fit->beta_ms_per_byte, bandwidth, fit->r_squared);
    fmt::print("#   the harness's α-β fit can start from this measurement\n");
  } else {
    fmt::print("# α-β fit: needs at least 2 ranks and 2 sizes\n");
  }
}

// Alone, this process opens every rank's device. Under mpirun or srun each process opens its
// own ranks' devices, the first ones it sees, as training does: the devices are counted per
// process, not on one machine (processes on one node may share a GPU, each then an NCCL host of
// its own through NCCL_HOSTID). Throws Error naming the counts.
void check_devices_here(const DeviceSpec& spec, const Cluster& cluster) {
  const Backend& b = backend(spec.kind);
  if (!cluster.multi_process()) {
    check_devices_available(spec);
  } else if (!b.logical()) {
    check_visible_devices(process_layout(&cluster, 0, spec.count()), spec.kind, b.device_count());
  }
}

int run_collectives(const CollectivesArgs& a) {
  // Every value is checked before the ranks start.
  const DeviceSpec spec = parse_device_spec(a.devices);
  AllReduceBenchOptions options;
  options.sizes = message_sizes(parse_byte_size(a.min_bytes, "--min-bytes"),
                                parse_byte_size(a.max_bytes, "--max-bytes"), a.factor);
  options.warmup_iters = a.warmup_iters;
  options.iters = a.iters;
  options.op = parse_reduce_op(a.op);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1e3));
  // Under mpirun or srun the ranks spread over the processes; rank 0's process prints.
  const Launch launch = join_launch(a.launch, timeout.count());
  Cluster& cluster = *launch.cluster;
  (void)ranks_per_process(spec, cluster.size());  // refused before anything is printed
  check_devices_here(spec, cluster);
  if (!launch.lead) {
    (void)benchmark_all_reduce_across(cluster, spec, options, timeout);
    return 0;
  }
  // Captured first: a failure to read the environment should not cost a whole measurement.
  std::optional<Environment> environment;
  if (!a.json.empty()) {
    environment = capture_environment(command_line());
    environment->network = cluster.network();
  }
  print_header(a, spec, options, cluster);
  const SizeCallback row = [&](const AllReduceSizeResult& s) { print_row(s, options.op); };
  const AllReduceBenchResult result =
      cluster.multi_process() ? benchmark_all_reduce_across(cluster, spec, options, timeout, row)
                              : benchmark_all_reduce_on(spec, options, timeout, {}, row);
  print_summary(result);
  if (!a.json.empty()) {
    nlohmann::json doc = {{"schema", "scalescope-collectives"},
                          {"schema_version", "1.0"},
                          {"devices", to_string(spec)},
                          {"processes", cluster.size()},
                          {"nodes", cluster.node_count()},
                          {"timing",
                           "mean per all-reduce over the timed iterations, events on each "
                           "rank's stream (host clock on CPU)"},
                          {"environment", to_json(*environment)}};
    doc.update(to_json(result));
    write_file_atomic(a.json, dump_json(doc, 2) + "\n");
    fmt::print("# written to {}\n", a.json);
  }
  const int64_t wrong = result.wrong();
  if (wrong > 0) {
    fmt::print(stderr,
               "scalescope: error: the all-reduce data check found {} wrong value{} (see the "
               "#wrong column)\n",
               wrong, wrong == 1 ? "" : "s");
    return 1;
  }
  return 0;
}

}  // namespace

void add_collectives_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<CollectivesArgs>();
  OptionList& list = args->list;
  add_devices_option(list, args->devices);
  list.add("-b,--min-bytes", args->min_bytes,
           "Smallest message, bytes (K, M, G suffixes: powers of 1024)");
  list.add("-e,--max-bytes", args->max_bytes, "Largest message, bytes (K, M, G suffixes)");
  list.add("-f,--factor", args->factor, "Each message size is the previous one times this");
  list.add("-w,--warmup-iters", args->warmup_iters, "Untimed all-reduces per size",
           at_least(0, "must not be negative"));
  list.add("-n,--iters", args->iters, "Timed all-reduces per size",
           at_least(1, "must be at least 1"));
  list.add("--op", args->op, "Reduction: sum or avg");
  list.add("--timeout", args->timeout_s, "Seconds one collective may take before the run fails",
           [](const double& s) {
             return s > 0 && s <= 86400 ? std::string()
                                        : std::string("must be more than 0 and at most 86400");
           });
  list.add("--json", args->json,
           "Also write the results, the α-β fit and the environment as JSON to this file",
           writable_file());
  add_launch_options(list, args->launch);
  CLI::App* cmd = app.add_subcommand(
      "collectives",
      "Measure all-reduce time, algorithm and bus bandwidth over message sizes, with a data "
      "check (as nccl-tests' all_reduce_perf)");
  add_options(*cmd, list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_collectives(*args);
    };
  });
}

}  // namespace scalescope::cli
