// scalescope-bench: Google Benchmark micro-benchmarks of the pieces a training step is made
// of, at the shapes of the model zoo: each layer's forward and backward, the optimizer update
// over a model's parameters, and the all-reduce of each gradient bucket the trainer would
// send. Where a sweep says which phase grew, these say which kernel.
//
// Timing. CPU kernels run inline on the calling thread (several OpenMP threads), so a
// benchmark's wall time is the work's time: UseRealTime. On a GPU a launch returns before the
// work ends, so the time is taken where the work runs: events recorded around it on the
// stream, elapsed time read after synchronizing the stop event, handed to SetIterationTime
// (UseManualTime). Both go through the Device/Event interface, so GPU benchmarks are right
// by construction once GPU kernels exist; they are registered only when a GPU is present.
// A failure is reported on its benchmark (SkipWithError) and the run goes on.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "core/backend.h"
#include "core/buffer.h"
#include "core/check.h"
#include "core/cpu/cpu_device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "harness/collectives/communicator.h"
#include "harness/telemetry/environment.h"
#include "harness/trainer/buckets.h"
#include "harness/trainer/trainer.h"
#include "models/kernels.h"
#include "models/model.h"
#include "models/zoo.h"

namespace scalescope::bench {
namespace {

constexpr int64_t kBatch = 32;
constexpr const char* kModels[] = {"cifar-cnn", "mlp-41m", "dense-100", "gap-cnn"};
constexpr uint64_t kSeed = 1;
// Long enough for a 128 MB all-reduce on a loaded machine; a broken pair fails after it.
constexpr std::chrono::milliseconds kCollectiveTimeout{60000};
constexpr double kDefaultMinTime = 0.05;

constexpr const char* kHelp =
    R"(scalescope-bench: micro-benchmarks of scalescope's kernels and collectives
at the shapes of the model zoo (cifar-cnn, mlp-41m, dense-100, gap-cnn; batch 32).

  layer/<model>/<i>:<kind>/{forward,backward}/batch:32   one layer of the model
  optimizer/<model>/{sgd,adam}/params:<n>                 one update over all parameters
  allreduce/gloo/ranks:2/<model>/bucket:<k>/bytes:<b>     one gradient bucket, 2 ranks
                                                          (threads), trainer's bucket caps

CPU benchmarks use wall time (/real_time), GPU and all-reduce ones manual time
(/manual_time: events where the work runs; all-reduce: the slower rank's time).
GPU benchmarks (suffix /cuda:0, the first GPU) are registered only when a GPU is present.

Unless --benchmark_min_time is given, each benchmark runs for 0.05 s (a short run). E.g.
  scalescope-bench --benchmark_list_tests
  scalescope-bench --benchmark_filter='layer/cifar-cnn/.*' --benchmark_min_time=0.05
  scalescope-bench --benchmark_filter=allreduce --benchmark_format=json

Google Benchmark's own flags follow.
)";

// Short lower-case layer names for benchmark names (no characters a --benchmark_filter regex
// would read as syntax).
std::string layer_kind(const LayerSpec& layer) {
  struct Names {
    std::string operator()(const Conv2DSpec&) const { return "conv2d"; }
    std::string operator()(const MaxPool2DSpec&) const { return "maxpool2d"; }
    std::string operator()(const DenseSpec&) const { return "linear"; }
    std::string operator()(const ActivationSpec& a) const {
      switch (a.kind) {
        case Activation::kRelu:
          return "relu";
        case Activation::kTanh:
          return "tanh";
        case Activation::kSigmoid:
          return "sigmoid";
        case Activation::kGelu:
          return "gelu";
      }
      return "activation";
    }
    std::string operator()(const FlattenSpec&) const { return "flatten"; }
    std::string operator()(const GlobalAvgPoolSpec&) const { return "globalavgpool"; }
    std::string operator()(const BatchNorm2DSpec&) const { return "batchnorm"; }
    std::string operator()(const PadShortcutSpec&) const { return "padshortcut"; }
    std::string operator()(const AddSpec&) const { return "add"; }
    std::string operator()(const EmbeddingSpec&) const { return "embedding"; }
    std::string operator()(const PositionEmbeddingSpec&) const { return "posembedding"; }
    std::string operator()(const LayerNormSpec&) const { return "layernorm"; }
    std::string operator()(const CausalSelfAttentionSpec&) const { return "attention"; }
    std::string operator()(const DropoutSpec&) const { return "dropout"; }
  };
  return std::visit(Names{}, layer);
}

bool has_weights(const LayerSpec& layer) {
  return std::holds_alternative<Conv2DSpec>(layer) || std::holds_alternative<DenseSpec>(layer);
}

// "" on CPU (the names the README and tests use), "/cuda:0" on a GPU.
std::string device_suffix(DeviceKind kind) {
  return kind == DeviceKind::kCpu ? "" : fmt::format("/{}:0", to_string(kind));
}

Tensor random_tensor(Device& device, const Shape& shape, uint64_t stream) {
  Tensor t(device, shape);
  std::vector<float> host(static_cast<size_t>(shape.numel()));
  Rng rng(kSeed, stream);
  for (float& v : host) v = rng.uniform(-1.0f, 1.0f);
  t.copy_from_host(host);
  return t;
}

// A model at batch kBatch on one device with every layer's kernel planned and one forward
// run, so that each layer's input and output hold real values (backward reads them).
struct ModelBench {
  std::unique_ptr<Model> model;  // owns the weight and gradient buffers the kernels bind
  Tensor input;
  std::vector<Tensor> activations;  // activations[i]: output of layer i
  std::vector<std::unique_ptr<LayerKernel>> kernels;
  Tensor dout;  // a random gradient as large as the largest activation
  Tensor din;
  // The optimizer's own parameters and gradients (not the model's, whose weights the layer
  // benchmarks read), made on first use.
  Tensor opt_params;
  Tensor opt_grads;

  const float* layer_input(size_t layer) const {
    return layer == 0 ? input.data() : activations[layer - 1].data();
  }
};

std::unique_ptr<Model> build_model(const std::string& name, Device& device) {
  ModelDef def = make_model(name);
  const Shape input = def.default_input;
  return std::make_unique<Model>(std::move(def), input, device, kSeed);
}

void plan_layers(ModelBench& mb, Device& device) {
  Model& model = *mb.model;
  KernelBackend& kernels = kernel_backend(device.id().kind);
  const std::vector<Shape> shapes = layer_shapes(model.def(), model.input_shape());
  Stream& stream = device.default_stream();
  mb.input = random_tensor(device, model.input_shape().with_batch(kBatch), 0);
  int64_t largest = 0;
  for (size_t layer = 0; layer < model.def().layers.size(); ++layer) {
    LayerBinding binding;
    binding.in = shapes[layer].with_batch(kBatch);
    binding.out = shapes[layer + 1].with_batch(kBatch);
    for (size_t i = 0; i < model.params().size(); ++i) {
      if (model.params()[i].layer != static_cast<int>(layer)) continue;
      binding.params.push_back(model.param(i));
      binding.grads.push_back(model.grad(i));
    }
    mb.kernels.push_back(kernels.make_layer(model.def().layers[layer], binding, device));
    mb.activations.emplace_back(device, binding.out);
    mb.kernels.back()->forward(mb.layer_input(layer), mb.activations.back().data(), stream);
    largest = std::max({largest, binding.in.numel(), binding.out.numel()});
  }
  mb.dout = random_tensor(device, Shape{largest}, 1);
  mb.din = Tensor(device, Shape{largest});
  stream.synchronize();
}

// Two Gloo ranks as threads of this process: rank 0 is the benchmark's own thread (it
// drives the State loop), rank 1 a helper thread that mirrors its collectives.
struct GlooPair {
  std::unique_ptr<CpuDevice> devices[2];
  std::unique_ptr<Communicator> comms[2];
};

// Everything the benchmarks share, built on first use and kept for the run: a model takes
// long to build (mlp-41m draws 41M weights), and Google Benchmark calls a benchmark function
// several times while it settles the iteration count. Owned by main and destroyed before it
// returns, so no device object lives in a static.
class BenchContext {
 public:
  Device& device(DeviceKind kind) {
    std::unique_ptr<Device>& d = devices_[kind];
    if (!d) d = backend(kind).open(0, BackendOptions{});
    return *d;
  }

  // The model alone (weights and gradient buffers): bucket sizes come from it at
  // registration, and the optimizer benchmarks keep their buffers beside it.
  ModelBench& entry(DeviceKind kind, const std::string& name) {
    std::unique_ptr<ModelBench>& mb = models_[{kind, name}];
    if (!mb) {
      auto fresh = std::make_unique<ModelBench>();
      fresh->model = build_model(name, device(kind));
      mb = std::move(fresh);
    }
    return *mb;
  }

  // The model with its layers planned. A failure is remembered, so that every benchmark of
  // the model reports it without building the kernels again.
  ModelBench& planned(DeviceKind kind, const std::string& name) {
    const auto key = std::make_pair(kind, name);
    if (const auto failed = failures_.find(key); failed != failures_.end()) {
      throw_error(failed->second);
    }
    ModelBench& mb = entry(kind, name);
    if (mb.kernels.empty()) {
      try {
        plan_layers(mb, device(kind));
      } catch (const std::exception& e) {
        failures_[key] = e.what();
        mb.kernels.clear();
        mb.activations.clear();
        throw;
      }
    }
    return mb;
  }

  GlooPair& gloo_pair() {
    if (!gloo_) {
      auto pair = std::make_unique<GlooPair>();
      GlooGroup group(2, kCollectiveTimeout);
      std::exception_ptr helper_error;
      std::thread helper([&] {
        try {
          pair->comms[1] = group.connect(1);
        } catch (...) {
          helper_error = std::current_exception();
        }
      });
      try {
        pair->comms[0] = group.connect(0);
      } catch (...) {
        helper.join();
        throw;
      }
      helper.join();
      if (helper_error) std::rethrow_exception(helper_error);
      for (int r = 0; r < 2; ++r) pair->devices[r] = std::make_unique<CpuDevice>(r, 1);
      gloo_ = std::move(pair);
    }
    return *gloo_;
  }
  // After a failed collective a communicator refuses further ones: start a fresh pair.
  void drop_gloo_pair() { gloo_.reset(); }

 private:
  std::map<DeviceKind, std::unique_ptr<Device>> devices_;
  std::map<std::pair<DeviceKind, std::string>, std::unique_ptr<ModelBench>> models_;
  std::map<std::pair<DeviceKind, std::string>, std::string> failures_;
  std::unique_ptr<GlooPair> gloo_;
};

// Runs `f`; an exception becomes this benchmark's error instead of ending the run.
template <class F>
void guarded(benchmark::State& state, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The State loop around `body`, timed as the file comment says.
template <class Body>
void timed_loop(benchmark::State& state, Device& device, Body&& body) {
  Stream& stream = device.default_stream();
  if (device.id().kind == DeviceKind::kCpu) {
    for (auto _ : state) body(stream);
    return;
  }
  const std::unique_ptr<Event> start = device.create_event();
  const std::unique_ptr<Event> stop = device.create_event();
  for (auto _ : state) {
    start->record(stream);
    body(stream);
    stop->record(stream);
    // Once per iteration, outside the work: the stop event must be reached before its time
    // can be read.
    stop->synchronize();
    state.SetIterationTime(stop->elapsed_ms_since(*start) * 1e-3);
  }
}

void layer_benchmark(benchmark::State& state, BenchContext& ctx, DeviceKind kind,
                     const std::string& model_name, size_t layer, bool backward) {
  guarded(state, [&] {
    Device& device = ctx.device(kind);
    device.make_current();
    ModelBench& mb = ctx.planned(kind, model_name);
    LayerKernel& kernel = *mb.kernels.at(layer);
    const float* in = mb.layer_input(layer);
    float* out = mb.activations[layer].data();
    // Layer 0's input gradient is never computed in training (nothing to pass it to).
    float* din = layer == 0 ? nullptr : mb.din.data();
    if (backward) {
      timed_loop(state, device,
                 [&](Stream& stream) { kernel.backward(in, out, mb.dout.data(), din, stream); });
    } else {
      timed_loop(state, device, [&](Stream& stream) { kernel.forward(in, out, stream); });
    }
    const LayerSpec& spec = mb.model->def().layers[layer];
    const std::vector<Shape> shapes = layer_shapes(mb.model->def(), mb.model->input_shape());
    // FLOPs as reports count them: forward_flops per sample; a weighted layer's backward
    // does the forward's multiply-adds once for the weight gradient and once more for the
    // input gradient (when one is wanted).
    double flops = static_cast<double>(forward_flops(spec, shapes[layer]) * kBatch);
    if (backward) flops = has_weights(spec) ? flops * (din != nullptr ? 2.0 : 1.0) : 0.0;
    if (flops > 0) {
      state.counters["FLOPS"] =
          benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    }
    state.SetItemsProcessed(state.iterations() * kBatch);  // samples per second
  });
}

void optimizer_benchmark(benchmark::State& state, BenchContext& ctx, DeviceKind kind,
                         const std::string& model_name, OptimizerKind optimizer) {
  guarded(state, [&] {
    Device& device = ctx.device(kind);
    device.make_current();
    ModelBench& mb = ctx.entry(kind, model_name);
    const int64_t n = mb.model->param_count();
    if (mb.opt_params.numel() != n) {
      mb.opt_params = random_tensor(device, Shape{n}, 2);
      mb.opt_grads = random_tensor(device, Shape{n}, 3);
    }
    OptimizerConfig config;
    config.kind = optimizer;
    config.momentum = optimizer == OptimizerKind::kSgd ? 0.9f : 0.0f;
    const std::unique_ptr<OptimizerKernel> kernel =
        kernel_backend(kind).make_optimizer(config, n, device);
    int64_t step = 0;
    timed_loop(state, device, [&](Stream& stream) {
      kernel->update(mb.opt_params.data(), mb.opt_grads.data(), config.lr, ++step, stream);
    });
    // Memory traffic per update: parameters read and written, gradients read, and each
    // state tensor read and written.
    const auto tensors_touched = static_cast<int64_t>(3 + 2 * optimizer_state_names(config).size());
    state.SetBytesProcessed(state.iterations() * n * tensors_touched *
                            static_cast<int64_t>(sizeof(float)));
    state.SetItemsProcessed(state.iterations() * n);  // parameters per second
  });
}

// One rank's side of the all-reduce benchmark. Per iteration: a barrier (so the time is the
// collective's, not a rank waiting for the other to arrive), the all-reduce between two
// events on the rank's stream, then an all_gather of both ranks' times, of which the slower
// one is the collective's (nccl-tests' policy). Rank 0 hands it to `state`.
void all_reduce_rank(Communicator& comm, Device& device, int64_t bytes, int64_t iterations,
                     benchmark::State* state) {
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
  DeviceBuffer buffer(device, static_cast<size_t>(bytes));
  auto* data = static_cast<float*>(buffer.data());
  Stream& stream = device.default_stream();
  // Zeros: summed in place again and again they stay zeros (no overflow, no denormals).
  device.fill_zero(data, static_cast<size_t>(bytes), stream);
  const std::unique_ptr<Event> start = device.create_event();
  const std::unique_ptr<Event> stop = device.create_event();
  const auto one = [&] {
    stream.synchronize();
    comm.barrier();
    start->record(stream);
    comm.all_reduce(data, count, ReduceOp::kSum, stream);
    stop->record(stream);
    stop->synchronize();
    const double mine[1] = {stop->elapsed_ms_since(*start)};
    const std::vector<double> all = comm.all_gather(mine);
    return *std::max_element(all.begin(), all.end()) * 1e-3;
  };
  if (state != nullptr) {
    for (auto _ : *state) state->SetIterationTime(one());
  } else {
    for (int64_t i = 0; i < iterations; ++i) one();
  }
}

void all_reduce_benchmark(benchmark::State& state, BenchContext& ctx, int64_t bytes) {
  guarded(state, [&] {
    GlooPair& pair = ctx.gloo_pair();
    // Google Benchmark runs exactly max_iterations iterations unless an error stops it;
    // rank 1 runs as many collectives.
    const int64_t iterations = state.max_iterations;
    std::exception_ptr helper_error;
    std::thread helper([&] {
      try {
        all_reduce_rank(*pair.comms[1], *pair.devices[1], bytes, iterations, nullptr);
      } catch (...) {
        helper_error = std::current_exception();
      }
    });
    try {
      all_reduce_rank(*pair.comms[0], *pair.devices[0], bytes, iterations, &state);
    } catch (...) {
      // Rank 1 fails too once its collectives find no partner (at the latest after the
      // timeout); both communicators are unusable from here.
      helper.join();
      ctx.drop_gloo_pair();
      throw;
    }
    helper.join();
    if (helper_error) {
      ctx.drop_gloo_pair();
      std::rethrow_exception(helper_error);
    }
    constexpr int kRanks = 2;
    state.SetBytesProcessed(state.iterations() * bytes);  // algorithm bandwidth
    state.counters["busbw"] = benchmark::Counter(
        static_cast<double>(bytes) * 2.0 * (kRanks - 1) / kRanks,
        benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  });
}

void set_timing(benchmark::internal::Benchmark* b, DeviceKind kind) {
  if (kind == DeviceKind::kCpu) {
    b->UseRealTime();
  } else {
    b->UseManualTime();
  }
  b->Unit(benchmark::kMicrosecond);
}

std::vector<DeviceKind> device_kinds() {
  std::vector<DeviceKind> kinds{DeviceKind::kCpu};
  for (Backend* b : backends()) {
    if (b->kind() != DeviceKind::kCpu && b->device_count() > 0) kinds.push_back(b->kind());
  }
  return kinds;
}

void register_benchmarks(BenchContext& ctx) {
  for (const DeviceKind kind : device_kinds()) {
    const std::string suffix = device_suffix(kind);
    for (const std::string model : kModels) {
      const ModelDef def = make_model(model);
      for (size_t layer = 0; layer < def.layers.size(); ++layer) {
        for (const bool backward : {false, true}) {
          const std::string name = fmt::format("layer/{}/{}:{}/{}/batch:{}{}", model, layer,
                                               layer_kind(def.layers[layer]),
                                               backward ? "backward" : "forward", kBatch, suffix);
          set_timing(benchmark::RegisterBenchmark(
                         name.c_str(),
                         [&ctx, kind, model, layer, backward](benchmark::State& state) {
                           layer_benchmark(state, ctx, kind, model, layer, backward);
                         }),
                     kind);
        }
      }
      const int64_t params = summarize(def, def.default_input).params;
      for (const OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
        const std::string name =
            fmt::format("optimizer/{}/{}/params:{}{}", model, to_string(optimizer), params, suffix);
        set_timing(
            benchmark::RegisterBenchmark(name.c_str(),
                                         [&ctx, kind, model, optimizer](benchmark::State& state) {
                                           optimizer_benchmark(state, ctx, kind, model, optimizer);
                                         }),
            kind);
      }
    }
  }
  // Gloo between CPU ranks; NCCL all-reduce benchmarks come with the NCCL communicator.
  const TrainOptions defaults;
  // MiB, as the trainer converts its --bucket-cap-mb.
  const auto mb = [](double v) { return static_cast<int64_t>(std::llround(v * 1024 * 1024)); };
  for (const std::string model : kModels) {
    const std::vector<Bucket> buckets =
        plan_buckets(*ctx.entry(DeviceKind::kCpu, model).model, mb(defaults.bucket_cap_mb),
                     mb(defaults.first_bucket_mb));
    for (size_t k = 0; k < buckets.size(); ++k) {
      const int64_t bytes = buckets[k].bytes();
      const std::string name =
          fmt::format("allreduce/gloo/ranks:2/{}/bucket:{}/bytes:{}", model, k, bytes);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [&ctx, bytes](benchmark::State& state) { all_reduce_benchmark(state, ctx, bytes); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// google/benchmark's context block, with what makes scalescope numbers comparable.
void add_context(const std::string& command_line) {
  const Environment env = capture_environment(command_line);
  benchmark::AddCustomContext("scalescope_git_commit",
                              env.build.git_commit + (env.build.git_dirty ? " (dirty)" : ""));
  benchmark::AddCustomContext("scalescope_build_type", env.build.build_type);
  benchmark::AddCustomContext("scalescope_with_cuda", env.build.with_cuda ? "true" : "false");
  benchmark::AddCustomContext("cpu_model", env.host.cpu_model);
  benchmark::AddCustomContext("onednn", env.libraries.onednn);
  benchmark::AddCustomContext("gloo", env.libraries.gloo);
  if (!env.libraries.cuda_runtime.empty()) {
    benchmark::AddCustomContext("cuda_runtime", env.libraries.cuda_runtime);
  }
  benchmark::AddCustomContext("batch", std::to_string(kBatch));
}

}  // namespace
}  // namespace scalescope::bench

int main(int argc, char** argv) {
  using namespace scalescope::bench;
  std::vector<char*> args(argv, argv + argc);
  bool min_time_given = false;
  std::string command_line = "scalescope-bench";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    min_time_given = min_time_given || a.starts_with("--benchmark_min_time");
    if (a == "--help" || a == "-h") std::fputs(kHelp, stdout);
    command_line += ' ';
    command_line += a;
  }
  // A short run unless asked otherwise (Google Benchmark's own default is 0.5 s each).
  std::string min_time = fmt::format("--benchmark_min_time={}", kDefaultMinTime);
  if (!min_time_given) args.insert(args.begin() + 1, min_time.data());
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  try {
    BenchContext ctx;
    add_context(command_line);
    register_benchmarks(ctx);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    // Only setup can get here (registration); a benchmark's own failure is its error.
    std::fprintf(stderr, "scalescope-bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
