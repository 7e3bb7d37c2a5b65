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

namespace {

// Whether oneDNN runs code for `wanted` here: its ISA levels are bit sets, each holding the
// levels below it.
bool onednn_isa_has(dnnl_cpu_isa_t wanted) {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

// oneDNN 2.6 creates bf16 convolutions and products only where the CPU has AVX-512 (with
// AVX512-BF16 or AMX in hardware, without them converting in software); below that, no bf16
// primitive at all.
bool cpu_computes_bf16() {
  return onednn_isa_has(dnnl_cpu_isa_avx512_core);
}

}  // namespace

// oneDNN 2.6 has no fp16 training kernels: never fp16.
std::vector<Precision> cpu_precisions() {
  if (!cpu_computes_bf16()) return {Precision::kFp32};
  return {Precision::kFp32, Precision::kBf16};
}

std::string cpu_precision_refusal(Precision precision) {
  switch (precision) {
    case Precision::kTf32:
      return "TF32 is a format of GPU tensor cores";
    case Precision::kFp16:
      return "oneDNN 2.6 has no fp16 kernels for CPUs";
    case Precision::kBf16:
      return cpu_computes_bf16() ? ""
                                 : "oneDNN 2.6's bf16 kernels need AVX-512, which this CPU lacks";
    case Precision::kFp32:
      break;
  }
  return "";
}

std::string cpu_precision_note(Precision precision) {
  if (precision != Precision::kBf16 || onednn_isa_has(dnnl_cpu_isa_avx512_core_bf16)) return "";
  return "this CPU has neither AVX512-BF16 nor AMX: oneDNN converts bf16 in software, so bf16 "
         "runs slower than fp32 here (the run's kernels name what ran)";
}

}  // namespace scalescope
