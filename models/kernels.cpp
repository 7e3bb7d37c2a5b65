// The registration place of the kernel backends: the only code of models that asks which
// backends this build has.
#include "models/kernels.h"

#include <algorithm>
#include <atomic>

#include "core/check.h"
#include "core/enum_names.h"
#include "models/cpu/cpu_kernels.h"
#include "models/sim/sim_kernels.h"
#if SCALESCOPE_WITH_CUDA
#include "models/cuda/cuda_kernels.h"
#endif

namespace scalescope {
namespace {

// A plain flag, no CUDA object: read by kernel constructors on replica threads while the CLI
// may set it on the main thread, hence atomic.
std::atomic<Precision>& precision_flag() {
  static std::atomic<Precision> precision{Precision::kTf32};
  return precision;
}

constexpr auto kDeterminismNames = enum_names<Determinism>("preferred", "required", "off");
constexpr auto kConvSearchNames = enum_names<ConvSearch>("heuristic", "benchmark");

std::atomic<Determinism>& determinism_flag() {
  static std::atomic<Determinism> determinism{Determinism::kPreferred};
  return determinism;
}

std::atomic<ConvSearch>& conv_search_flag() {
  static std::atomic<ConvSearch> search{ConvSearch::kHeuristic};
  return search;
}

std::vector<std::unique_ptr<KernelBackend>> make_kernel_backends() {
  std::vector<std::unique_ptr<KernelBackend>> list;
  list.push_back(std::make_unique<CpuKernelBackend>());
  list.push_back(std::make_unique<SimKernelBackend>());
#if SCALESCOPE_WITH_CUDA
  list.push_back(std::make_unique<CudaKernelBackend>());
#endif
  return list;
}

// Stateless dispatchers: the CUDA one holds no handle either (handles belong to the kernels it
// makes), so nothing of CUDA outlives main through this static.
const BackendRegistry<KernelBackend>& registry() {
  static const BackendRegistry<KernelBackend> table(make_kernel_backends());
  return table;
}

}  // namespace

void set_precision(Precision precision) {
  precision_flag().store(precision, std::memory_order_relaxed);
}

Precision precision() {
  return precision_flag().load(std::memory_order_relaxed);
}

bool allow_tf32() {
  return precision() == Precision::kTf32;
}

std::optional<kernel_math::HalfFormat> half_format(Precision precision) {
  if (precision == Precision::kBf16) return kernel_math::HalfFormat::kBf16;
  if (precision == Precision::kFp16) return kernel_math::HalfFormat::kFp16;
  return std::nullopt;
}

bool KernelBackend::has_tf32() const {
  const std::vector<Precision> all = precisions();
  return std::find(all.begin(), all.end(), Precision::kTf32) != all.end();
}

std::string to_string(Determinism determinism) {
  return std::string(kDeterminismNames(determinism));
}

void set_determinism(Determinism determinism) {
  determinism_flag().store(determinism, std::memory_order_relaxed);
}

Determinism determinism() {
  return determinism_flag().load(std::memory_order_relaxed);
}

std::string to_string(ConvSearch search) {
  return std::string(kConvSearchNames(search));
}

ConvSearch parse_conv_search(const std::string& name) {
  const std::optional<ConvSearch> search = kConvSearchNames.parse(name);
  SS_CHECK_INPUT(search.has_value(), "convolution algorithm search '{}': unknown; use {}", name,
                 kConvSearchNames.accepted());
  return *search;
}

std::vector<std::string> conv_search_names() {
  const auto& names = kConvSearchNames.names();
  return {names.begin(), names.end()};
}

void set_conv_search(ConvSearch search) {
  conv_search_flag().store(search, std::memory_order_relaxed);
}

ConvSearch conv_search() {
  return conv_search_flag().load(std::memory_order_relaxed);
}

const std::vector<KernelBackend*>& kernel_backends() {
  return registry().all();
}

KernelBackend& kernel_backend(DeviceKind kind) {
  return registry().get(kind);
}

void accumulate_into(float* acc, const float* grads, int64_t count, bool first, Stream& stream) {
  SS_CHECK(count >= 0, "accumulating {} gradients", count);
  kernel_backend(stream.device().id().kind).accumulate(acc, grads, count, first, stream);
}

void add_into(float* out, const float* a, const float* b, int64_t count, bool relu, Stream& stream,
              const kernel_math::HalfRow& saved) {
  SS_CHECK(count >= 0, "adding {} values", count);
  kernel_backend(stream.device().id().kind).add(out, a, b, count, relu, saved, stream);
}

void accumulate_relu_gradient_into(float* acc, const float* grads,
                                   const kernel_math::ReluOutput& relu_output, int64_t count,
                                   bool first, Stream& stream) {
  SS_CHECK(count >= 0, "accumulating {} gradients", count);
  kernel_backend(stream.device().id().kind)
      .accumulate_relu_gradient(acc, grads, relu_output, count, first, stream);
}

void compress_gradients(const float* grads, uint16_t* half, int64_t count, int replicas,
                        kernel_math::HalfFormat format, Stream& stream) {
  SS_CHECK(count >= 0 && replicas >= 1, "compressing {} gradients of {} replicas", count, replicas);
  kernel_backend(stream.device().id().kind).compress(grads, half, count, replicas, format, stream);
}

void decompress_gradients(const uint16_t* half, float* grads, int64_t count,
                          kernel_math::HalfFormat format, Stream& stream) {
  SS_CHECK(count >= 0, "decompressing {} gradients", count);
  kernel_backend(stream.device().id().kind).decompress(half, grads, count, format, stream);
}

void squared_norm(const float* values, int64_t count, double* out, Stream& stream) {
  SS_CHECK(count >= 0, "the squared norm of {} values", count);
  kernel_backend(stream.device().id().kind).squared_norm(values, count, out, stream);
}

void unscale_gradients(float* grads, int64_t count, float inv_scale, float* found_inf,
                       Stream& stream) {
  SS_CHECK(count >= 0, "unscaling {} gradients", count);
  kernel_backend(stream.device().id().kind).unscale(grads, count, inv_scale, found_inf, stream);
}

void check_layer_binding(const LayerSpec& spec, const LayerBinding& b) {
  SS_CHECK(b.in.rank() >= 2 && b.out.rank() >= 2 && b.in[0] > 0 && b.in[0] == b.out[0],
           "{}: binding shapes {} -> {} need the same positive batch dimension", describe(spec),
           b.in.to_string(), b.out.to_string());
  const Shape expected = output_shape(spec, b.in.without_batch());
  SS_CHECK(expected == b.out.without_batch(), "{}: bound to output {} but produces {} per sample",
           describe(spec), b.out.to_string(), expected.to_string());
  const std::vector<ParamSpec> params = param_specs(spec, b.in.without_batch());
  SS_CHECK(b.params.size() == params.size() && b.grads.size() == params.size(),
           "{}: bound to {} parameters and {} gradients, takes {}", describe(spec), b.params.size(),
           b.grads.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    SS_CHECK(b.params[i].shape == params[i].shape && b.grads[i].shape == params[i].shape &&
                 !b.params[i].empty() && !b.grads[i].empty(),
             "{}: {} bound as {} (gradient {}), expected {}", describe(spec), params[i].suffix,
             b.params[i].shape.to_string(), b.grads[i].shape.to_string(),
             params[i].shape.to_string());
  }
  const std::vector<ParamSpec> buffers = buffer_specs(spec, b.in.without_batch());
  SS_CHECK(b.buffers.size() == buffers.size(), "{}: bound to {} buffers, takes {}", describe(spec),
           b.buffers.size(), buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    SS_CHECK(b.buffers[i].shape == buffers[i].shape && !b.buffers[i].empty(),
             "{}: {} bound as {}, expected {}", describe(spec), buffers[i].suffix,
             b.buffers[i].shape.to_string(), buffers[i].shape.to_string());
  }
  SS_CHECK(b.sync.valid(), "{}: bound as replica {} of {} synchronized replicas", describe(spec),
           b.sync.rank, b.sync.replicas);
  SS_CHECK(!std::holds_alternative<AddSpec>(spec),
           "{}: a node of two inputs, computed by the model rather than a layer kernel",
           describe(spec));
}

}  // namespace scalescope
