// The oneDNN side the CPU layer kernels of cpu_weighted.cpp and cpu_unary.cpp share: a primitive
// bound to its arguments once (Call), and the base class holding the engine, the stream, the
// attributes, the memory a kernel owns and the copies its primitives read (DnnlKernel).
#pragma once

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/error.h"
#include "models/cpu/cpu_kernels.h"
#include "models/kernels.h"

namespace scalescope::cpu_dnnl {

using dnnl::memory;

// fp16 (simulated devices only, KernelBackend::precisions): oneDNN 2.6 has no fp16 kernels for
// CPUs, so the fp32 primitives read copies of their operands rounded to fp16 values. Products
// of fp16 values are exact in fp32, so this is fp16 multiplication with fp32 accumulation, and
// an operand beyond fp16's range becomes infinity, as on a GPU.
inline bool emulates_fp16() {
  return precision() == Precision::kFp16;
}

inline memory::desc f32_desc(const memory::dims& dims, memory::format_tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}

// An image batch [N, H, W, C] as oneDNN's logical dims (N, C, H, W); the nhwc tag below
// says the memory itself is channels-last.
inline memory::dims image_dims(const Shape& nhwc) {
  return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}

inline void set_handle(const memory& m, const float* data) {
  // oneDNN takes void* for inputs and outputs alike; inputs are only read.
  m.set_data_handle(const_cast<float*>(data));
}

// oneDNN's algorithm for an activation. As a layer of its own, the *_use_dst_for_bwd form:
// its backward reads the output, which the model keeps. As a post-op (a fused activation,
// LayerBinding::activation), the plain form of the same function. GELU has none: it runs in
// our own loops, and is never fused, as fusing never writes the input its backward needs.
inline dnnl::algorithm eltwise_algorithm(Activation kind, bool post_op) {
  using dnnl::algorithm;
  switch (kind) {
    case Activation::kRelu:
      return post_op ? algorithm::eltwise_relu : algorithm::eltwise_relu_use_dst_for_bwd;
    case Activation::kTanh:
      return post_op ? algorithm::eltwise_tanh : algorithm::eltwise_tanh_use_dst_for_bwd;
    case Activation::kSigmoid:
      return post_op ? algorithm::eltwise_logistic : algorithm::eltwise_logistic_use_dst_for_bwd;
    case Activation::kGelu:
      break;  // our own loops (cpu_gelu.cpp), never fused
  }
  throw_error(fmt::format("no oneDNN algorithm for activation {}", static_cast<int>(kind)));
}

// One primitive with its arguments bound once. Running passes the stored C handles straight
// to dnnl_primitive_execute, so a step builds no argument map (the C++ execute() allocates
// one per call). The memory objects are shared handles: `keep_` keeps them alive, and the
// kernel re-points them at new buffers between runs.
class Call {
 public:
  Call() = default;
  // `dirties_vectors`: the primitive was planned under bf16, whose oneDNN kernels leave the
  // vector registers' upper halves dirty (clear_vector_upper_halves).
  Call(dnnl::primitive primitive, std::vector<std::pair<int, memory>> args,
       bool dirties_vectors = false)
      : primitive_(std::move(primitive)), dirties_vectors_(dirties_vectors) {
    for (auto& [arg, mem] : args) {
      args_.push_back(dnnl_exec_arg_t{arg, mem.get()});
      keep_.push_back(std::move(mem));
    }
  }
  // A pass of our own in place of a primitive (emulated fp16's rounding).
  explicit Call(std::function<void(const dnnl::stream&)> pass) : pass_(std::move(pass)) {}

  explicit operator bool() const { return static_cast<bool>(primitive_) || pass_ != nullptr; }

  void run(const dnnl::stream& stream) const {
    if (pass_) {
      pass_(stream);
      return;
    }
    SS_CHECK_DNNL(dnnl::error::wrap_c_api(
        dnnl_primitive_execute(primitive_.get(), stream.get(), static_cast<int>(args_.size()),
                               args_.data()),
        "could not execute a primitive"));
    // The CPU engine runs with OpenMP: execution is synchronous on the calling thread, so
    // there is nothing to wait for and the device's (inline) stream order holds.
    if (dirties_vectors_) clear_vector_upper_halves();
  }

 private:
  dnnl::primitive primitive_;
  std::vector<dnnl_exec_arg_t> args_;
  std::vector<memory> keep_;
  std::function<void(const dnnl::stream&)> pass_;
  bool dirties_vectors_ = false;
};

// What every oneDNN layer kernel holds: an engine, a stream, the attributes all its
// primitives are created with, and the memory it owns.
class DnnlKernel : public LayerKernel {
 protected:
  explicit DnnlKernel(Device& device)
      : device_(device), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), attr_(new_attr()) {}

  // The attributes every primitive is created with: a user scratchpad, allocated once at
  // construction (the library's own is allocated, and grown, while primitives execute).
  // A new object each time: copies of a primitive_attr share one.
  static dnnl::primitive_attr new_attr() {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  }

  // A memory object the caller's buffers are bound to on every call.
  memory unbound(const memory::desc& desc) const { return memory(desc, engine_, DNNL_MEMORY_NONE); }
  // A memory object whose buffer this kernel owns.
  memory owned(const memory::desc& desc) {
    owned_.emplace_back(device_, desc.get_size());
    return memory(desc, engine_, owned_.back().data());
  }
  // A memory object for a copy needed only within one pass (an operand's 16-bit copy): in the
  // binding's transient pool when there is one (use_pool; bound at each pass by
  // bind_pass_local), else owned here.
  memory pass_local(const memory::desc& desc) {
    if (!pool_) return owned(desc);
    pass_local_.emplace_back(unbound(desc), pass_local_bytes_);
    pass_local_bytes_ += (desc.get_size() + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment;
    pool_->reserve(pass_local_bytes_);
    return pass_local_.back().first;
  }
  void use_pool(std::shared_ptr<TransientPool> pool) { pool_ = std::move(pool); }
  bool pooled() const { return pool_ != nullptr; }
  // At the start of each pass: the pass-local copies into the pool, which the model allocated
  // after this kernel was made.
  void bind_pass_local() const {
    for (const auto& [m, offset] : pass_local_) {
      m.set_data_handle(static_cast<char*>(pool_->data()) + offset);
    }
  }
  // A memory object over an external buffer fixed for the kernel's life (parameters).
  memory over(const memory::desc& desc, const float* data) const {
    return memory(desc, engine_, const_cast<float*>(data));
  }

  // A primitive of `pd` bound to `args` and, when it needs one, to the shared scratchpad.
  template <class Primitive, class Pd>
  Call plan(const Pd& pd, std::vector<std::pair<int, memory>> args) {
    const memory::desc scratch = pd.scratchpad_desc();
    if (scratch.get_size() > 0) {
      scratchpads_.push_back(unbound(scratch));
      args.emplace_back(DNNL_ARG_SCRATCHPAD, scratchpads_.back());
    }
    return Call(Primitive(pd), std::move(args), precision() == Precision::kBf16);
  }

  Call reorder(const memory& from, const memory& to) {
    const dnnl::reorder::primitive_desc pd(engine_, from.get_desc(), engine_, to.get_desc(), attr_);
    return plan<dnnl::reorder>(pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }

  // `user` is a parameter (or gradient) in PyTorch's layout and a primitive wants `wanted`.
  // Returns the memory the primitive should use: `user` itself when the layouts agree, else
  // a copy owned here, with `copy` set to the reorder user → copy (`into_primitive`, for
  // weights) or copy → user (for gradients).
  // `local`: the copy is needed only within the pass that makes it (pass_local).
  memory adopt(const memory& user, const memory::desc& wanted, bool into_primitive, Call& copy,
               bool local = false) {
    if (wanted == user.get_desc()) return user;
    memory internal = local ? pass_local(wanted) : owned(wanted);
    copy = into_primitive ? reorder(user, internal) : reorder(internal, user);
    return internal;
  }

  // What a convolution or matrix product reads of `user` (an input, weights, an output
  // gradient): adopt()'s copy, or under emulated fp16 always a copy of this kernel's, which
  // `copy` fills (reordered where the layouts differ) and rounds to fp16 values.
  memory adopt_operand(const memory& user, const memory::desc& wanted, Call& copy,
                       bool local = false) {
    if (!emulates_fp16()) return adopt(user, wanted, true, copy, local);
    memory internal = local ? pass_local(wanted) : owned(wanted);
    Call layout = wanted == user.get_desc() ? Call() : reorder(user, internal);
    const auto n = static_cast<int64_t>(wanted.get_size() / sizeof(float));
    copy = Call([layout = std::move(layout), user, internal, n](const dnnl::stream& stream) {
      auto* out = static_cast<float*>(internal.get_data_handle());
      const float* in = out;
      if (layout) {
        layout.run(stream);
      } else {
        in = static_cast<const float*>(user.get_data_handle());  // re-pointed between runs
      }
      round_to_fp16_cpu(in, out, n);
    });
    return internal;
  }

  // Allocates the scratchpad shared by the primitives planned so far (they run one after
  // another, never at once): with a pool, in it as one more pass-local region (what the
  // scratchpads hold lasts one primitive, so the model's kernels share that memory too), else
  // owned. REQUIRES: called once, at the end of the constructor.
  void allocate_scratchpad() {
    size_t bytes = 0;
    for (const memory& m : scratchpads_) bytes = std::max(bytes, m.get_desc().get_size());
    if (bytes == 0) return;
    if (pool_) {
      pass_local(memory::desc({static_cast<int64_t>(bytes)}, memory::data_type::u8,
                              memory::format_tag::a));
      const size_t offset = pass_local_.back().second;
      for (const memory& m : scratchpads_) pass_local_.emplace_back(m, offset);
      return;
    }
    scratch_buffer_ = DeviceBuffer(device_, bytes);
    for (const memory& m : scratchpads_) m.set_data_handle(scratch_buffer_.data());
  }

  Device& device_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::primitive_attr attr_;

 private:
  static constexpr size_t kPoolAlignment = 64;  // bytes: a cache line, as oneDNN aligns
  std::vector<DeviceBuffer> owned_;
  std::shared_ptr<TransientPool> pool_;
  std::vector<std::pair<memory, size_t>> pass_local_;  // and their offsets in the pool
  size_t pass_local_bytes_ = 0;
  std::vector<memory> scratchpads_;
  DeviceBuffer scratch_buffer_;
};

}  // namespace scalescope::cpu_dnnl
