#include "models/cpu/cpu_kernels.h"

#include <oneapi/dnnl/dnnl.h>

#include <string_view>

#include "core/check.h"

namespace scalescope {

Device& CpuKernelBackend::cpu(Device& device) {
  SS_CHECK(device.id().kind == DeviceKind::kCpu, "CPU kernels asked for on {}",
           to_string(device.id()));
  return device;
}

std::vector<LibraryVersion> CpuKernelBackend::library_versions() const {
  const dnnl_version_t* v = dnnl_version();
  std::string text = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  // Distribution builds often have no hash ("N/A").
  if (v->hash != nullptr && *v->hash != '\0' && std::string_view(v->hash) != "N/A") {
    text += fmt::format(" ({})", v->hash);
  }
  return {{"onednn", text}};
}

void clear_vector_upper_halves() {
#if defined(__x86_64__)
  // VZEROUPPER is an AVX instruction: where the CPU (or the OS) has no AVX it cannot be dirty.
  static const bool avx = __builtin_cpu_supports("avx");
  if (!avx) return;
#pragma omp parallel
  { __asm__ volatile("vzeroupper" ::: "memory"); }
#endif
}

std::vector<Precision> cpu_precisions() {
  return {Precision::kFp32, Precision::kBf16};  // oneDNN 2.6 has no fp16 training kernels
}

std::string cpu_precision_note(Precision precision) {
  if (precision != Precision::kBf16) return "";
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  if ((isa & bf16) == bf16) return "";
  return "this CPU has neither AVX512-BF16 nor AMX: oneDNN converts bf16 in software, so bf16 "
         "runs slower than fp32 here (the run's kernels name what ran)";
}

}  // namespace scalescope
