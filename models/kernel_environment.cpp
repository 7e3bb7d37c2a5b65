#include "models/kernel_environment.h"

#include "models/cpu/cpu_attention.h"
#include "models/cpu/padded_weight_gradient.h"
#include "models/cuda/attention_chunks.h"

namespace scalescope {

void read_kernel_environment() {
  (void)PaddedWeightGradient::matmul_asked();
  (void)cpu_attention::sgemm_products_asked();
  // The CUDA attention's, read here in every build: a script that sets them for a GPU run
  // learns of a bad value on a CPU too.
  (void)attention_chunks::chunk_rows_from_environment();
  (void)attention_chunks::kind_from_environment();
}

}  // namespace scalescope
