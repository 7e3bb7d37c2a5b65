// `scalescope pipeline-bench`: the input pipeline's throughput alone, per worker count, so
// that a user can see whether the input can feed N devices before blaming the devices.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "core/check.h"
#include "core/clock.h"
#include "core/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "harness/options/run_options.h"
#include "harness/trainer/options.h"
#include "models/zoo.h"
#include "pipelines/pipeline.h"
#include "reports/json_reader.h"

namespace scalescope::cli {
namespace {

struct BenchArgs {
  DataOptions data;
  std::string model = "cifar-cnn";
  std::vector<int> workers{1, 2, 4};
  int64_t batch = 64;
  int64_t batches = 200;
  int64_t warmup = 10;
  uint64_t seed = 1;
  std::string output;
  OptionList list;  // the declarations of all of the above
};

struct BenchPoint {
  int workers = 0;
  double seconds = 0.0;
  double samples_per_second = 0.0;
  double batch_ms = 0.0;
};

int run_bench(const BenchArgs& a, const OptionSources& names) {
  SS_CHECK_INPUT(!a.workers.empty(), "{} needs at least one worker count", names.name("workers"));
  const ModelDef def = make_model(a.model);
  const RunData data = open_run_data(a.data, def, a.seed);
  SS_CHECK_INPUT(!data.device_resident,
                 "--data synthetic:device has no input pipeline to measure (its batch stays on the "
                 "device); use --data synthetic");
  const Sampler sampler(data.train->size(), a.batch, 1, a.seed);
  fmt::print("{}: batch {}, {} batches after {} warm-up, transforms: {}\n", data.train->describe(),
             a.batch, a.batches, a.warmup, data.train_transforms.any() ? "yes" : "none");
  fmt::print("{:>8} {:>14} {:>12}\n", "workers", "samples/s", "ms/batch");
  std::vector<BenchPoint> points;
  for (int w : a.workers) {
    PipelineConfig config;
    config.workers = w;
    config.queue_depth = std::max(a.data.queue_depth, w);
    config.transforms = data.train_transforms;
    config.seed = a.seed;
    InputPipeline pipeline(*data.train, sampler, 0, config);
    for (int64_t i = 0; i < a.warmup; ++i) (void)pipeline.next();
    const int64_t start = now_ns();
    for (int64_t i = 0; i < a.batches; ++i) (void)pipeline.next();
    BenchPoint p;
    p.workers = w;
    p.seconds = static_cast<double>(now_ns() - start) * 1e-9;
    p.samples_per_second = static_cast<double>(a.batches * a.batch) / p.seconds;
    p.batch_ms = p.seconds * 1e3 / static_cast<double>(a.batches);
    fmt::print("{:>8} {:>14.0f} {:>12.3f}\n", p.workers, p.samples_per_second, p.batch_ms);
    std::fflush(stdout);
    points.push_back(p);
  }
  if (!a.output.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const BenchPoint& p : points) {
      list.push_back({{"workers", p.workers},
                      {"seconds", p.seconds},
                      {"samples_per_second", p.samples_per_second},
                      {"batch_ms", p.batch_ms}});
    }
    const nlohmann::json doc = {{"schema", "scalescope-pipeline-bench"},
                                {"schema_version", "1.0"},
                                {"data", data.train->describe()},
                                {"batch", a.batch},
                                {"batches", a.batches},
                                {"transforms", data.train_transforms.any()},
                                {"decode_cost_us", a.data.decode_cost_us},
                                {"points", list}};
    write_file_atomic(a.output, dump_json(doc, 2) + "\n");
    fmt::print("written to {}\n", a.output);
  }
  return 0;
}

}  // namespace

void add_pipeline_bench_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<BenchArgs>();
  OptionList& list = args->list;
  add_data_options(list, args->data, /*with_workers=*/false);
  add_model_option(list, args->model);
  add_workers_option(list, args->workers);
  add_batch_option(list, args->batch);
  list.add("--batches", args->batches, "Batches measured per worker count",
           at_least<int64_t>(1, "must be positive"));
  list.add("--warmup", args->warmup, "Batches before measuring",
           at_least<int64_t>(0, "must not be negative"));
  add_seed_option(list, args->seed);
  list.add("-o,--output", args->output, "Write the results as JSON", writable_file());
  CLI::App* cmd = app.add_subcommand(
      "pipeline-bench", "Measure the input pipeline alone (samples/s per worker count)");
  add_options(*cmd, list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] { return run_bench(*args, settle_options(*cmd, args->list)); };
  });
}

}  // namespace scalescope::cli
