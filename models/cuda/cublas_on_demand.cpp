// cuBLAS, loaded the first time scalescope calls it. Linked as a library, libcublas brings
// libcublasLt with it into every process at start: 151 MB resident and 0.13 s to load (on the
// machine of 2026-12-06), a CPU-only `scalescope --version` at 231 MB and 0.1-0.2 s, and so
// every test process of a CUDA build. So the binary links no cuBLAS: these are
// the definitions of the cuBLAS functions it calls (their declarations are cublas_api.h's, so
// a signature that differs does not compile), each forwarding to the library's own, which the
// first call loads with dlopen. Without the library a call returns
// CUBLAS_STATUS_NOT_INITIALIZED, and cublasGetStatusString says why it was not loaded, which
// SS_CHECK_CUBLAS puts in its error.
#include "models/cuda/cublas_on_demand.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <atomic>
#include <string>

namespace {

// The soname the toolkit's CUDA::cublas links against (CMake passes it), searched for as a
// linked library would be: the binary's RPATH, LD_LIBRARY_PATH, the loader's cache.
constexpr const char* kLibrary = SCALESCOPE_CUBLAS_SONAME;

struct Library {
  void* handle = nullptr;
  std::string error;  // why it did not load
};

std::atomic<bool> attempted{false};

const Library& library() {
  static const Library loaded = [] {
    attempted.store(true, std::memory_order_release);
    Library lib;
    // RTLD_LOCAL: its symbols must not satisfy another library's references in place of ours.
    lib.handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle == nullptr) {
      const char* why = dlerror();
      lib.error = std::string(kLibrary) + " could not be loaded: " + (why ? why : "unknown error");
    }
    return lib;
  }();
  return loaded;
}

// The library's own `name`, or nullptr where the library or the symbol is missing.
template <class Fn>
Fn symbol(const char* name) {
  const Library& lib = library();
  if (lib.handle == nullptr) return nullptr;
  // POSIX guarantees that a dlsym result converts to a function pointer.
  return reinterpret_cast<Fn>(dlsym(lib.handle, name));
}

// `name` as a function of the arguments' types: those of the definition below that calls it,
// which the compiler holds to cublas_api.h's declaration (decltype(&name) cannot name one of
// the overloads that the header declares for C++).
template <class... Args>
auto symbol_taking(const char* name, Args...) {
  return symbol<cublasStatus_t (*)(Args...)>(name);
}

}  // namespace

bool scalescope::cublas_loaded() {
  return attempted.load(std::memory_order_acquire) && library().handle != nullptr;
}

// Each resolves its symbol once; then a call costs one indirect call.
#define SS_CUBLAS_FORWARD(name, ...)                        \
  static const auto fn = symbol_taking(#name, __VA_ARGS__); \
  return fn == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : fn(__VA_ARGS__)

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  SS_CUBLAS_FORWARD(cublasCreate_v2, handle);
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  SS_CUBLAS_FORWARD(cublasDestroy_v2, handle);
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  SS_CUBLAS_FORWARD(cublasSetStream_v2, handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                  size_t bytes) {
  SS_CUBLAS_FORWARD(cublasSetWorkspace_v2, handle, workspace, bytes);
}

cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t handle,
                                                    cublasPointerMode_t mode) {
  SS_CUBLAS_FORWARD(cublasSetPointerMode_v2, handle, mode);
}

cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int* value) {
  SS_CUBLAS_FORWARD(cublasGetProperty, type, value);
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  SS_CUBLAS_FORWARD(cublasSetMathMode, handle, mode);
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const void* alpha, const void* a, cudaDataType a_type,
                                         int lda, const void* b, cudaDataType b_type, int ldb,
                                         const void* beta, void* c, cudaDataType c_type, int ldc,
                                         cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  SS_CUBLAS_FORWARD(cublasGemmEx, handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type,
                    ldb, beta, c, c_type, ldc, compute, algo);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType a_type, int lda, long long int stride_a,
    const void* b, cudaDataType b_type, int ldb, long long int stride_b, const void* beta, void* c,
    cudaDataType c_type, int ldc, long long int stride_c, int batch, cublasComputeType_t compute,
    cublasGemmAlgo_t algo) {
  SS_CUBLAS_FORWARD(cublasGemmStridedBatchedEx, handle, transa, transb, m, n, k, alpha, a, a_type,
                    lda, stride_a, b, b_type, ldb, stride_b, beta, c, c_type, ldc, stride_c, batch,
                    compute, algo);
}

// The two that name a status: the library's where it loaded, else why it did not.
const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto fn = symbol<decltype(&cublasGetStatusString)>("cublasGetStatusString");
  if (fn != nullptr) return fn(status);
  return library().handle == nullptr ? library().error.c_str()
                                     : "the loaded cuBLAS has no cublasGetStatusString";
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static const auto fn = symbol<decltype(&cublasGetStatusName)>("cublasGetStatusName");
  return fn != nullptr ? fn(status) : "not loaded";
}
