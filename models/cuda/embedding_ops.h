// Launchers of the embedding kernels (embedding_ops.cu), called by cuda_embedding.cpp. Each
// enqueues its work on `stream` and checks the launch, as cuda_ops.h's do; none allocates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace scalescope::cuda_ops {

// out[t] = weight[token_row(ids[t])] for the `tokens` ids, rows of `dim` floats.
void embedding_forward(const float* ids, const float* weight, float* out, int64_t tokens,
                       int64_t vocab, int64_t dim, cudaStream_t stream);

// The device memory embedding_backward needs beside its arguments, in bytes: the sorted token
// rows and positions, and CUB's radix sort's own scratch.
size_t embedding_backward_scratch(int64_t tokens, int64_t vocab);

// grad[token] = Σ over the positions holding the token of dout's row, for the tokens present
// (REQUIRES: grad zeroed before). The positions are sorted by token with a stable radix sort,
// and each token's rows are added in position order, so the result is the same bits run after
// run (no atomics). Returns the sort's status.
cudaError_t embedding_backward(const float* ids, const float* dout, float* grad, int64_t tokens,
                               int64_t vocab, int64_t dim, void* scratch, size_t scratch_bytes,
                               cudaStream_t stream);

// out = in + weight broadcast over the batch ([batch, row] against [row]).
void position_embedding_forward(const float* in, const float* weight, float* out, int64_t batch,
                                int64_t row, cudaStream_t stream);
// grad[j] = Σ_n dout[n, j] in sample order.
void position_embedding_backward(const float* dout, float* grad, int64_t batch, int64_t row,
                                 cudaStream_t stream);

}  // namespace scalescope::cuda_ops
