// The check-macro family: each wraps a call into one library and turns a failure into a
// scalescope::Error carrying the expression, file:line, the library's message and the rank.
// A macro expands only where its library's headers are included, so this header includes
// none of them. The *_LOG variants are for destructors: they log and never throw.
#pragma once

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

// A condition of ours; the message is fmt-formatted.
#define SS_CHECK(cond, ...)                                             \
  do {                                                                  \
    if (!(cond)) ::scalescope::throw_error(::fmt::format(__VA_ARGS__)); \
  } while (0)

// A condition on the user's input (a file or directory named on the command line): a
// UsageError, which reads without the source line (--verbose adds it).
#define SS_CHECK_INPUT(cond, ...)                                             \
  do {                                                                        \
    if (!(cond)) ::scalescope::throw_usage_error(::fmt::format(__VA_ARGS__)); \
  } while (0)

#define SS_DETAIL_THROW(lib, expr, msg) throw ::scalescope::Error(lib, expr, msg)
#define SS_DETAIL_LOG(lib, expr, msg) \
  SS_LOG_ERROR("{} error: {} (in `{}`) at {}:{}", lib, msg, expr, __FILE__, __LINE__)

#define SS_DETAIL_CUDA(expr, on_fail)                                                              \
  do {                                                                                             \
    const cudaError_t ss_status_ = (expr);                                                         \
    if (ss_status_ != cudaSuccess) {                                                               \
      on_fail(                                                                                     \
          "CUDA", #expr,                                                                           \
          ::fmt::format("{} ({})", cudaGetErrorString(ss_status_), cudaGetErrorName(ss_status_))); \
    }                                                                                              \
  } while (0)
#define SS_CHECK_CUDA(expr) SS_DETAIL_CUDA(expr, SS_DETAIL_THROW)
#define SS_CHECK_CUDA_LOG(expr) SS_DETAIL_CUDA(expr, SS_DETAIL_LOG)
// After every kernel launch.
#define SS_CHECK_LAUNCH() SS_CHECK_CUDA(cudaGetLastError())

#define SS_DETAIL_CUDNN(expr, on_fail)                                               \
  do {                                                                               \
    const cudnnStatus_t ss_status_ = (expr);                                         \
    if (ss_status_ != CUDNN_STATUS_SUCCESS) {                                        \
      on_fail("cuDNN", #expr, ::fmt::format("{}", cudnnGetErrorString(ss_status_))); \
    }                                                                                \
  } while (0)
#define SS_CHECK_CUDNN(expr) SS_DETAIL_CUDNN(expr, SS_DETAIL_THROW)
#define SS_CHECK_CUDNN_LOG(expr) SS_DETAIL_CUDNN(expr, SS_DETAIL_LOG)

#define SS_DETAIL_CUBLAS(expr, on_fail)                                   \
  do {                                                                    \
    const cublasStatus_t ss_status_ = (expr);                             \
    if (ss_status_ != CUBLAS_STATUS_SUCCESS) {                            \
      on_fail("cuBLAS", #expr,                                            \
              ::fmt::format("{} ({})", cublasGetStatusString(ss_status_), \
                            cublasGetStatusName(ss_status_)));            \
    }                                                                     \
  } while (0)
#define SS_CHECK_CUBLAS(expr) SS_DETAIL_CUBLAS(expr, SS_DETAIL_THROW)
#define SS_CHECK_CUBLAS_LOG(expr) SS_DETAIL_CUBLAS(expr, SS_DETAIL_LOG)

#define SS_DETAIL_NCCL(expr, on_fail)                                                     \
  do {                                                                                    \
    const ncclResult_t ss_status_ = (expr);                                               \
    if (ss_status_ != ncclSuccess) {                                                      \
      on_fail("NCCL", #expr,                                                              \
              ::fmt::format("{} (last: {})", ncclGetErrorString(ss_status_),              \
                            ncclGetLastError(nullptr) ? ncclGetLastError(nullptr) : "")); \
    }                                                                                     \
  } while (0)
#define SS_CHECK_NCCL(expr) SS_DETAIL_NCCL(expr, SS_DETAIL_THROW)
#define SS_CHECK_NCCL_LOG(expr) SS_DETAIL_NCCL(expr, SS_DETAIL_LOG)

// oneDNN and Gloo report failures by exception; translate them into ours.
#define SS_DETAIL_CATCHING(lib, exc_type, what, expr, on_fail) \
  do {                                                         \
    try {                                                      \
      expr;                                                    \
    } catch (const exc_type& ss_e_) {                          \
      on_fail(lib, #expr, what);                               \
    }                                                          \
  } while (0)
#define SS_CHECK_DNNL(expr)                                                                \
  SS_DETAIL_CATCHING(                                                                      \
      "oneDNN", ::dnnl::error,                                                             \
      ::fmt::format("{} (status {})", ss_e_.what(), static_cast<int>(ss_e_.status)), expr, \
      SS_DETAIL_THROW)
#define SS_CHECK_DNNL_LOG(expr)                                                            \
  SS_DETAIL_CATCHING(                                                                      \
      "oneDNN", ::dnnl::error,                                                             \
      ::fmt::format("{} (status {})", ss_e_.what(), static_cast<int>(ss_e_.status)), expr, \
      SS_DETAIL_LOG)
#define SS_CHECK_GLOO(expr) \
  SS_DETAIL_CATCHING("Gloo", ::gloo::Exception, ::std::string(ss_e_.what()), expr, SS_DETAIL_THROW)
#define SS_CHECK_GLOO_LOG(expr) \
  SS_DETAIL_CATCHING("Gloo", ::gloo::Exception, ::std::string(ss_e_.what()), expr, SS_DETAIL_LOG)
