// Seed inputs for the fuzzers, written with the project's own writers so that they stay valid
// as the formats change: make_corpus OUT writes OUT/<fuzzer>/<seed> for every fuzzer and
// OUT/<fuzzer>.dict (libFuzzer's dictionary format) of the JSON keys of its seeds.
#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <string>

#include "core/cpu/cpu_device.h"
#include "core/fs.h"
#include "harness/sweep/options.h"
#include "harness/trainer/options.h"
#include "harness/trainer/results.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "pipelines/cifar10.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/json_reader.h"
#include "reports/trace_analysis/analysis_report.h"
#include "reports/trace_analysis/readers.h"
#include "reports/writers/trace.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/gzip_util.h"
#include "tests/reports/sweep_fixtures.h"

using namespace scalescope;
namespace fs = std::filesystem;

namespace {

std::string out_dir;

void seed(const std::string& fuzzer, const std::string& name, std::string_view bytes) {
  fs::create_directories(fs::path(out_dir) / fuzzer);
  write_file_atomic((fs::path(out_dir) / fuzzer / name).string(), bytes);
}

void collect_keys(const nlohmann::json& j, std::set<std::string>& keys) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      keys.insert(k);
      collect_keys(v, keys);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collect_keys(v, keys);
  }
}

// A dictionary entry per key, quoted as it appears in JSON ("\"key\"").
void dict(const std::string& fuzzer, const std::vector<nlohmann::json>& docs) {
  std::set<std::string> keys;
  for (const auto& d : docs) collect_keys(d, keys);
  std::string text;
  for (const std::string& k : keys) text += fmt::format("\"\\\"{}\\\"\"\n", k);
  write_file_atomic((fs::path(out_dir) / (fuzzer + ".dict")).string(), text);
}

// The command line fuzzer's dictionary: every flag of `sweep` and `train`.
void flags_dict(const std::string& fuzzer) {
  SweepOptions sweep;
  TrainOptions train;
  OptionList list;
  add_sweep_options(list, sweep);
  add_train_options(list, train);
  std::set<std::string> flags;
  for (const OptionDecl& d : list.decls()) flags.insert(d.flag());
  std::string text;
  for (const std::string& f : flags) text += fmt::format("\"{}\"\n", f);
  write_file_atomic((fs::path(out_dir) / (fuzzer + ".dict")).string(), text);
}

std::string idx(const std::vector<uint32_t>& dims) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      s.push_back(static_cast<char>((d >> shift) & 0xff));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

void checkpoints() {
  CpuDevice device(0, 1);
  Model model(fuzz::tiny_model(), Shape{fuzz::kTinyInputs}, device, 1);
  Optimizer optimizer(OptimizerConfig{}, model);
  const std::string path = (fs::path(out_dir) / "tiny.safetensors").string();
  save_checkpoint(path, model, &optimizer);
  seed("safetensors", "tiny.safetensors", read_file(path));
  seed("optimizer_state", "tiny.optim.safetensors", read_file(optimizer_state_path(path)));
  fs::remove(path);
  fs::remove(optimizer_state_path(path));
}

void datasets() {
  // The first byte is idx_fuzzer's mode: bit 0 gzip here, bit 1 rank 3.
  seed("idx", "labels", std::string(1, '\0') + idx({5}));
  seed("idx", "images", std::string(1, '\2') + idx({2, 3, 3}));
  seed("idx", "labels-gz-here", std::string(1, '\1') + idx({5}));
  seed("idx", "images-gz-here", std::string(1, '\3') + idx({2, 3, 3}));
  seed("idx", "images-gz-file",
       std::string(1, '\2') + testing_util::gzip(idx({2, 3, 3}), Z_BEST_COMPRESSION));
  std::string record(static_cast<size_t>(kCifarRecord), '\0');
  record[0] = 3;
  for (size_t i = 1; i < record.size(); ++i) record[i] = static_cast<char>(i * 7);
  seed("cifar10", "one-record.bin", record);
}

void reports() {
  using testing_util::PointSpec;
  PointSpec one{.model = "dense-100", .devices = 1, .repeats = 2, .steps = 3};
  PointSpec two = one;
  two.devices = 2;
  SweepPoint with_noise = testing_util::make_point(two);
  // The readers of the noise scale's norms and of the time-to-target records get seeds too.
  for (RepeatRecord& r : with_noise.repeats) {
    for (StepRecord& s : r.steps) s.grad_norms = StepGradNorms{{3.0, 3.5}, 2.0};
    r.target = TargetRecord{.metric = "accuracy",
                            .value = 0.8,
                            .reached = true,
                            .step = 3,
                            .samples = 192,
                            .epochs = 0.5,
                            .train_ms = 30.0,
                            .wall_ms = 40.0};
  }
  SweepReport report =
      testing_util::report_of({testing_util::make_point(one), std::move(with_noise),
                               testing_util::failed_point(two, "out of memory")});
  const nlohmann::json a = to_json(report);
  seed("sweep_report", "report.json", dump_json(a));
  report.points[1].repeats[0].steps[0].step_ms *= 2;
  analyze(report);
  const nlohmann::json b = to_json(report);
  seed("compare", "same.json", dump_json(a));
  seed("compare", "two.json", dump_json(a) + "\n--\n" + dump_json(b));
  dict("sweep_report", {a});
  dict("compare", {a});

  RunResults results(2);
  for (int r = 0; r < 2; ++r) {
    const SweepPoint& p = report.points[1];
    results.replicas[static_cast<size_t>(r)].phases = {p.repeats[0].steps[0].replicas[0]};
    results.replicas[static_cast<size_t>(r)].phases[0].buckets = {{0.5, 1.0}};
    results.replicas[static_cast<size_t>(r)].losses = {2.3};
    results.replicas[static_cast<size_t>(r)].grad_sq_local = {3.0};
    results.replicas[static_cast<size_t>(r)].grad_sq_global = {1.0};
  }
  results.group.steps = 1;
  results.group.bucket_ms = {{1.0}};
  results.group.bucket_bytes = {1024};
  results.group.evals = {EvalRecord{1, 1, 2.0, 0.5}};
  results.group.lrs = {0.01};
  results.group.allreduce_split = AllReduceSplit{1024, 2, 3, 1.0, 0.5};
  results.group.kernels = {KernelChoiceRecord{.layer = 0,
                                              .layer_name = "dense(4)",
                                              .pass = "forward",
                                              .algorithm = "gemm",
                                              .math = "fp32",
                                              .layout = "nchw",
                                              .deterministic = true,
                                              .workspace_bytes = 0}};
  results.gpu_utilization = {GpuUtilization{.host = "h", .pci_bus_id = "0000:01:00.0"}};
  const nlohmann::json message = results_to_json(results, 0, 2, true);
  seed("run_results", "results.json", dump_json(message));
  dict("run_results", {message});
}

void texts() {
  SweepOptions options;
  const nlohmann::json config = sweep_config_json(options);
  seed("sweep_config", "defaults.json", dump_json(config, 1));
  seed("sweep_config", "small.json",
       R"({"devices": "cpu:1,2", "batch": [8, 16], "models": ["dense-100", "cnn:width=0.5"]})");
  dict("sweep_config", {config});
  for (const std::string& spec :
       {"cifar-cnn", "mlp-41m", "dense-100", "gap-cnn", "cnn:width=0.5", "mlp:scale=0.01",
        "cnn:width=2", "cifar-cnn:classes=100", "resnet:depth=18,image=32,classes=10"}) {
    seed("model_spec", spec, spec);
  }
  for (const std::string& spec : {"cpu", "cpu:4", "sim:2", "cuda:2", "cuda:0,1", "4"}) {
    seed("device_spec", spec, spec);
  }
  seed("command_line", "sweep", "--devices\ncpu:1,2\n--batch\n8,16\n--models\ndense-100");
  seed("command_line", "axes",
       "--precision=fp32,bf16\n--bucket-cap-mb\n1,25\n--global-batch\n64\n--steps\n010");
  seed("command_line", "train", "--model\ncifar-cnn\n--batch\n8\n--lr-scaling\nsqrt\n--no-overlap");
  flags_dict("command_line");
  seed("trace_escape", "label", "cifar-cnn cpu:2 batch 64");
  seed("trace_escape", "unicode", "m\xc3\xa9trique \xe2\x9c\x93 \"quoted\" \\ \x01");
}

// scalescope analyze: two points' measured steps as scalescope's own traces, and the analysis
// report of the one against the other (which compare reads too).
void trace_analysis_seeds() {
  using testing_util::PointSpec;
  PointSpec one{.model = "dense-100", .devices = 1, .repeats = 1, .steps = 4};
  PointSpec two = one;
  two.devices = 2;
  traces::AnalysisReport analysis;
  for (const PointSpec& spec : {one, two}) {
    const SweepPoint p = testing_util::make_point(spec);
    const std::string text = chrome_trace_text(p.repeats[0].steps, {p.label(), p.bucket_bytes});
    seed("trace_analysis", fmt::format("scalescope-{}.trace.json", p.devices), text);
    const traces::JobSteps job =
        traces::job_of(traces::parse_chrome_trace(text, "scalescope.trace.json"), "");
    if (spec.devices == 1) {
      analysis.baseline = job;
    } else {
      analysis.job = job;
    }
  }
  traces::analyze_report(analysis);
  const nlohmann::json j = traces::to_json(analysis);
  seed("trace_analysis", "analysis.json", dump_json(j));
  dict("trace_analysis", {j});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} OUT_DIR\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  fs::create_directories(out_dir);
  checkpoints();
  datasets();
  reports();
  texts();
  trace_analysis_seeds();
  return 0;
}
