// The arithmetic a run trains in (DESIGN.md "Precision": autocast's semantics). One enum for
// the options, the kernels that read it and the reports that record it.
#pragma once

#include <string>
#include <vector>

namespace scalescope {

// kFp32: every product in fp32. kTf32: fp32 data, matrix products on tensor cores with 10-bit
// mantissa inputs (GPUs only). kBf16 and kFp16: convolutions and matrix products on 16-bit
// inputs with fp32 accumulation; weights, optimizer state, gradients' all-reduce, norms'
// statistics, softmax and the loss stay fp32.
enum class Precision { kFp32, kTf32, kBf16, kFp16 };

std::string to_string(Precision precision);  // "fp32", "tf32", "bf16", "fp16"
// Throws Error naming `name` and what is accepted.
Precision parse_precision(const std::string& name);
std::vector<std::string> precision_names();
// Whether training in `precision` scales its loss (harness/trainer/loss_scaler.h): fp16, whose
// 5-bit exponent loses small gradients to zero and large ones to infinity; bf16 has fp32's range.
inline bool scales_loss(Precision precision) {
  return precision == Precision::kFp16;
}

}  // namespace scalescope
