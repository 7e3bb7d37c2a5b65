// CPU optimizers: one fused pass over the flat parameter buffer.
//
// The update is memory-bound (a 41M-parameter model moves ~0.5 GB per Adam step and does a
// handful of flops per byte), so each kernel reads every parameter, gradient and state value
// exactly once and writes each once: no temporaries, no second pass, every scalar that does
// not depend on the element (bias corrections) computed once per step in double. The loops are
// element-wise, so their results do not depend on the thread count or the vector width.
//
// The arithmetic follows PyTorch's single-tensor implementations (torch.optim.SGD, Adam with
// foreach=False) operation by operation, so the two agree to rounding.
#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/in_shares.h"
#include "models/cpu/prefetch.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/optimizer_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// Below this many parameters the update runs on the calling thread (tests, tiny models).
constexpr int64_t kParallelMinParams = int64_t{1} << 15;

Tensor zeroed_state(Device& device, int64_t n) {
  Tensor t(device, Shape{n});
  device.fill_zero(t.data(), t.bytes(), device.default_stream());
  return t;
}

// Adam over n values (kernel_math's adam_step, PyTorch's order of operations), in a vector
// clone (vector_clones.h) of a file compiled without contraction: each value's bits whatever
// the vector width or the threads' shares, and the CUDA kernel's. The AVX-512 clone runs the
// two divisions and the square root 16 values at a time; std::experimental::simd's native
// width, which this loop was written in before, is the baseline's SSE, 4. The scalars come by
// value: read through a reference, they would be reloaded after every store (w, m or v might
// alias them), which cost ~20% of the step.
SCALESCOPE_VECTOR_CLONES void adam_span(float* __restrict__ w, const float* __restrict__ g,
                                        float* __restrict__ m, float* __restrict__ v, int64_t n,
                                        const km::AdamScalars s) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const km::AdamStep next = km::adam_step(w[i], g[i], m[i], v[i], s);
          w[i] = next.w;
          m[i] = next.m;
          v[i] = next.v;
        }
      },
      w, g, m, v);
}

// SGD over n values, without and with momentum (kernel_math's sgd_step and sgd_momentum_step),
// as Adam's span: in vector clones, the inputs fetched ahead. v starts at zero, so the first
// step gives v = g' as PyTorch's clone of the gradient.
SCALESCOPE_VECTOR_CLONES void sgd_span(float* __restrict__ w, const float* __restrict__ g,
                                       int64_t n, float lr, float wd) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) w[i] = km::sgd_step(w[i], g[i], lr, wd);
      },
      w, g);
}
SCALESCOPE_VECTOR_CLONES void sgd_momentum_span(float* __restrict__ w, const float* __restrict__ g,
                                                float* __restrict__ v, int64_t n, float lr,
                                                float wd, float momentum) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const km::SgdMomentumStep next =
              km::sgd_momentum_step(w[i], g[i], v[i], lr, wd, momentum);
          w[i] = next.w;
          v[i] = next.v;
        }
      },
      w, g, v);
}

// f(begin, end) over a contiguous share of [0, n) on each of `threads` threads (on the calling
// thread alone below kParallelMinParams).
template <class F>
void in_shares(int64_t n, int threads, const F& f) {
  cpu_shares::in_shares(n, f, threads, n >= kParallelMinParams);
}

class CpuSgd final : public OptimizerKernel {
 public:
  CpuSgd(const OptimizerConfig& config, int64_t n, Device& device)
      : config_(config),
        n_(n),
        threads_(device.threads()),
        // Without momentum there is no state (PyTorch keeps none either).
        momentum_(config.momentum > 0.0f ? zeroed_state(device, n) : Tensor()) {}

  void update(float* params, const float* grads, float lr, int64_t, Stream&) override {
    if (skips()) return;
    const float wd = config_.weight_decay;
    float* v = config_.momentum > 0.0f ? momentum_.data() : nullptr;
    const float momentum = config_.momentum;
    in_shares(n_, threads_, [&](int64_t begin, int64_t end) {
      if (v != nullptr) {
        sgd_momentum_span(params + begin, grads + begin, v + begin, end - begin, lr, wd, momentum);
      } else {
        sgd_span(params + begin, grads + begin, end - begin, lr, wd);
      }
    });
  }

  std::vector<TensorView> state() const override {
    if (config_.momentum > 0.0f) return {momentum_.view()};
    return {};
  }

 private:
  OptimizerConfig config_;
  int64_t n_;
  int threads_;
  Tensor momentum_;
};

class CpuAdam final : public OptimizerKernel {
 public:
  CpuAdam(const OptimizerConfig& config, int64_t n, Device& device)
      : config_(config),
        n_(n),
        threads_(device.threads()),
        exp_avg_(zeroed_state(device, n)),
        exp_avg_sq_(zeroed_state(device, n)) {}

  void update(float* params, const float* grads, float lr, int64_t step, Stream&) override {
    SS_CHECK(step >= 1, "Adam step {} must count from 1", step);
    if (skips()) return;
    const km::AdamScalars scalars = km::adam_scalars(lr, step, config_.weight_decay, config_.beta1,
                                                     config_.beta2, config_.epsilon);
    float* m = exp_avg_.data();
    float* v = exp_avg_sq_.data();
    in_shares(n_, threads_, [&](int64_t begin, int64_t end) {
      adam_span(params + begin, grads + begin, m + begin, v + begin, end - begin, scalars);
    });
  }

  std::vector<TensorView> state() const override { return {exp_avg_.view(), exp_avg_sq_.view()}; }

 private:
  OptimizerConfig config_;
  int64_t n_;
  int threads_;
  Tensor exp_avg_;
  Tensor exp_avg_sq_;
};

}  // namespace

std::unique_ptr<OptimizerKernel> make_cpu_optimizer(const OptimizerConfig& config, int64_t n,
                                                    Device& device) {
  SS_CHECK(n >= 0, "optimizer over {} parameters", n);
  if (config.kind == OptimizerKind::kSgd) return std::make_unique<CpuSgd>(config, n, device);
  return std::make_unique<CpuAdam>(config, n, device);
}

}  // namespace scalescope
