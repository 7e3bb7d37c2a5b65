// The attention's fused kernels' tile operations (models/cuda/flash_tiles.cuh) on the host, as
// the WMMA API defines them, over the same pointers and leading dimensions: load_matrix_sync's
// row-major operand A ((i, k) at a[i·lda + k]), B row-major ((k, j) at b[k·ldb + j]) or
// column-major ((k, j) at b[j·ldb + k]), mma_sync adding into fp32 accumulators, and
// store_matrix_sync to row-major memory. The tests that replay the kernels
// (flash_attention_test.cpp, flash_attention_backward_test.cpp) run them one warp after another.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/kernel_math/flash_attention_math.h"
#include "models/kernel_math/half_math.h"

namespace scalescope::kernel_math_test::host_wmma {

namespace km = kernel_math;
inline constexpr int kTile = 16;

// The kernels' dynamic shared memory: `bytes` bytes at an address aligned as their
// `extern __shared__ __align__(128)` array is, so that operand_at's checks see the kernels'
// own alignments.
class SharedMemory {
 public:
  explicit SharedMemory(size_t bytes) : raw_(bytes + kAlign), bytes_(bytes) {
    const auto address = reinterpret_cast<uintptr_t>(raw_.data());
    data_ = raw_.data() + (kAlign - address % kAlign) % kAlign;
  }
  unsigned char* data() { return data_; }
  void fill(unsigned char byte) { std::memset(data_, byte, bytes_); }

 private:
  static constexpr size_t kAlign = 128;
  std::vector<unsigned char> raw_;
  size_t bytes_;
  unsigned char* data_;
};

// What the WMMA API requires of every load_matrix_sync and store_matrix_sync: a 256-bit
// aligned pointer and a leading dimension of a multiple of 16 bytes (8 16-bit values, 4
// floats). A kernel breaking either reads or writes wrong values, or faults, on a GPU, which
// the arithmetic alone would not show.
template <class T>
void operand_at(const T* p, int ld) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (static_cast<size_t>(ld) * sizeof(T)) % 16 != 0) {
    throw std::logic_error(
        "a WMMA operand at " + std::to_string(reinterpret_cast<uintptr_t>(p) % 32) +
        " bytes past a 32-byte boundary, or a leading dimension of " + std::to_string(ld) +
        " elements of " + std::to_string(sizeof(T)) + " bytes");
  }
}

// A 16 × 16 accumulator, row-major.
struct Accumulator {
  float at[kTile * kTile] = {};
};

inline float operand(const uint16_t* at, km::HalfFormat format) {
  return km::from_half(*at, format);
}

// acc += A[16][16]·B[16][16].
inline void mma(Accumulator& acc, const uint16_t* a, int lda, const uint16_t* b, int ldb,
                bool b_column_major, km::HalfFormat format) {
  operand_at(a, lda);
  operand_at(b, ldb);
  for (int i = 0; i < kTile; ++i) {
    for (int j = 0; j < kTile; ++j) {
      float sum = acc.at[i * kTile + j];
      for (int k = 0; k < kTile; ++k) {
        const uint16_t* bk = b_column_major ? b + j * ldb + k : b + k * ldb + j;
        sum += operand(a + i * lda + k, format) * operand(bk, format);
      }
      acc.at[i * kTile + j] = sum;
    }
  }
}

inline void load(Accumulator& acc, const float* from, int ld) {
  operand_at(from, ld);
  for (int i = 0; i < kTile; ++i) std::memcpy(acc.at + i * kTile, from + i * ld, kTile * 4);
}
inline void store(float* to, const Accumulator& acc, int ld) {
  operand_at(to, ld);
  for (int i = 0; i < kTile; ++i) std::memcpy(to + i * ld, acc.at + i * kTile, kTile * 4);
}

// flash::warp_product_nt: c[16][kKeyTile] = a[16][K] · b[kKeyTile][K]ᵀ.
template <int K>
void product_nt(const uint16_t* a, int lda, const uint16_t* b, int ldb, float* c, int ldc,
                km::HalfFormat format) {
  for (int n = 0; n < km::FlashTiling::kKeyTile / kTile; ++n) {
    Accumulator acc;
    for (int kk = 0; kk < K / kTile; ++kk) {
      mma(acc, a + kk * kTile, lda, b + n * kTile * ldb + kk * kTile, ldb, true, format);
    }
    store(c + n * kTile, acc, ldc);
  }
}

// flash::warp_accumulate_nn: acc[n] += a[16][kKeyTile] · b[kKeyTile][HD], columns of n.
template <int HD>
void accumulate_nn(const uint16_t* a, int lda, const uint16_t* b, int ldb, Accumulator* acc,
                   km::HalfFormat format) {
  for (int kk = 0; kk < km::FlashTiling::kKeyTile / kTile; ++kk) {
    for (int n = 0; n < HD / kTile; ++n) {
      mma(acc[n], a + kk * kTile, lda, b + kk * kTile * ldb + n * kTile, ldb, false, format);
    }
  }
}

// flash::load_head_tile: rows [first, first + kQueryRows) of head `head` of a head-major buffer
// into a [rows][LD] tile, rows past the sequence zeros.
template <int HD, int LD>
void load_head_tile(const std::vector<uint16_t>& heads, int64_t head, int64_t first, int64_t seq,
                    uint16_t* tile) {
  for (int row = 0; row < km::FlashTiling::kQueryRows; ++row) {
    for (int col = 0; col < HD; ++col) {
      const int64_t pos = first + row;
      tile[row * LD + col] =
          pos < seq ? heads.at(static_cast<size_t>((head * seq + pos) * HD + col)) : 0;
    }
  }
}

}  // namespace scalescope::kernel_math_test::host_wmma
